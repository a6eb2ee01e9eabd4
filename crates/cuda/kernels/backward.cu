/* The backward kernels: a layer's activation and LayerNorm backward, the recomputed
 * activations, fixed-order column sums (bias and norm gradients), the CSR pulls of the split
 * Linear's node side, the aggregations' backward and the residual bookkeeping. */

/* dL/dz of one layer from dL/d(its output) in g_in, a warp per row: with y = x̂·γ + β (or z
 * without a norm; x̂ or z in pre, bf16 bits when pre_bf16), gy = g_in ⊙ act'(y); then, with a
 * norm, dz = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂)) with dx̂ = gy·γ; else dz = gy. dz goes to
 * dz_out (which may be g_in itself: the norm's γ, β partials are taken before, by
 * norm_param_partials). */
KERNEL void layer_backward(const float* g_in, const void* __restrict__ pre, int pre_bf16,
                           const float* __restrict__ rstd, const float* __restrict__ gamma,
                           const float* __restrict__ beta, int norm, int act, float* dz_out, int rows, int d) {
    long r = warp_row();
    int lane = lane_id();
    if (r >= rows) return;
    long base = r * d;
    const float* gi = g_in + base;
    float* gz = dz_out + base;
    float s = 0.0f, sx = 0.0f;
    for (int j = lane; j < d; j += WARP) {
        float x = load_saved(pre, base + j, pre_bf16);
        float y = (norm && gamma) ? x * gamma[j] + beta[j] : x;
        float g = gi[j] * act_df(act, y);
        float dxh = (norm && gamma) ? g * gamma[j] : g;
        s += dxh;
        sx += dxh * x;
        gz[j] = dxh;
    }
    if (!norm) return;
    float mean_g = warp_sum(s) / (float)d;
    float mean_gx = warp_sum(sx) / (float)d;
    float rs = rstd[r];
    for (int j = lane; j < d; j += WARP) gz[j] = rs * (gz[j] - mean_g - load_saved(pre, base + j, pre_bf16) * mean_gx);
}

/* out = act(x̂·γ + β) (or act(z)): a layer's output recomputed from what its forward kept (bf16
 * bits when pre_bf16), the next layer's input for its weight gradient; a thread per element. */
KERNEL void recompute_act(const void* __restrict__ pre, int pre_bf16, const float* __restrict__ gamma,
                          const float* __restrict__ beta, int act, float* __restrict__ out, int rows, int d) {
    long i = thread_index();
    if (i >= (long)rows * d) return;
    int j = (int)(i % d);
    float y = load_saved(pre, i, pre_bf16);
    if (gamma) y = y * gamma[j] + beta[j];
    out[i] = act_f(act, y);
}

/* Rows per partial sum of column_partials: the chunking depends on the row count only, so the
 * sums are the same on every run and every GPU. */
#define COLUMN_CHUNK 1024

/* partial[c][j] = Σ over rows c·COLUMN_CHUNK .. of a[r][j] (· b[r][j] when b is not null), in
 * row order; a thread per (chunk, column). */
KERNEL void column_partials(const float* __restrict__ a, const float* __restrict__ b, int rows, int d,
                            float* __restrict__ partial) {
    long i = thread_index();
    int chunks = (rows + COLUMN_CHUNK - 1) / COLUMN_CHUNK;
    if (i >= (long)chunks * d) return;
    int c = (int)(i / d), j = (int)(i % d);
    int r1 = (c + 1) * COLUMN_CHUNK < rows ? (c + 1) * COLUMN_CHUNK : rows;
    float acc = 0.0f;
    for (int r = c * COLUMN_CHUNK; r < r1; r++) {
        float v = a[(long)r * d + j];
        acc += b ? v * b[(long)r * d + j] : v;
    }
    partial[i] = acc;
}

/* An affine LayerNorm's parameter-gradient partials, read before its layer's backward may
 * overwrite g_in: with gy = g_in ⊙ act'(x̂·γ + β) (x̂ in pre, bf16 bits when pre_bf16),
 * pg[c][j] = Σ gy·x̂ and pb[c][j] = Σ gy over the rows of chunk c (column_partials' chunks), in
 * row order; a thread per (chunk, column). */
KERNEL void norm_param_partials(const float* __restrict__ g_in, const void* __restrict__ pre, int pre_bf16,
                                const float* __restrict__ gamma, const float* __restrict__ beta, int act,
                                int rows, int d, float* __restrict__ pg, float* __restrict__ pb) {
    long i = thread_index();
    int chunks = (rows + COLUMN_CHUNK - 1) / COLUMN_CHUNK;
    if (i >= (long)chunks * d) return;
    int c = (int)(i / d), j = (int)(i % d);
    int r1 = (c + 1) * COLUMN_CHUNK < rows ? (c + 1) * COLUMN_CHUNK : rows;
    float ag = 0.0f, ab = 0.0f;
    for (int r = c * COLUMN_CHUNK; r < r1; r++) {
        long k = (long)r * d + j;
        float x = load_saved(pre, k, pre_bf16);
        float g = g_in[k] * act_df(act, x * gamma[j] + beta[j]);
        ag += g * x;
        ab += g;
    }
    pg[i] = ag;
    pb[i] = ab;
}

/* out[j] += Σ over chunks of partial[c][j], in chunk order; a thread per column. */
KERNEL void column_total(const float* __restrict__ partial, int chunks, int d, float* __restrict__ out) {
    long j = thread_index();
    if (j >= d) return;
    float acc = 0.0f;
    for (int c = 0; c < chunks; c++) acc += partial[(long)c * d + j];
    out[j] += acc;
}

/* out[v] = Σ over node v's edges (a CSR) of x[e], rows of width d, in edge order; a thread per
 * node and channel. */
KERNEL void csr_pull(const float* __restrict__ x, int d, const unsigned* __restrict__ offsets,
                     const unsigned* __restrict__ edges, int n, float* __restrict__ out) {
    long i = thread_index();
    if (i >= (long)n * d) return;
    long v = i / d;
    int j = (int)(i % d);
    float acc = 0.0f;
    for (unsigned k = offsets[v]; k < offsets[v + 1]; k++) acc += x[(long)edges[k] * d + j];
    out[i] = acc;
}

/* The aggregations' backward for one grouping (each edge's node in node_of_edge, the node's
 * edge count from the CSR offsets): dx[e] += the gradient of every aggregation in `kinds` (kind
 * of aggregation j in bits 4j.., `count` of them, their gradient columns col0 + j·h of dout, row
 * stride ld); a thread per edge and channel, so no two threads write one value. */
KERNEL void aggregate_backward(const float* __restrict__ x, int h, const unsigned* __restrict__ node_of_edge,
                               const unsigned* __restrict__ offsets, int kinds, int count,
                               const float* __restrict__ dout, int ld, int col0,
                               const unsigned* __restrict__ argmax, const float* __restrict__ mean,
                               const float* __restrict__ std, float* __restrict__ dx, int e) {
    long i = thread_index();
    if (i >= (long)e * h) return;
    long edge = i / h;
    int j = (int)(i % h);
    unsigned node = node_of_edge[edge];
    float inv = 1.0f / (float)(offsets[node + 1] - offsets[node]);
    const float* row = dout + (long)node * ld + col0 + j;
    long nj = (long)node * h + j;
    float acc = dx[i];
    for (int k = 0; k < count; k++) {
        float g = row[k * h];
        switch ((kinds >> (4 * k)) & 15) {
        case AGG_SUM: acc += g; break;
        case AGG_MEAN: acc += g * inv; break;
        case AGG_MAX:
            if (argmax[nj] == (unsigned)edge) acc += g;
            break;
        case AGG_STD: acc += g * (x[i] - mean[nj]) * inv / std[nj]; break;
        }
    }
    dx[i] = acc;
}

/* dh_prev = (dh when residual, else 0) + the first h columns of dnode_in (row stride ld): the
 * node update's gradient with respect to its input state; a thread per element. */
KERNEL void node_state_grad(const float* __restrict__ dh, const float* __restrict__ dnode_in, int ld, int residual,
                            float* __restrict__ dh_prev, int rows, int h) {
    long i = thread_index();
    if (i >= (long)rows * h) return;
    long r = i / h;
    float v = dnode_in[r * ld + i % h];
    dh_prev[i] = residual ? dh[i] + v : v;
}

/* One AdamW step, elementwise, in the CPU engine's order of operations
 * (trackgnn_engine::optim::AdamW): θ·(1 − γλ); m ← lerp(m, g, 1 − β1); v ← β2·v + (1 − β2)·g·g;
 * AMSGrad's running max of v in vmax when it is not null (NaN propagates);
 * θ ← θ·(1 − γλ) + (−γ/(1 − β1ᵗ))·m / (√v̂ / √(1 − β2ᵗ) + ε). A thread per parameter. */
KERNEL void adamw_update(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                         float* __restrict__ v, float* __restrict__ vmax, int n, float decay, float w1, float b2,
                         float w2, float step_size, float bc2_sqrt, float eps) {
    long i = thread_index();
    if (i >= n) return;
    float gi = g[i];
    float pi = p[i] * decay;
    float a = m[i];
    /* ATen's lerp: two forms for accuracy near w = 1. */
    float mi = fabsf(w1) < 0.5f ? a + w1 * (gi - a) : gi - (gi - a) * (1.0f - w1);
    float vi = v[i] * b2 + w2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float vh = vi;
    if (vmax) {
        float c = vmax[i];
        vh = (c != c || vi != vi) ? __uint_as_float(0x7fc00000u) : fmaxf(c, vi);
        vmax[i] = vh;
    }
    float denom = sqrtf(vh) / bc2_sqrt + eps;
    p[i] = pi + (-step_size) * mi / denom;
}
