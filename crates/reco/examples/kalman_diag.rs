//! Diagnosis of the truth-seeded fits' pulls at one pT (issue 40): the cot θ and z0 pulls per
//! |η| bin and hit content, the true parameters propagated to each hit's module against the
//! generator's true crossing, and the hits' pulls about the true crossing per module kind.
//!
//! For the fits with a cot θ or z0 pull over 10, every hit: hit − true crossing, the true
//! parameters transported − true crossing, the smoothed residual, the transport Jacobian against
//! numeric derivatives and whether the smoothed states carry into each other.
//!
//! ```sh
//! cargo run -p trackgnn-reco --example kalman_diag -- [PARTICLES] [PT]
//! ```
//! (defaults: 2000 muons at 100 GeV, |η| < 2.5; the fits use every hit.)

use std::collections::HashMap;

use trackgnn_reco::kalman::measurement::{KINDS, module_kind};
use trackgnn_reco::kalman::params::{PHI, THETA, direction};
use trackgnn_reco::kalman::perigee::{COT_THETA, Z0};
use trackgnn_reco::kalman::{
    FitContext, KalmanFitter, MeasurementModel, ReferenceSurface, SeedSmearing, TruthFit, true_perigee,
    truth_seeded_fits,
};
use trackgnn_simulate::{ChargedSpecies, Generator, SimConfig, SingleParticles};
use trackgnn_trackml::Detector;
use trackgnn_trackml::rng::Rng;

const PER_EVENT: usize = 500;

fn stats(v: &mut [f64]) -> String {
    if v.len() < 3 {
        return format!("n {:>5}", v.len());
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    v.sort_by(f64::total_cmp);
    let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    let core = (q(0.8413) - q(0.1587)) / 2.0;
    format!(
        "n {:>5} mean {:+9.4} std {:8.4} core {:8.4} max|.| {:9.4}",
        v.len(),
        mean,
        std,
        core,
        q(0.0).abs().max(q(1.0).abs())
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let pt: f64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100.0);
    let species = ChargedSpecies::Muon;
    let single = SingleParticles::new(species, PER_EVENT, [pt, pt], [-2.5, 2.5]);
    let g = Generator::new(
        Detector::trackml(),
        SimConfig { single: Some(single), noise_fraction: 0.0, ..SimConfig::default() },
    );
    let mut material = g.config().material();
    material.beam_pipe[0] = 29.0;
    let ctx = FitContext::new(g.detector(), g.field(), material, species.species().mass());
    let measurement = MeasurementModel::default();
    let fitter = KalmanFitter::new(ctx, measurement);
    let det = g.detector();
    let smearing = SeedSmearing::default();
    let mut rng = Rng::new(103);
    // Per category: cot θ and z0 pulls.
    let mut cats: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
    let mut add = |name: String, p: [f64; 5]| {
        if let Some(c) = cats.iter_mut().find(|c| c.0 == name) {
            c.1.push(p[COT_THETA]);
            c.2.push(p[Z0]);
        } else {
            cats.push((name, vec![p[COT_THETA]], vec![p[Z0]]));
        }
    };
    // Per kind: propagation of the truth − true crossing (u, v); hit − true crossing over σ (v); by width.
    let mut prop_du: Vec<Vec<f64>> = vec![Vec::new(); 6];
    let mut prop_dv: Vec<Vec<f64>> = vec![Vec::new(); 6];
    let mut hit_pv: Vec<Vec<f64>> = vec![Vec::new(); 6];
    let mut hit_pu: Vec<Vec<f64>> = vec![Vec::new(); 6];
    let mut worst: Vec<(f64, String)> = Vec::new();
    // Per kind and signed expected width along v (cells): hit − true crossing in v [um].
    const SW: [f64; 12] = [-16.0, -8.0, -4.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0];
    let mut by_width: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); SW.len() + 1]; 6];
    for id in 1..=n.div_ceil(PER_EVENT) as u64 {
        let (event, _) = g.event(13, id);
        let fits: Vec<TruthFit> = truth_seeded_fits(&fitter, &event, 7, &smearing, &mut rng, None)?;
        let truth = event.truth.as_ref().unwrap();
        let parts = event.particles.as_ref().unwrap();
        let mut hit_of: HashMap<(u64, usize), usize> = HashMap::new();
        for i in 0..event.hits.len() {
            hit_of.insert((truth.particle_id[i].0, det.module_index(event.hits.module[i]).unwrap()), i);
        }
        for f in &fits {
            let k = parts.particle_id.iter().position(|p| *p == f.particle).unwrap();
            let eta = parts.eta(k).abs();
            let p = f.pulls();
            let kinds: Vec<usize> = f.fit.states.iter().map(|s| module_kind(det, s.measurement.module)).collect();
            let has = |k: usize| kinds.iter().filter(|&&x| x == k).count();
            let eb = if eta < 1.0 {
                "0-1"
            } else if eta < 1.5 {
                "1-1.5"
            } else if eta < 2.0 {
                "1.5-2"
            } else {
                "2-2.5"
            };
            add(format!("|eta| {eb}"), p);
            add(format!("pixel end-cap hits {}", if has(3) > 0 { "yes" } else { "no" }), p);
            add(format!("strip end-cap hits {}", if has(4) + has(5) > 0 { "yes" } else { "no" }), p);
            add(format!("pixel barrel hits {}", has(0).min(4)), p);
            add("all".to_string(), p);
            let vertex = [f64::from(parts.vx[k]), f64::from(parts.vy[k]), f64::from(parts.vz[k])];
            let mom = [f64::from(parts.px[k]), f64::from(parts.py[k]), f64::from(parts.pz[k])];
            let tp = true_perigee(&fitter, f64::from(parts.q[k]), vertex, mom)?;
            if p[COT_THETA].abs() > 10.0 || p[Z0].abs() > 10.0 {
                let mut d = format!(
                    "eta {:.3} pulls cot {:.1} z0 {:.1} chi2 {:.1}/{} vz {:.2} vr {:.4}; fit z0 {:.4} +- {:.4} truth {:.4}; cot {:.6} +- {:.6} truth {:.6}\n",
                    parts.eta(k),
                    p[COT_THETA],
                    p[Z0],
                    f.fit.chi2,
                    f.fit.ndf,
                    parts.vz[k],
                    parts.vertex_r(k),
                    f.fit.perigee_parameters().values()[Z0],
                    f.fit.perigee_parameters().sigmas()[Z0],
                    f.truth.values()[Z0],
                    f.fit.perigee_parameters().values()[COT_THETA],
                    f.fit.perigee_parameters().sigmas()[COT_THETA],
                    f.truth.values()[COT_THETA],
                );
                for s in &f.fit.states {
                    let m = s.measurement.module;
                    let Some(&i) = hit_of.get(&(f.particle.0, m)) else { continue };
                    let module = &det.modules[m];
                    let tl = module.to_local([f64::from(truth.tx[i]), f64::from(truth.ty[i]), f64::from(truth.tz[i])]);
                    let t = ctx.transport(ReferenceSurface::BeamLine, &tp, ReferenceSurface::Module(m))?;
                    let c = measurement.corrected(det, m, s.measurement.local);
                    let ld = module.dir_to_local([
                        f64::from(truth.tpx[i]),
                        f64::from(truth.tpy[i]),
                        f64::from(truth.tpz[i]),
                    ]);
                    d += &format!(
                        "    kind {} mod {:>5} {:?} r {:7.2} z {:8.2} hit-true u,v {:+8.1} {:+8.1} um; prop-true {:+6.1} {:+6.1}; smoothed res v {:+8.1} um chi2 {:6.1}; v {:+7.3} of hv {:.3}; dir_v/dir_w {:+.3}; smoothed-true theta {:+.2e} +- {:.1e} q/p {:+.2e} +- {:.1e}\n",
                        module_kind(det, m),
                        m,
                        module.id,
                        f64::from(truth.tx[i]).hypot(f64::from(truth.ty[i])),
                        truth.tz[i],
                        (c[0] - tl[0]) * 1e3,
                        (c[1] - tl[1]) * 1e3,
                        (t.params[0] - tl[0]) * 1e3,
                        (t.params[1] - tl[1]) * 1e3,
                        (c[1] - s.smoothed.params[1]) * 1e3,
                        s.chi2,
                        tl[1],
                        module.hv,
                        ld[1] / ld[2],
                        s.smoothed.params[THETA]
                            - f64::from(truth.tpx[i]).hypot(f64::from(truth.tpy[i])).atan2(f64::from(truth.tpz[i])),
                        s.smoothed.cov[(THETA, THETA)].sqrt(),
                        s.smoothed.params[4] - f64::from(parts.q[k]) / mom[0].hypot(mom[1]).hypot(mom[2]),
                        s.smoothed.cov[(4, 4)].sqrt(),
                    );
                }
                // The transport Jacobians between consecutive hits against numeric derivatives.
                let mut from = ReferenceSurface::BeamLine;
                let mut x = f.fit.perigee.params;
                for st in &f.fit.states {
                    let to = ReferenceSurface::Module(st.measurement.module);
                    let t = ctx.transport(from, &x, to)?;
                    let mut worst_col = (0usize, 0.0f64, String::new());
                    for c in 0..5 {
                        let eps = if c == 4 { 1e-7 } else { 1e-6 };
                        let (mut hi, mut lo) = (x, x);
                        hi[c] += eps;
                        lo[c] -= eps;
                        let num =
                            (ctx.transport(from, &hi, to)?.params - ctx.transport(from, &lo, to)?.params) / (2.0 * eps);
                        let dev = (num - t.jacobian.column(c)).norm() / num.norm().max(1.0);
                        if dev > worst_col.1 {
                            worst_col =
                                (c, dev, format!("num {:?} ana {:?}", num.as_slice(), t.jacobian.column(c).as_slice()));
                        }
                    }
                    d += &format!(
                        "      jacobian to {:?}: worst column {} rel dev {:.2e} {}; smoothed consistency dv {:+.1} um dtheta {:+.2e}; filtered-smoothed theta {:+.2e} v {:+.1} um\n",
                        to,
                        worst_col.0,
                        worst_col.1,
                        if worst_col.1 > 1e-3 { &worst_col.2 } else { "" },
                        (t.params[1] - st.smoothed.params[1]) * 1e3,
                        t.params[THETA] - st.smoothed.params[THETA],
                        st.filtered.params[THETA] - st.smoothed.params[THETA],
                        (st.filtered.params[1] - st.smoothed.params[1]) * 1e3,
                    );
                    from = to;
                    x = st.smoothed.params;
                }
                worst.push((p[COT_THETA].abs().max(p[Z0].abs()), d));
            }
            for s in &f.fit.states {
                let m = s.measurement.module;
                let kind = module_kind(det, m);
                let Some(&i) = hit_of.get(&(f.particle.0, m)) else { continue };
                let module = &det.modules[m];
                let tl = module.to_local([f64::from(truth.tx[i]), f64::from(truth.ty[i]), f64::from(truth.tz[i])]);
                let t = ctx.transport(ReferenceSurface::BeamLine, &tp, ReferenceSurface::Module(m))?;
                prop_du[kind].push((t.params[0] - tl[0]) * 1000.0);
                prop_dv[kind].push((t.params[1] - tl[1]) * 1000.0);
                let dir = direction(t.params[PHI], t.params[THETA]);
                let c = measurement.corrected(det, m, s.measurement.local);
                let cov = measurement.hit_covariance(det, m, [dir[0], dir[1], dir[2]], c);
                hit_pu[kind].push((c[0] - tl[0]) / cov[(0, 0)].sqrt());
                hit_pv[kind].push((c[1] - tl[1]) / cov[(1, 1)].sqrt());
                let ld =
                    module.dir_to_local([f64::from(truth.tpx[i]), f64::from(truth.tpy[i]), f64::from(truth.tpz[i])]);
                let w = module.thickness * ld[1] / ld[2] / module.pitch_v;
                let b = SW.iter().rposition(|&lo| w >= lo).map_or(0, |x| x + 1);
                by_width[kind][b].push((c[1] - tl[1]) * 1000.0);
            }
        }
    }
    println!("pT {pt} GeV: pulls of cot theta and z0 by category");
    for (name, c, z) in &mut cats {
        println!("{name:<26} cot {}", stats(c));
        println!("{:<26} z0  {}", "", stats(z));
    }
    println!(
        "\ntrue parameters transported to the module - true crossing [um], and the hit's pull about the true crossing"
    );
    for k in 0..6 {
        println!("{:<20} du   {}", KINDS[k], stats(&mut prop_du[k]));
        println!("{:<20} dv   {}", "", stats(&mut prop_dv[k]));
        println!("{:<20} pu   {}", "", stats(&mut hit_pu[k]));
        println!("{:<20} pv   {}", "", stats(&mut hit_pv[k]));
    }
    println!("\nhit - true crossing in v [um] by signed expected width along v (w/pitch_v * tan), lower edges {SW:?}");
    for k in 0..6 {
        for (b, v) in by_width[k].iter_mut().enumerate() {
            if v.len() >= 3 {
                let lo = if b == 0 { f64::NEG_INFINITY } else { SW[b - 1] };
                println!("{:<20} from {:>6} {}", KINDS[k], lo, stats(v));
            }
        }
    }
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("\n{} fits with a |pull| > 10; the worst:", worst.len());
    for w in worst.iter().take(6) {
        println!("  {}", w.1);
    }
    Ok(())
}
