//! Candidate selection after track building, by the edge scores a candidate is built on.
//!
//! Track following keeps edges down to a low score cut, so that a target whose true edge
//! scores 0.05 among fakes is still followed; in dense events the same low cut also chains
//! hits of different particles into candidates held together by low-scoring edges. A
//! candidate's score ([`candidate_scores`]) sums up how strongly the GNN joins its hits, and
//! [`select_candidates`] drops the candidates below a cut: the track selection after
//! finding that combinatorial track finders apply with their fit quality.

use serde::{Deserialize, Serialize};

use super::{NO_TRACK, ScoredEdges, number_tracks};

/// How [`candidate_scores`] sums up the edges a candidate is built on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CandidateScore {
    /// Its weakest link: the lowest, over its hits that an edge from another of its hits
    /// reaches (walked outward, [`ScoredEdges::outward`]), of the best such edge's score (1
    /// if none does). A candidate chaining the hits of two particles is as weak as the edge
    /// between them, however well each part is joined. The default: on 4 mu = 200 events,
    /// at a primary efficiency of 0.984 it left a fake rate of 0.026 where the mean left
    /// 0.031, and it reached 0.011 at 0.973, which the mean reached only below 0.955.
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(help = "The lowest over its hits of the best score of an edge reaching the hit from another of its \
                      hits (hits no such edge reaches left out)")
    )]
    WeakestLink,
    /// The mean over its hits of the best score among the edges joining the hit to another
    /// of its hits, either way; a hit that no such edge reaches (one the hit search added
    /// beyond the graph's edges) counts 0.
    #[cfg_attr(
        feature = "clap",
        value(help = "The mean over its hits of the best score of an edge joining the hit to another of its hits \
                      (0 for none)")
    )]
    MeanBestEdge,
}

/// The score of each candidate of `track_ids` (one id per node, [`NO_TRACK`] for none), at
/// index `id − 1`, as `measure` defines it. NaN scores count 0.
///
/// # Panics
/// If `track_ids.len() != edges.num_nodes` or an edge's node is out of range.
#[track_caller]
pub fn candidate_scores(edges: &ScoredEdges<'_>, track_ids: &[u32], measure: CandidateScore) -> Vec<f64> {
    assert_eq!(track_ids.len(), edges.num_nodes, "one track id per node");
    let num = track_ids.iter().copied().max().unwrap_or(NO_TRACK) as usize;
    let best = best_links(edges, track_ids, measure);
    let ids = || track_ids.iter().zip(&best).filter(|(id, _)| **id != NO_TRACK);
    match measure {
        CandidateScore::MeanBestEdge => {
            let (mut sum, mut hits) = (vec![0.0f64; num], vec![0usize; num]);
            for (&id, &b) in ids() {
                sum[id as usize - 1] += f64::from(b.max(0.0));
                hits[id as usize - 1] += 1;
            }
            sum.iter().zip(&hits).map(|(&s, &n)| if n == 0 { 0.0 } else { s / n as f64 }).collect()
        }
        CandidateScore::WeakestLink => {
            let mut weakest = vec![1.0f64; num];
            for (&id, &b) in ids().filter(|(_, b)| **b >= 0.0) {
                weakest[id as usize - 1] = weakest[id as usize - 1].min(f64::from(b));
            }
            weakest
        }
    }
}

/// Per node: the best score of an edge joining it to another node of its candidate (for the
/// weakest link, of an edge reaching it from further in, [`ScoredEdges::outward`]); −1 for
/// none. NaN scores count 0.
pub(crate) fn best_links(edges: &ScoredEdges<'_>, track_ids: &[u32], measure: CandidateScore) -> Vec<f32> {
    let mut best = vec![-1.0f32; edges.num_nodes];
    for ((&s, &d), &score) in edges.src.iter().zip(edges.dst).zip(edges.scores) {
        let (s, d) = (s as usize, d as usize);
        if s == d || track_ids[s] == NO_TRACK || track_ids[s] != track_ids[d] {
            continue;
        }
        let score = if score.is_nan() { 0.0 } else { score };
        match measure {
            CandidateScore::MeanBestEdge => {
                best[s] = best[s].max(score);
                best[d] = best[d].max(score);
            }
            CandidateScore::WeakestLink => {
                let (_, to) = edges.outward(s as u32, d as u32);
                best[to as usize] = best[to as usize].max(score);
            }
        }
    }
    best
}

/// `track_ids` without the candidates of at most `max_hits` hits whose [`candidate_scores`]
/// by `measure` are below `min_score` (their nodes get [`NO_TRACK`]), the others renumbered `1, 2, …` in
/// the order of their smallest node, as every builder numbers them. `min_score ≤ 0` keeps
/// every candidate.
///
/// Why only the short ones: in dense events most candidates of 5 or 6 hits chain hits of
/// several particles (on 4 mu = 200 events, 81% of the 5-hit candidates of track following
/// were fakes and 56% of the 6-hit ones, against 0.4% of those of 10 hits), while a long
/// candidate is seldom one, whatever its score, and may hold hits the hit search added
/// without an edge.
///
/// # Panics
/// As [`candidate_scores`].
#[track_caller]
pub fn select_candidates(
    edges: &ScoredEdges<'_>,
    track_ids: &[u32],
    measure: CandidateScore,
    min_score: f64,
    max_hits: usize,
) -> Vec<u32> {
    if min_score <= 0.0 {
        return track_ids.to_vec();
    }
    let scores = candidate_scores(edges, track_ids, measure);
    let mut hits = vec![0usize; scores.len()];
    for &id in track_ids.iter().filter(|&&id| id != NO_TRACK) {
        hits[id as usize - 1] += 1;
    }
    keep_candidates(track_ids, |c| hits[c] > max_hits || scores[c] >= min_score)
}

/// `track_ids` with only the candidates `keep(id − 1)` holds (the others' nodes get
/// [`NO_TRACK`]), renumbered `1, 2, …` in the order of their smallest node, as every builder
/// numbers them.
pub(crate) fn keep_candidates(track_ids: &[u32], keep: impl Fn(usize) -> bool) -> Vec<u32> {
    let labels: Vec<u32> = track_ids.iter().map(|&id| if id == NO_TRACK { u32::MAX } else { id - 1 }).collect();
    number_tracks(&labels, |label| keep(label as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_scores_the_mean_of_its_hits_best_edges() {
        // Candidate 1: nodes 0-1-2-3, edges 0.9, 0.8, 0.1 along it, a 0.95 edge 0→2 inside it
        // and a 0.99 edge 3→4 to another candidate (not counted). Candidate 2: nodes 4-5-6,
        // edges 0.2, 0.3, and node 7 added without an edge.
        let src = [0, 1, 2, 0, 3, 4, 5];
        let dst = [1, 2, 3, 2, 4, 5, 6];
        let scores = [0.9, 0.8, 0.1, 0.95, 0.99, 0.2, 0.3];
        let edges = ScoredEdges::new(9, &src, &dst, &scores);
        let ids = [1, 1, 1, 1, 2, 2, 2, 2, NO_TRACK];
        let s = candidate_scores(&edges, &ids, CandidateScore::MeanBestEdge);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        // Best per hit: 0.95, 0.9, 0.95, 0.1 | 0.2, 0.3, 0.3, 0.
        assert!(close(s[0], (0.95 + 0.9 + 0.95 + 0.1) / 4.0), "{s:?}");
        assert!(close(s[1], (0.2 + 0.3 + 0.3) / 4.0), "{s:?}");

        let (all, mean) = (usize::MAX, CandidateScore::MeanBestEdge);
        assert_eq!(select_candidates(&edges, &ids, mean, 0.5, all), [1, 1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(select_candidates(&edges, &ids, mean, 0.0, all), ids);
        assert_eq!(select_candidates(&edges, &ids, mean, 0.99, all), [0; 9]);
        // Candidates of more than max_hits hits are kept whatever their score.
        assert_eq!(select_candidates(&edges, &ids, mean, 0.99, 3), ids);
        assert_eq!(select_candidates(&edges, &ids, mean, 0.99, 4), [0; 9]);
        // Dropping the first candidate renumbers the second.
        let swapped = [2, 2, 2, 2, 1, 1, 1, 1, NO_TRACK];
        assert_eq!(select_candidates(&edges, &swapped, mean, 0.5, all), [1, 1, 1, 1, 0, 0, 0, 0, 0]);
        let gap = [3, 3, 3, 3, 1, 1, 1, 1, NO_TRACK];
        assert_eq!(select_candidates(&edges, &gap, mean, 0.1, all), [1, 1, 1, 1, 2, 2, 2, 2, 0]);

        // Weakest link, the same candidates. Best edge reaching each hit from its candidate:
        // -, 0.9, 0.95, 0.1 | -, 0.2, 0.3, - (node 7: no edge, not counted).
        let w = candidate_scores(&edges, &ids, CandidateScore::WeakestLink);
        assert!(close(w[0], 0.1) && close(w[1], 0.2), "{w:?}");
        let weakest = CandidateScore::WeakestLink;
        assert_eq!(select_candidates(&edges, &ids, weakest, 0.15, all), [0, 0, 0, 0, 1, 1, 1, 1, 0]);
    }

    #[test]
    fn the_weakest_link_finds_two_tracks_chained_together() {
        // Nodes 0-1-2 and 3-4-5 joined strongly, 2 → 3 weakly: one candidate of 6 hits.
        let (src, dst) = ([0, 1, 2, 3, 4], [1, 2, 3, 4, 5]);
        let scores = [0.99, 0.99, 0.05, 0.99, 0.99];
        let edges = ScoredEdges::new(6, &src, &dst, &scores);
        let ids = [1; 6];
        // Every hit has a 0.99 edge within the candidate: the mean sees a good candidate.
        let mean = candidate_scores(&edges, &ids, CandidateScore::MeanBestEdge)[0];
        assert!((mean - 0.99).abs() < 1e-6, "{mean}");
        let weakest = candidate_scores(&edges, &ids, CandidateScore::WeakestLink)[0];
        assert!((weakest - 0.05).abs() < 1e-6, "{weakest}");
        // A lone hit, or hits without edges, are not held by a weak link.
        assert_eq!(candidate_scores(&edges, &[0, 0, 0, 0, 0, 1], CandidateScore::WeakestLink), [1.0]);
    }
}
