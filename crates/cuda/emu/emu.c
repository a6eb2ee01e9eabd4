/* The fiber scheduler of the kernel emulator (see emu.h). Not thread-safe: the Rust side holds a
 * lock around every launch. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>
#include "emu.h"

uint3 threadIdx, blockIdx, blockDim, gridDim;

enum { RUNNABLE, AT_BLOCK, AT_WARP, DONE };
typedef struct {
    ucontext_t ctx;
    int state;
} fiber_t;

#define STACK_BYTES (64 * 1024)
#define MAX_THREADS 1024
static fiber_t fibers[MAX_THREADS];
static char *stacks;
static ucontext_t scheduler;
static int current;
static void (*trampoline)(void **);
static void **params;
static float slots[MAX_THREADS];

static void fiber_main(void) {
    trampoline(params);
    fibers[current].state = DONE;
}

static void wait_as(int state) {
    fibers[current].state = state;
    swapcontext(&fibers[current].ctx, &scheduler);
}

void __syncthreads(void) { wait_as(AT_BLOCK); }

float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    (void)mask;
    unsigned t = threadIdx.x;
    slots[t] = v;
    wait_as(AT_WARP);
    float r = slots[(t & ~31u) | ((t & 31u) ^ (unsigned)lane_mask)];
    wait_as(AT_WARP);
    return r;
}

float __shfl_sync(unsigned mask, float v, int src_lane) {
    (void)mask;
    unsigned t = threadIdx.x;
    slots[t] = v;
    wait_as(AT_WARP);
    float r = slots[(t & ~31u) | ((unsigned)src_lane & 31u)];
    wait_as(AT_WARP);
    return r;
}

/* Releases the fibers waiting at a barrier every live fiber of its group has reached: a warp's
 * at a warp barrier, the block's at __syncthreads. Returns how many were released. */
static int release(int n) {
    int released = 0;
    for (int w = 0; w < n; w += 32) {
        int end = w + 32 < n ? w + 32 : n, waiting = 0, live = 0;
        for (int t = w; t < end; t++) {
            live += fibers[t].state != DONE;
            waiting += fibers[t].state == AT_WARP;
        }
        if (waiting > 0 && waiting == live) {
            for (int t = w; t < end; t++)
                if (fibers[t].state == AT_WARP) fibers[t].state = RUNNABLE;
            released += waiting;
        }
    }
    if (released) return released;
    int waiting = 0, live = 0;
    for (int t = 0; t < n; t++) {
        live += fibers[t].state != DONE;
        waiting += fibers[t].state == AT_BLOCK;
    }
    if (waiting > 0 && waiting == live) {
        for (int t = 0; t < n; t++)
            if (fibers[t].state == AT_BLOCK) fibers[t].state = RUNNABLE;
        return waiting;
    }
    return 0;
}

/* Runs `tramp(args)` over a grid of `grid` blocks of `block` threads. Returns 0, or -1 for a
 * block size out of range, -2 when the threads of a block wait at barriers none can pass (a
 * divergent __syncthreads or shuffle), -3 when the fiber stacks cannot be allocated. */
int trackgnn_emu_run(void (*tramp)(void **), void **args, unsigned grid, unsigned block) {
    if (block == 0 || block > MAX_THREADS) return -1;
    if (!stacks && !(stacks = malloc((size_t)MAX_THREADS * STACK_BYTES))) return -3;
    trampoline = tramp;
    params = args;
    gridDim = (uint3){grid, 1, 1};
    blockDim = (uint3){block, 1, 1};
    int n = (int)block;
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = (uint3){b, 0, 0};
        for (int t = 0; t < n; t++) {
            getcontext(&fibers[t].ctx);
            fibers[t].ctx.uc_stack.ss_sp = stacks + (size_t)t * STACK_BYTES;
            fibers[t].ctx.uc_stack.ss_size = STACK_BYTES;
            fibers[t].ctx.uc_link = &scheduler;
            makecontext(&fibers[t].ctx, fiber_main, 0);
            fibers[t].state = RUNNABLE;
        }
        for (;;) {
            int live = 0;
            for (int t = 0; t < n; t++) {
                if (fibers[t].state != RUNNABLE) continue;
                current = t;
                threadIdx = (uint3){(unsigned)t, 0, 0};
                swapcontext(&scheduler, &fibers[t].ctx);
            }
            for (int t = 0; t < n; t++) live += fibers[t].state != DONE;
            if (!live) break;
            if (!release(n)) return -2;
        }
    }
    return 0;
}
