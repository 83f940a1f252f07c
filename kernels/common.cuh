// Definitions every kernel source starts with. NVRTC compiles without the CUDA toolkit's headers,
// so the fixed-width types and the f16/bf16 conversions are spelled out here (the conversions as
// single PTX instructions, exactly what cuda_fp16.h would emit).
#pragma once

typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;

#define WARP 32
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float f16_to_f32(uint16_t h) {
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}

// Round to nearest even, as the CPU's `half::f16::from_f32` does.
__device__ __forceinline__ uint16_t f32_to_f16(float f) {
    uint16_t h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) {
    return __uint_as_float(((uint32_t)h) << 16);
}

// Two floats packed as an f16x2 register (low half = a), the operand form of the f16 mma.
__device__ __forceinline__ uint32_t pack_f16x2(float a, float b) {
    return (uint32_t)f32_to_f16(a) | ((uint32_t)f32_to_f16(b) << 16);
}

// int8 tensor-core products (Ampere and later): D = A x B + D with s32 accumulators.
__device__ __forceinline__ void mma_k32(int c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_k16(int c[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over a block of `blockDim.x` threads (a multiple of 32, at most 1024); every thread gets it.
__device__ __forceinline__ float block_sum(float v, float* shared32) {
    v = warp_sum(v);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    __syncthreads();
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    const int n_warps = blockDim.x / WARP;
    v = lane < n_warps ? shared32[lane] : 0.0f;
    return warp_sum(v);
}
