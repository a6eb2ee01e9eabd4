//! Domain parallelism in one process: a graph split into partitions run on threads, with their
//! halos exchanged ([`ThreadHalo`]), gives the whole graph's logits, loss and parameter
//! gradients — every update order, structure, checkpointing mode and precision.

mod common;

use std::sync::Arc;

use common::{random_graph, to_f32};
use trackgnn_engine::halo::{Partition, PartitionError, ThreadHalo};
use trackgnn_engine::loss::{bce_with_logits, bce_with_logits_over};
use trackgnn_engine::{
    Checkpointing, ForwardCache, GraphInput, InteractionGnn, ModelConfig, Precision, Real, UpdateOrder,
};
use trackgnn_trackml::rng::Rng;

/// Logits (one per edge), loss and parameter gradients of one step.
struct Step<T> {
    logits: Vec<T>,
    /// The logits of the cut edges' second copies (the counted ones elsewhere).
    copies: Vec<T>,
    loss: f64,
    grad: Vec<T>,
}

fn whole_step<T: Real>(model: &InteractionGnn<T>, g: &GraphInput<T>, y: &[u8], w: &[T]) -> Step<T> {
    let mut m = model.clone();
    let mut cache = ForwardCache::default();
    m.forward(g, &mut cache);
    let mut dl = vec![T::ZERO; g.num_edges()];
    let loss = bce_with_logits(&cache.logits, y, Some(w), 2.0, &mut dl);
    m.params.zero_grad();
    m.backward(g, &mut cache, &dl);
    Step { copies: cache.logits.clone(), logits: cache.logits, loss, grad: m.params.grad }
}

/// The step split by `owner` into partitions on threads: the logits put back in the whole
/// graph's edge order (each from the rank that counts the edge, after checking that the other
/// copy agrees), the losses and the gradients summed over the ranks in rank order.
fn split_step<T: Real + 'static>(
    model: &InteractionGnn<T>,
    g: &GraphInput<T>,
    y: &[u8],
    w: &[T],
    owner: &[u32],
    parts: usize,
) -> Step<T> {
    let partitions = Partition::split(g.num_nodes, &g.src, &g.dst, owner, parts).unwrap();
    let halos = ThreadHalo::<T>::group(&partitions);
    let e_all = g.num_edges();
    let ranks: Vec<(Vec<T>, f64, Vec<T>)> = std::thread::scope(|s| {
        let handles: Vec<_> = partitions
            .iter()
            .zip(halos)
            .map(|(p, halo)| {
                let mut m = model.clone();
                s.spawn(move || {
                    let local = p.local_input(g).with_halo(Arc::new(halo));
                    let yl = p.edge_values(y);
                    let wl: Vec<T> = p
                        .edge_values(w)
                        .iter()
                        .zip(&p.edge_counted)
                        .map(|(&v, &c)| if c { v } else { T::ZERO })
                        .collect();
                    let mut cache = ForwardCache::default();
                    m.forward(&local, &mut cache);
                    let mut dl = vec![T::ZERO; local.num_edges()];
                    let loss = bce_with_logits_over(&cache.logits, &yl, Some(&wl), 2.0, e_all, &mut dl);
                    m.params.zero_grad();
                    m.backward(&local, &mut cache, &dl);
                    (cache.logits, loss, m.params.grad)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
    });
    // The logit of each edge from the rank that counts it, and from the other copy of a cut edge
    // (which sees the same inputs, so computes the same logit to rounding).
    let mut logits = vec![T::ZERO; e_all];
    let mut copies = vec![None; e_all];
    for (p, (l, _, _)) in partitions.iter().zip(&ranks) {
        for (k, &e) in p.edges.iter().enumerate() {
            if p.edge_counted[k] {
                logits[e as usize] = l[k];
            } else {
                copies[e as usize] = Some(l[k]);
            }
        }
    }
    let copies: Vec<T> = copies.iter().zip(&logits).map(|(c, &l)| c.unwrap_or(l)).collect();
    let mut grad = vec![T::ZERO; model.params.grad.len()];
    for (_, _, gr) in &ranks {
        grad.iter_mut().zip(gr).for_each(|(a, &b)| *a += b);
    }
    Step { logits, copies, loss: ranks.iter().map(|r| r.1).sum(), grad }
}

/// Largest |a − b| / max(|b|, floor) and the relative norm ‖a − b‖ / ‖b‖.
fn errors<T: Real>(a: &[T], b: &[T]) -> (f64, f64) {
    let (mut d2, mut n2, mut worst) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.to_f64(), y.to_f64());
        d2 += (x - y).powi(2);
        n2 += y.powi(2);
        worst = worst.max((x - y).abs() / y.abs().max(1e-3));
    }
    (worst, (d2 / n2.max(1e-300)).sqrt())
}

/// Owners that follow no structure of the graph: many cut edges, a large halo.
fn scattered_owners(n: usize, parts: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.below(parts as u64) as u32).collect()
}

/// Owners in contiguous blocks of node ids.
fn block_owners(n: usize, parts: usize) -> Vec<u32> {
    (0..n).map(|i| (i * parts / n) as u32).collect()
}

fn configs() -> Vec<ModelConfig> {
    vec![
        ModelConfig { hidden: 8, iterations: 3, ..ModelConfig::default() },
        ModelConfig { hidden: 8, iterations: 3, update_order: UpdateOrder::NodeFirst, ..ModelConfig::bench_spec() },
        ModelConfig { hidden: 8, iterations: 4, recurrent: false, residual: false, ..ModelConfig::default() },
        ModelConfig { hidden: 8, iterations: 3, ..ModelConfig::acorn() },
    ]
}

#[test]
fn a_split_graph_gives_the_whole_graphs_step_in_f64() {
    let (g, y, w) = random_graph(300, 2000, 3, 2, 5);
    for cfg in configs() {
        let mut model = InteractionGnn::<f64>::new(cfg.clone(), 3, 2, &mut Rng::new(3));
        for mode in [Checkpointing::NONE, Checkpointing::PER_ITERATION, Checkpointing::every(2)] {
            model.checkpointing = mode;
            let whole = whole_step(&model, &g, &y, &w);
            for (parts, owner) in [(2, block_owners(300, 2)), (3, scattered_owners(300, 3, 9))] {
                let split = split_step(&model, &g, &y, &w, &owner, parts);
                let logit_err = errors(&split.logits, &whole.logits).0.max(errors(&split.copies, &whole.logits).0);
                let (_, grad_err) = errors(&split.grad, &whole.grad);
                let loss_err = (split.loss - whole.loss).abs() / whole.loss;
                assert!(
                    logit_err < 1e-12 && grad_err < 1e-12 && loss_err < 1e-13,
                    "{parts} parts, {mode}, {cfg:?}: logits {logit_err:e}, gradients {grad_err:e}, loss {loss_err:e}"
                );
            }
        }
    }
}

#[test]
fn a_split_graph_gives_the_whole_graphs_step_in_f32_and_bf16() {
    let (g, y, w) = random_graph(300, 2000, 3, 2, 6);
    let (g32, w32) = to_f32(&g, &w);
    for cfg in configs() {
        let base = InteractionGnn::<f32>::new(cfg.clone(), 3, 2, &mut Rng::new(4));
        for precision in [Precision::F32, Precision::Bf16] {
            let modes = [Checkpointing::NONE, Checkpointing::every(2), Checkpointing::every(2).with_bf16_states()];
            for mode in modes {
                let mut model = base.clone();
                model.set_precision(precision);
                model.checkpointing = mode;
                let whole = whole_step(&model, &g32, &y, &w32);
                let split = split_step(&model, &g32, &y, &w32, &scattered_owners(300, 2, 8), 2);
                let logit_err = errors(&split.logits, &whole.logits).0.max(errors(&split.copies, &whole.logits).0);
                let (_, grad_err) = errors(&split.grad, &whole.grad);
                // Only the sums of node gradients and of parameter gradients come in another
                // order: f32 rounding, which the bf16 products amplify when a gradient rounds
                // to the neighbouring bf16 value (one bf16 step is 2^-8 relative).
                let tol = if precision == Precision::F32 { 1e-5 } else { 4e-3 };
                assert!(
                    logit_err < tol && grad_err < tol,
                    "{precision} {mode}, {cfg:?}: logits {logit_err:e}, gradients {grad_err:e}"
                );
            }
        }
    }
}

#[test]
fn a_partition_counts_every_edge_once_and_its_plan_matches_its_peers() {
    let (g, _, _) = random_graph(200, 1500, 3, 0, 7);
    let owner = scattered_owners(200, 3, 1);
    let parts = Partition::split(g.num_nodes, &g.src, &g.dst, &owner, 3).unwrap();
    let mut counted = vec![0; g.num_edges()];
    for p in &parts {
        assert!(p.nodes[..p.owned_nodes].iter().all(|&v| owner[v as usize] as usize == p.rank));
        assert!(p.nodes[p.owned_nodes..].iter().all(|&v| owner[v as usize] as usize != p.rank));
        for (k, &e) in p.edges.iter().enumerate() {
            let (s, d) = (g.src[e as usize] as usize, g.dst[e as usize] as usize);
            assert!(owner[s] as usize == p.rank || owner[d] as usize == p.rank, "edge {e} touches no owned node");
            counted[e as usize] += p.edge_counted[k] as usize;
        }
        for q in &parts {
            let sent: Vec<u32> = p.plan.send[q.rank].iter().map(|&r| p.nodes[r as usize]).collect();
            let received: Vec<u32> = q.plan.recv[p.rank].iter().map(|&r| q.nodes[r as usize]).collect();
            assert_eq!(sent, received, "rank {} → {}", p.rank, q.rank);
        }
        assert_eq!(p.plan.halo_rows(), p.halo_nodes());
    }
    assert!(counted.iter().all(|&c| c == 1), "an edge counted other than once");
    assert_eq!(
        Partition::split(3, &[0], &[1], &[0, 0, 0], 2),
        Err(PartitionError::EmptyPartition { rank: 1, parts: 2, nodes: 3 })
    );
    assert_eq!(
        Partition::split(3, &[0], &[1], &[0, 2, 1], 2),
        Err(PartitionError::OwnerOutOfRange { node: 1, owner: 2, parts: 2 })
    );
    assert_eq!(Partition::split(3, &[0], &[1], &[0, 1], 2), Err(PartitionError::OwnerCount { owners: 2, nodes: 3 }));
}
