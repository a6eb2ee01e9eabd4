/* Prepended to the kernels for NVRTC (the emulator prepends emu/emu.h instead). */
#define KERNEL extern "C" __global__
