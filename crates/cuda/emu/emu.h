/* The CUDA C of the kernels compiled as plain C for the emulator (src/emu.rs): each thread of a
 * block is a fiber, blocks run one after another, and __syncthreads and the warp shuffles are
 * barriers among the fibers. Only what the kernels use is defined: 1-D blocks of up to 1024
 * threads, static __shared__ arrays, float shuffles. */
#ifndef TRACKGNN_EMU_H
#define TRACKGNN_EMU_H
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct { unsigned x, y, z; } uint3;
typedef uint3 dim3;
extern uint3 threadIdx, blockIdx, blockDim, gridDim;

#define KERNEL
#define __global__
#define __device__ static inline
#define __forceinline__
#define __shared__ static
#define __restrict__ restrict

void __syncthreads(void);
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
float __shfl_sync(unsigned mask, float v, int src_lane);

static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
#endif
