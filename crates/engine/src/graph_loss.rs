//! One graph's loss and its validation figures through the device seam: what the trainer and
//! the evaluation ask of a [`GnnExecutor`], so that the per-edge work (the BCE and its gradient,
//! the auxiliary MSE, the counts at the threshold and the AUC) runs where the logits are. The
//! functions here are that work on the host, every executor's default; a GPU backend does the
//! same on the device and returns the same figures.

use crate::edge_metrics::{EdgeCounts, auc};
use crate::loss::{bce_with_logits, mse_over};
use crate::{DeviceError, GnnExecutor, GraphInput};

/// What one graph's loss reads besides the logits, one value per edge.
#[derive(Clone, Copy, Debug)]
pub struct EdgeTargets<'a> {
    /// 1 for the edges the BCE counts as positives (target edges), else 0.
    pub target: &'a [u8],
    /// The BCE's weight per edge.
    pub weight: &'a [f32],
    /// The positives' weight in the BCE (`pos_weight`).
    pub pos_weight: f64,
    /// The auxiliary pT head's targets; `None` leaves the head out of the loss.
    pub aux: Option<AuxTargets<'a>>,
}

/// The auxiliary head's regression targets (see [`mse_over`]).
#[derive(Clone, Copy, Debug)]
pub struct AuxTargets<'a> {
    /// log10 pT per edge.
    pub log_pt: &'a [f32],
    /// Weight per edge (1 for the edges counted, else 0).
    pub weight: &'a [f32],
    /// The mean's denominator: the counted edges of the whole graph.
    pub count: usize,
}

/// One graph's losses: the BCE (the mean over its edges) and the auxiliary MSE (0 without it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GraphLoss {
    /// The BCE.
    pub loss: f64,
    /// The auxiliary head's MSE; 0 when its targets were not given.
    pub aux_loss: f64,
}

/// One graph's validation figures.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphFigures {
    /// The BCE and the auxiliary MSE.
    pub loss: GraphLoss,
    /// The edge counts at the score threshold.
    pub counts: EdgeCounts,
    /// The AUC of the target edges against all others (NaN without one or the other).
    pub auc: f64,
    /// The logits, where they were asked for (for a pooled ROC curve); else empty.
    pub logits: Vec<f32>,
}

/// [`GnnExecutor::loss_backward`] with the loss on the host: the forward's logits come to the
/// host, the BCE's gradient (× `scale`) and the auxiliary MSE's (× `aux_scale`) go back to the
/// backward.
pub fn host_loss_backward<E: GnnExecutor + ?Sized>(
    exec: &mut E,
    graph: &GraphInput<f32>,
    targets: &EdgeTargets<'_>,
    scale: f32,
    aux_scale: f32,
) -> Result<GraphLoss, DeviceError> {
    let logits = exec.forward(graph)?;
    let mut dl = vec![0.0f32; graph.num_edges()];
    let loss = bce_with_logits(logits, targets.target, Some(targets.weight), targets.pos_weight, &mut dl);
    if scale != 1.0 {
        dl.iter_mut().for_each(|g| *g *= scale);
    }
    let Some(aux) = targets.aux else {
        exec.backward(graph, &dl)?;
        return Ok(GraphLoss { loss, aux_loss: 0.0 });
    };
    let mut da = vec![0.0f32; graph.num_edges()];
    let aux_loss = mse_over(exec.aux(), aux.log_pt, aux.weight, aux.count, &mut da);
    da.iter_mut().for_each(|g| *g *= aux_scale);
    exec.backward_aux(graph, &dl, &da)?;
    Ok(GraphLoss { loss, aux_loss })
}

/// [`GnnExecutor::validate_graph`] on the host: inference's logits (and auxiliary predictions
/// where `targets` has them) come to the host, which computes the figures.
pub fn host_validate_graph<E: GnnExecutor + ?Sized>(
    exec: &E,
    graph: &GraphInput<f32>,
    targets: &EdgeTargets<'_>,
    y: &[u8],
    threshold: f64,
    keep_logits: bool,
) -> Result<GraphFigures, DeviceError> {
    let (logits, pred) = match targets.aux {
        Some(_) => exec.infer_aux(graph)?,
        None => (exec.infer(graph)?, Vec::new()),
    };
    let mut scratch = vec![0.0f32; logits.len()];
    let loss = bce_with_logits(&logits, targets.target, Some(targets.weight), targets.pos_weight, &mut scratch);
    let aux_loss = targets.aux.map_or(0.0, |a| mse_over(&pred, a.log_pt, a.weight, a.count, &mut scratch));
    Ok(GraphFigures {
        loss: GraphLoss { loss, aux_loss },
        counts: EdgeCounts::of_event(&logits, y, targets.target, threshold),
        auc: auc(&logits, targets.target),
        logits: if keep_logits { logits } else { Vec::new() },
    })
}
