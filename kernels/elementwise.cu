// The per-position operations of a transformer block: RMSNorm, biases, residual adds, SwiGLU and
// rotary embeddings. Each mirrors the CPU function in src/ops that it replaces.
#include "common.cuh"

// y[r] = x[src_row(r)] / sqrt(mean(x^2) + eps) * w, one block per output row. `rows` picks the
// input rows (the LM head runs only on the rows the sampler needs); null means row r. The sum
// of squares is accumulated in f64, as the CPU (and ggml) do.
extern "C" __global__ void rms_norm(const float* x, const int* rows, const float* w, float* y, int d, float eps) {
    __shared__ double partial[32];
    const int r = blockIdx.x;
    const float* xr = x + (size_t)(rows ? rows[r] : r) * d;
    double s = 0.0;
    for (int i = threadIdx.x; i < d; i += blockDim.x) s += (double)(xr[i] * xr[i]);
    for (int o = WARP / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (lane == 0) partial[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x / WARP) ? partial[lane] : 0.0;
        for (int o = WARP / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) partial[0] = s;
    }
    __syncthreads();
    const float ms = (float)(partial[0] / d);
    const float scale = 1.0f / sqrtf(ms + eps);
    for (int i = threadIdx.x; i < d; i += blockDim.x) y[(size_t)r * d + i] = xr[i] * scale * w[i];
}

// x[r][i] += b[i] for `n` values of rows of `width`.
extern "C" __global__ void add_bias(float* x, const float* b, int n, int width) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += b[i % width];
}

// x += y, elementwise (the residual stream).
extern "C" __global__ void add_into(float* x, const float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

// gate = silu(gate) * up.
extern "C" __global__ void swiglu(float* gate, const float* up, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// Rotates the first `dims` values of every head of rows [0, n_rows) of x ([n_rows, n_heads *
// head_dim]); row r sits at canvas position first_pos + r. cos/sin are the host's table
// ([position][dims / 2], computed as PyTorch does), so both backends rotate by identical angles.
// halves = 1 pairs i with i + dims/2 (NeoX/Dream), 0 pairs 2i with 2i+1 (LLaDA after llama.cpp's
// permutation). One thread per (row, head, pair).
extern "C" __global__ void rope(float* x, const float* cos_t, const float* sin_t, int n_rows, int n_heads,
                                int head_dim, int dims, int first_pos, int halves) {
    const int half = dims / 2;
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)n_rows * n_heads * half) return;
    const int i = idx % half;
    const int head = (idx / half) % n_heads;
    const int r = idx / ((long long)half * n_heads);
    const int p = first_pos + r;
    const float c = cos_t[(size_t)p * half + i], s = sin_t[(size_t)p * half + i];
    float* h = x + ((size_t)r * n_heads + head) * head_dim;
    const int a = halves ? i : 2 * i, b = halves ? i + half : 2 * i + 1;
    const float x0 = h[a], x1 = h[b];
    h[a] = x0 * c - x1 * s;
    h[b] = x0 * s + x1 * c;
}
