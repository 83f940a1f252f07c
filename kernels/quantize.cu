// Activations quantized to int8 once per product, exactly as the CPU path (src/quant/q8.rs,
// ggml's reference) does, so that the integer dot products of both backends agree.
#include "common.cuh"

// ggml's block_q8_K split into arrays: q [n_rows][n_in] int8, d [n_rows][n_in/256] f32 and
// bsums [n_rows][n_in/16] (sums of each 16 q). One block of 256 threads per (256 values, row).
// The scale maps the value of largest magnitude to -127; which sign it takes does not matter
// (q and d both flip), so the magnitude alone is reduced.
extern "C" __global__ void quantize_q8_k(const float* x, int n_in, int8_t* q, float* d, int16_t* bsums) {
    __shared__ float partial[8];
    const int row = blockIdx.y, sb = blockIdx.x, i = threadIdx.x;
    const size_t at = (size_t)row * n_in + (size_t)sb * 256 + i;
    const float v = x[at];
    float amax = warp_max(fabsf(v));
    if (i % WARP == 0) partial[i / WARP] = amax;
    __syncthreads();
    amax = partial[0];
    for (int w = 1; w < 8; w++) amax = fmaxf(amax, partial[w]);
    int qi = 0;
    if (amax != 0.0f) {
        const float iscale = -127.0f / amax;
        qi = min(__float2int_rn(iscale * v), 127);
    }
    q[at] = (int8_t)qi;
    int s = qi;
    for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (i % 16 == 0) bsums[((size_t)row * n_in + (size_t)sb * 256 + i) / 16] = (int16_t)s;
    if (i == 0) d[(size_t)row * (n_in / 256) + sb] = amax != 0.0f ? 1.0f / (-127.0f / amax) : 0.0f;
}

// ggml's x86 block_q8_0: d = f16(amax / 127), q = round_even(v * 127 / amax). One warp per
// 32 values; d is stored widened to f32.
extern "C" __global__ void quantize_q8_0(const float* x, int n_in, int8_t* q, float* d) {
    const int row = blockIdx.y;
    const int block = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    if (block >= n_in / 32) return;
    const size_t at = (size_t)row * n_in + (size_t)block * 32 + threadIdx.x % WARP;
    const float v = x[at];
    const float amax = warp_max(fabsf(v));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    q[at] = (int8_t)__float2int_rn(v * id);
    if (threadIdx.x % WARP == 0) d[(size_t)row * (n_in / 32) + block] = f16_to_f32(f32_to_f16(amax / 127.0f));
}
