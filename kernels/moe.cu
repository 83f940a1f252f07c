// The row moves of a mixture-of-experts FFN: each expert's rows gathered into one matrix for its
// products, and its weighted outputs added back to their rows (forward::Transformer's MoE layer).
#include "common.cuh"

// dst[i][c] = src[rows[i]][c] for i < n_rows, c < width. Grid: (column blocks, n_rows).
extern "C" __global__ void gather_rows(const float* src, const int* rows, float* dst, int n_rows, int width) {
    const int i = blockIdx.y;
    if (i >= n_rows) return;
    const float* from = src + (size_t)rows[i] * width;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < width; c += gridDim.x * blockDim.x)
        dst[(size_t)i * width + c] = from[c];
}

// dst[rows[i]][c] += weights[i] * src[i][c]. The rows of one call are distinct (one expert's),
// so no two threads add to the same value. Grid: (column blocks, n_rows).
extern "C" __global__ void scatter_add_rows(const float* src, const int* rows, const float* weights, float* dst,
                                            int n_rows, int width) {
    const int i = blockIdx.y;
    if (i >= n_rows) return;
    float* to = dst + (size_t)rows[i] * width;
    const float w = weights[i];
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < width; c += gridDim.x * blockDim.x)
        to[c] += src[(size_t)i * width + c] * w;
}
