// The int8 tensor-core peak of the GPU, measured rather than taken from a datasheet: every warp
// issues independent m16n8k32 mma chains back to back. `dllm bench` divides the forward pass's
// multiply-adds per second by this.
#include "common.cuh"

#define CHAINS 4

extern "C" __global__ void int8_mma_peak(int iters, int* sink) {
    const uint32_t seed = threadIdx.x * 2654435761u + blockIdx.x;
    const uint32_t a[4] = {seed, seed ^ 0x5a5a5a5au, seed * 3u, seed * 7u};
    const uint32_t b0 = seed * 11u, b1 = seed * 13u;
    int c[CHAINS][4] = {};
    for (int i = 0; i < iters; i++)
        for (int k = 0; k < CHAINS; k++) mma_k32(c[k], a, b0, b1);
    int sum = 0;
    for (int k = 0; k < CHAINS; k++) sum += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    if (sum == 0x7fffffff) sink[0] = sum;  // keeps the work from being optimized away
}
