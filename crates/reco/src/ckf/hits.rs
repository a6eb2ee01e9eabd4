//! An event's hits as the track finding reads them: each on its module, with its local
//! position, grouped by module so that a predicted crossing finds its module's hits at once.

use trackgnn_trackml::Event;
use trackgnn_trackml::geometry::Detector;

use crate::error::{Error, Result};
use crate::kalman::candidate::CandidateHit;

/// The hits of one event, by module (compressed rows over the detector's modules).
#[derive(Clone, Debug)]
pub struct HitStore {
    /// Each hit's module (index in `Detector::modules`).
    pub module: Vec<u32>,
    /// Each hit's global position \[mm\].
    pub global: Vec<[f64; 3]>,
    /// Each hit's local position (u, v) on its module \[mm\], as measured (no offset subtracted).
    pub local: Vec<[f64; 2]>,
    offsets: Vec<u32>,
    items: Vec<u32>,
}

impl HitStore {
    /// The hits of `event` on `det`.
    ///
    /// # Errors
    /// [`Error::HitOffDetector`] for a hit whose module is not one of `det`'s.
    pub fn new(det: &Detector, event: &Event) -> Result<HitStore> {
        let h = &event.hits;
        let n = h.len();
        let mut module = Vec::with_capacity(n);
        let mut global = Vec::with_capacity(n);
        let mut local = Vec::with_capacity(n);
        for i in 0..n {
            let m = det.module_index(h.module[i]).ok_or(Error::HitOffDetector {
                event_id: event.event_id,
                hit_id: h.hit_id[i],
                module: h.module[i],
            })?;
            let g = [f64::from(h.x[i]), f64::from(h.y[i]), f64::from(h.z[i])];
            let l = det.modules[m].to_local(g);
            module.push(m as u32);
            global.push(g);
            local.push([l[0], l[1]]);
        }
        let mut offsets = vec![0u32; det.modules.len() + 1];
        for &m in &module {
            offsets[m as usize + 1] += 1;
        }
        for k in 1..offsets.len() {
            offsets[k] += offsets[k - 1];
        }
        let mut fill = offsets.clone();
        let mut items = vec![0u32; n];
        for (i, &m) in module.iter().enumerate() {
            items[fill[m as usize] as usize] = i as u32;
            fill[m as usize] += 1;
        }
        Ok(HitStore { module, global, local, offsets, items })
    }

    /// The number of hits.
    pub fn len(&self) -> usize {
        self.module.len()
    }

    /// Whether there are no hits.
    pub fn is_empty(&self) -> bool {
        self.module.is_empty()
    }

    /// Hit `i` (an index in the event) as the fit reads it.
    ///
    /// # Panics
    /// If `i` is not an index of the event's hits.
    pub fn candidate_hit(&self, i: u32) -> CandidateHit {
        let i = i as usize;
        CandidateHit { module: self.module[i] as usize, global: self.global[i], local: self.local[i] }
    }

    /// Every hit of the event, in its order, as the fit reads them.
    pub fn candidate_hits(&self) -> Vec<CandidateHit> {
        (0..self.len() as u32).map(|i| self.candidate_hit(i)).collect()
    }

    /// The hits (indices in the event) on module `module` (an index of `Detector::modules`).
    ///
    /// # Panics
    /// If `module` is not an index of the detector the store was built for.
    pub fn on_module(&self, module: usize) -> &[u32] {
        &self.items[self.offsets[module] as usize..self.offsets[module + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::ids::ModuleId;

    #[test]
    fn hits_are_grouped_by_module_and_a_hit_off_the_detector_is_an_error() {
        let det = Detector::trackml();
        let mut event = Event::default();
        let (a, b) = (&det.modules[10], &det.modules[500]);
        for (id, m) in [(1, a), (2, b), (3, a)] {
            let c = m.center;
            event.hits.push(id, [c[0] as f32, c[1] as f32, c[2] as f32], m.id);
        }
        let store = HitStore::new(&det, &event).unwrap();
        assert_eq!(store.on_module(10), [0, 2]);
        assert_eq!(store.on_module(500), [1]);
        assert!(store.on_module(11).is_empty());
        assert!(store.local[1][0].abs() < 1e-4 && store.local[1][1].abs() < 1e-4);
        event.hits.push(4, [0.0, 0.0, 0.0], ModuleId::new(99, 2, 1));
        event.event_id = 7;
        let err = HitStore::new(&det, &event).unwrap_err().to_string();
        assert!(err.contains("hit 4") && err.contains("event 7"), "{err}");
    }
}
