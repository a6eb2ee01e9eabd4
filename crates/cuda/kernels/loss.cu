/* The loss and the validation figures on the device: the BCE and the auxiliary MSE with their
 * gradients, fixed-order sums of their terms, the edge counts at the threshold, and the AUC by a
 * stable radix sort of the logits and a rank sum over its tie groups. Every reduction is a
 * thread per tile of TILE elements in order (and the host adding the tiles' sums in order), so
 * the figures are the same bits on every run. */

/* Elements per tile of the reductions and of the radix sort: the tiling depends on the element
 * count only. */
#define TILE 1024
/* Digits of the radix sort: 8 bits, four passes over a 32-bit key. */
#define RADIX 256

__device__ __forceinline__ int tile_count(int n) { return (n + TILE - 1) / TILE; }

/* ln(1 + e^x), as the host's softplus: max(x, 0) + ln(1 + e^−|x|). */
__device__ __forceinline__ float softplus_f(float x) {
    float m = x > 0.0f ? x : 0.0f;
    return m + logf(1.0f + expf(-fabsf(x)));
}

/* σ(x), as the host's sigmoid. */
__device__ __forceinline__ float sigmoid_f(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* The BCE per edge, in the host loss's arithmetic: terms[i] = w·ℓ with ℓ = p·softplus(−x) for a
 * positive and softplus(x) else, and (when dx is not null) dx[i] = w·g·inv·scale with
 * g = p·(σ(x) − 1) or σ(x); a thread per edge. */
KERNEL void bce_terms(const float* __restrict__ x, const unsigned char* __restrict__ label,
                      const float* __restrict__ w, float pos_weight, float inv, float scale,
                      float* __restrict__ terms, float* __restrict__ dx, int n) {
    long i = thread_index();
    if (i >= n) return;
    float xi = x[i], wi = w[i], l, g;
    if (label[i]) {
        l = pos_weight * softplus_f(-xi);
        g = pos_weight * (sigmoid_f(xi) - 1.0f);
    } else {
        l = softplus_f(xi);
        g = sigmoid_f(xi);
    }
    terms[i] = wi * l;
    if (dx) dx[i] = wi * g * inv * scale;
}

/* The weighted squared error per edge: terms[i] = w·r·r with r = p − t and (when dp is not
 * null) dp[i] = 2·w·r·inv·scale; a thread per edge. */
KERNEL void mse_terms(const float* __restrict__ p, const float* __restrict__ t, const float* __restrict__ w,
                      float inv, float scale, float* __restrict__ terms, float* __restrict__ dp, int n) {
    long i = thread_index();
    if (i >= n) return;
    float r = p[i] - t[i], wi = w[i];
    terms[i] = wi * r * r;
    if (dp) dp[i] = 2.0f * wi * r * inv * scale;
}

/* partial[t] = the sum of tile t's terms in order, in double; a thread per tile. */
KERNEL void tile_sums(const float* __restrict__ terms, int n, double* __restrict__ partial) {
    long t = thread_index();
    if (t >= tile_count(n)) return;
    long a = t * TILE, b = a + TILE < n ? a + TILE : n;
    double s = 0.0;
    for (long i = a; i < b; i++) s += (double)terms[i];
    partial[t] = s;
}

/* Tile t's edge counts in counts[5t ..]: predicted, target, predicted target, predicted true,
 * predicted true but not target. An edge is predicted when its logit is ≥ cut (the least float
 * whose score is above the threshold; NaN never is); a thread per tile. */
KERNEL void edge_counts(const float* __restrict__ x, const unsigned char* __restrict__ y,
                        const unsigned char* __restrict__ target, float cut, int n, unsigned* __restrict__ counts) {
    long t = thread_index();
    if (t >= tile_count(n)) return;
    long a = t * TILE, b = a + TILE < n ? a + TILE : n;
    unsigned c[5] = {0, 0, 0, 0, 0};
    for (long i = a; i < b; i++) {
        int pred = x[i] >= cut, yi = y[i] != 0, ti = target[i] != 0;
        c[0] += pred;
        c[1] += ti;
        c[2] += pred && ti;
        c[3] += pred && yi;
        c[4] += pred && yi && !ti;
    }
    for (int k = 0; k < 5; k++) counts[5 * t + k] = c[k];
}

/* The sort key of a logit: its bits ordered as the floats are, −0 as +0 and NaN as −∞ (the
 * host AUC's ranking). */
__device__ __forceinline__ unsigned order_key(float x) {
    if (x != x) x = __uint_as_float(0xff800000u);
    if (x == 0.0f) x = 0.0f;
    unsigned u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* keys[i] = order_key(x[i]), labels[i] = 1 for a positive; a thread per edge. */
KERNEL void auc_keys(const float* __restrict__ x, const unsigned char* __restrict__ positive, int n,
                     unsigned* __restrict__ keys, unsigned char* __restrict__ labels) {
    long i = thread_index();
    if (i >= n) return;
    keys[i] = order_key(x[i]);
    labels[i] = positive[i] != 0;
}

/* counts[d·tiles + t] = keys of tile t whose digit (key >> shift) & 255 is d; a thread per
 * tile. */
KERNEL void radix_counts(const unsigned* __restrict__ keys, int n, int shift, unsigned* __restrict__ counts) {
    long t = thread_index();
    int tiles = tile_count(n);
    if (t >= tiles) return;
    unsigned h[RADIX];
    for (int d = 0; d < RADIX; d++) h[d] = 0;
    long a = t * TILE, b = a + TILE < n ? a + TILE : n;
    for (long i = a; i < b; i++) h[(keys[i] >> shift) & (RADIX - 1)]++;
    for (int d = 0; d < RADIX; d++) counts[(long)d * tiles + t] = h[d];
}

/* v[0..m] replaced by its exclusive prefix sums, by one block: each thread sums a contiguous
 * chunk, thread 0 scans the chunks' sums, each thread writes its chunk's prefixes. */
KERNEL void exclusive_scan(unsigned* v, int m) {
    __shared__ unsigned sums[BLOCK];
    if (blockIdx.x != 0) return;
    long t = threadIdx.x, chunk = ((long)m + BLOCK - 1) / BLOCK;
    long a = t * chunk < m ? t * chunk : m, b = a + chunk < m ? a + chunk : m;
    unsigned s = 0;
    for (long i = a; i < b; i++) s += v[i];
    sums[t] = s;
    __syncthreads();
    if (t == 0) {
        unsigned run = 0;
        for (int k = 0; k < BLOCK; k++) {
            unsigned c = sums[k];
            sums[k] = run;
            run += c;
        }
    }
    __syncthreads();
    unsigned run = sums[t];
    for (long i = a; i < b; i++) {
        unsigned c = v[i];
        v[i] = run;
        run += c;
    }
}

/* One stable radix pass: tile t's keys and labels, in order, to their digit's place from
 * offsets[d·tiles + t] on (radix_counts' counts, scanned); a thread per tile. */
KERNEL void radix_scatter(const unsigned* __restrict__ keys, const unsigned char* __restrict__ labels, int n,
                          int shift, const unsigned* __restrict__ offsets, unsigned* __restrict__ keys_out,
                          unsigned char* __restrict__ labels_out) {
    long t = thread_index();
    int tiles = tile_count(n);
    if (t >= tiles) return;
    unsigned o[RADIX];
    for (int d = 0; d < RADIX; d++) o[d] = offsets[(long)d * tiles + t];
    long a = t * TILE, b = a + TILE < n ? a + TILE : n;
    for (long i = a; i < b; i++) {
        unsigned k = keys[i], p = o[(k >> shift) & (RADIX - 1)]++;
        keys_out[p] = k;
        labels_out[p] = labels[i];
    }
}

/* negatives[t] = the labels of tile t that are 0; a thread per tile. */
KERNEL void tile_negatives(const unsigned char* __restrict__ labels, int n, unsigned* __restrict__ negatives) {
    long t = thread_index();
    if (t >= tile_count(n)) return;
    long a = t * TILE, b = a + TILE < n ? a + TILE : n;
    unsigned c = 0;
    for (long i = a; i < b; i++) c += labels[i] == 0;
    negatives[t] = c;
}

/* The Mann–Whitney U of the sorted keys, by tile: partial[t] = Σ over the tie groups that start
 * in tile t of pos_g·(N_below + neg_g/2), N_below the negatives before the group (neg_before[t]:
 * those before the tile). A group is walked to its end, past the tile where it runs on; a tile
 * that starts inside a group skips it. Every term is a multiple of ½ below 2^53: exact. */
KERNEL void auc_partials(const unsigned* __restrict__ keys, const unsigned char* __restrict__ labels, int n,
                         const unsigned* __restrict__ neg_before, double* __restrict__ partial) {
    long t = thread_index();
    if (t >= tile_count(n)) return;
    long i = t * TILE, b = i + TILE < n ? i + TILE : n;
    double below = (double)neg_before[t], u = 0.0;
    if (i > 0)
        while (i < b && keys[i] == keys[i - 1]) below += labels[i++] == 0;
    while (i < b) {
        unsigned k = keys[i];
        double pos = 0.0, neg = 0.0;
        for (; i < n && keys[i] == k; i++) {
            if (labels[i]) pos += 1.0;
            else neg += 1.0;
        }
        u += pos * (below + 0.5 * neg);
        below += neg;
    }
    partial[t] = u;
}
