/* Device helpers shared by the kernels. Written in the C that both NVRTC and the emulator's C
 * compiler take: no templates, no overloads, 1-D blocks. */

/* Threads per block of every kernel: a multiple of the warp size. */
#define BLOCK 256
#define WARP 32
#define FULL_MASK 0xffffffffu

/* Activations, numbered as the host's `Activation`: 0 relu, 1 silu, 2 tanh, 3 identity. */
__device__ __forceinline__ float act_f(int act, float x) {
    switch (act) {
    case 0: return x > 0.0f ? x : 0.0f;
    case 1: return x / (1.0f + expf(-x));
    case 2: return tanhf(x);
    default: return x;
    }
}

/* f'(x) of act_f. */
__device__ __forceinline__ float act_df(int act, float x) {
    switch (act) {
    case 0: return x > 0.0f ? 1.0f : 0.0f;
    case 1: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f + x * (1.0f - s));
    }
    case 2: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    default: return 1.0f;
    }
}

/* f rounded to bfloat16 (to nearest, ties to even; NaN stays NaN), as its 16 bits. */
__device__ __forceinline__ unsigned short bf16_bits(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Element i of what a layer's forward saved for its backward: f32, or bfloat16 bits when
 * `bf16` (bf16 training keeps x̂ in half the bytes). */
__device__ __forceinline__ float load_saved(const void* p, long i, int bf16) {
    return bf16 ? __uint_as_float(((unsigned)((const unsigned short*)p)[i]) << 16) : ((const float*)p)[i];
}

/* The sum of v over the 32 lanes of a warp, the same in every lane: a fixed butterfly, so the
 * same bits on every run. */
__device__ __forceinline__ float warp_sum(float v) {
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(FULL_MASK, v, m);
    return v;
}

/* Row r handled by this thread's warp, and the thread's lane, for kernels with a warp per row. */
__device__ __forceinline__ long warp_row(void) {
    return ((long)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
}
__device__ __forceinline__ int lane_id(void) { return (int)(threadIdx.x % WARP); }

/* The global index of this thread, for kernels with a thread per element. */
__device__ __forceinline__ long thread_index(void) {
    return (long)blockIdx.x * blockDim.x + threadIdx.x;
}
