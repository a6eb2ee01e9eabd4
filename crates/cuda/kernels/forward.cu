/* The forward kernels: an MLP layer's epilogue, aggregation over the edge groupings, column
 * copies. Row-major f32 throughout; the Linear products themselves are cuBLAS calls. */

/* A Linear layer's epilogue, one warp per row of z (rows × d, holding the product x·Wᵀ):
 *   split 1: z += ga[src] + gb[dst] (the split first layer: its node products gathered);
 *   split 2: z  = ga[src] + gb[dst] (a split layer without a third block: z is not read);
 * then z += bias; LayerNorm when `norm` (z becomes x̂, rstd[row] = 1/σ; y = x̂·γ + β with
 * `gamma`, `beta` or x̂ when they are null); out = act(y) (+ residual when not null). What the
 * backward reads, x̂ (or the biased z without a norm), stays in z, or goes rounded to bfloat16
 * into saved16 when that is not null (bf16 training: the forward's output is computed before
 * the rounding); then z may be `out` itself (each lane reads an element before writing it). */
KERNEL void mlp_layer_post(float* z, const float* __restrict__ bias,
                           const float* __restrict__ ga, const float* __restrict__ gb,
                           const unsigned* __restrict__ src, const unsigned* __restrict__ dst, int split,
                           const float* __restrict__ gamma, const float* __restrict__ beta, int norm,
                           float* __restrict__ rstd, int act, const float* __restrict__ residual,
                           float* out, unsigned short* __restrict__ saved16, int rows, int d) {
    long r = warp_row();
    int lane = lane_id();
    if (r >= rows) return;
    float* zr = z + r * d;
    const float* ar = split ? ga + (long)src[r] * d : 0;
    const float* br = split ? gb + (long)dst[r] * d : 0;
    float s = 0.0f;
    for (int j = lane; j < d; j += WARP) {
        float v = split == 2 ? 0.0f : zr[j];
        if (split) v += ar[j] + br[j];
        v += bias[j];
        zr[j] = v;
        s += v;
    }
    float mean = 0.0f, rs = 1.0f;
    if (norm) {
        mean = warp_sum(s) / (float)d;
        float q = 0.0f;
        for (int j = lane; j < d; j += WARP) {
            float c = zr[j] - mean;
            q += c * c;
        }
        rs = 1.0f / sqrtf(warp_sum(q) / (float)d + 1e-5f);
        if (lane == 0) rstd[r] = rs;
    }
    const float* res = residual ? residual + r * d : 0;
    float* o = out + r * d;
    for (int j = lane; j < d; j += WARP) {
        float y = zr[j];
        if (norm) y = (y - mean) * rs;
        if (saved16)
            saved16[r * d + j] = bf16_bits(y);
        else
            zr[j] = y;
        if (norm && gamma) y = y * gamma[j] + beta[j];
        y = act_f(act, y);
        if (res) y += res[j];
        o[j] = y;
    }
}

/* Aggregation kinds, numbered as the host's `Aggr`. */
#define AGG_SUM 0
#define AGG_MEAN 1
#define AGG_MAX 2
#define AGG_STD 3

/* Every aggregation of `kinds` (kind of aggregation k in bits 4k.., `count` of them) of edge
 * rows x (E × h) over each node's edges (a CSR: offsets, edges in increasing order), into
 * columns col0 + k·h .. of out (n rows, stride ld); a thread per node and channel, each reading
 * its own edges in order (no atomics): once for sum, mean and max together, once more for std.
 * Mean: Σ/n (0 without edges); max: the first largest, its edge in argmax (0xffffffff and 0
 * without edges); std: √(var + 1e-5) with var = Σ(x − μ)²/n, its μ and σ in mean_out, std_out. */
KERNEL void aggregate_forward(const float* __restrict__ x, int h, const unsigned* __restrict__ offsets,
                              const unsigned* __restrict__ edges, int n, int kinds, int count,
                              float* __restrict__ out, int ld, int col0, unsigned* __restrict__ argmax,
                              float* __restrict__ mean_out, float* __restrict__ std_out) {
    long i = thread_index();
    if (i >= (long)n * h) return;
    long node = i / h;
    int j = (int)(i % h);
    int want_max = 0, want_std = 0;
    for (int k = 0; k < count; k++) {
        int kind = (kinds >> (4 * k)) & 15;
        want_max |= kind == AGG_MAX;
        want_std |= kind == AGG_STD;
    }
    unsigned lo = offsets[node], hi = offsets[node + 1], arg = 0xffffffffu;
    float inv = hi > lo ? 1.0f / (float)(hi - lo) : 0.0f;
    float sum = 0.0f, mx = 0.0f;
    for (unsigned k = lo; k < hi; k++) {
        unsigned e = edges[k];
        float v = x[(long)e * h + j];
        sum += v;
        if (want_max && (k == lo || v > mx)) {
            mx = v;
            arg = e;
        }
    }
    float mean = sum * inv, sd = 0.0f;
    if (want_std) {
        float q = 0.0f;
        for (unsigned k = lo; k < hi; k++) {
            float c = x[(long)edges[k] * h + j] - mean;
            q += c * c;
        }
        sd = sqrtf(q * inv + 1e-5f);
        mean_out[i] = mean;
        std_out[i] = sd;
    }
    if (want_max) argmax[i] = arg;
    float* row = out + node * ld + col0 + j;
    for (int k = 0; k < count; k++) {
        int kind = (kinds >> (4 * k)) & 15;
        row[k * h] = kind == AGG_SUM ? sum : kind == AGG_MEAN ? mean : kind == AGG_MAX ? mx : sd;
    }
}

/* dst[:, col .. col+d] = src (rows × d) in a matrix of row stride ld; a thread per element. */
KERNEL void copy_columns(const float* __restrict__ src, int d, float* __restrict__ dst, int ld, int col, int rows) {
    long i = thread_index();
    if (i >= (long)rows * d) return;
    long r = i / d;
    dst[r * ld + col + i % d] = src[i];
}

/* out (rows × cols, packed) = x (rows × cols at row stride ld) rounded to bfloat16: a matrix
 * product's operand in bf16 training; a thread per element. */
KERNEL void to_bf16(const float* __restrict__ x, int rows, int cols, int ld, unsigned short* __restrict__ out) {
    long i = thread_index();
    if (i >= (long)rows * cols) return;
    out[i] = bf16_bits(x[(i / cols) * ld + i % cols]);
}

/* A state kept in bfloat16 (checkpointing with `+bf16`): packed[i] = x[i] rounded to bf16, and
 * x[i] = that value, so the forward goes on from what the backward will recompute from. */
KERNEL void round_and_pack_bf16(float* __restrict__ x, int n, unsigned short* __restrict__ packed) {
    long i = thread_index();
    if (i >= n) return;
    unsigned short b = bf16_bits(x[i]);
    packed[i] = b;
    x[i] = __uint_as_float(((unsigned)b) << 16);
}

/* x = the bf16 values of packed, as floats. */
KERNEL void unpack_bf16(const unsigned short* __restrict__ packed, int n, float* __restrict__ x) {
    long i = thread_index();
    if (i >= n) return;
    x[i] = __uint_as_float(((unsigned)packed[i]) << 16);
}
