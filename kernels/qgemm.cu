// out[r][o] = sum_i x[r][i] w[o][i] with quantized weights read in their GGUF blocks and int8
// activations (quantize.cu) on the int8 tensor cores: one mma.sync per weight sub-block (m16n8k32
// for the 32-value sub-blocks of Q4_K, Q5_K and Q8_0, m16n8k16 for Q6_K's 16-value ones). The
// integer sums are scaled the way ggml's vec_dot functions scale them (src/quant/vec_dot.rs), so
// results match the CPU path up to float summation order.
//
// A block computes a 32-row x 64-output tile with 4 warps; warp w owns outputs 16w..16w+15 (two
// n8 tiles) for all 32 rows (two m16 tiles). Per 256-value super-block the weights of the tile's
// 64 outputs and the activations of its 32 rows are staged in shared memory, with the weight
// scales decoded once.
#include "common.cuh"

#define BM 32
#define BN 64
#define THREADS 128
#define XS 272  // activation row stride in shared memory: 256 bytes + 16 against bank conflicts

enum { Q4_K = 0, Q5_K = 1, Q6_K = 2, Q8_0 = 3 };

template <int T> struct Layout;
template <> struct Layout<Q4_K> { enum { BYTES = 144, STRIDE = 144, GROUPS = 8 }; };
template <> struct Layout<Q5_K> { enum { BYTES = 176, STRIDE = 176, GROUPS = 8 }; };
template <> struct Layout<Q6_K> { enum { BYTES = 210, STRIDE = 212, GROUPS = 16 }; };
// Q8_0: eight 34-byte blocks per 256 values.
template <> struct Layout<Q8_0> { enum { BYTES = 272, STRIDE = 272, GROUPS = 8 }; };

__device__ __forceinline__ uint32_t ld32(const uint8_t* p) { return *(const uint32_t*)p; }

// Four bytes from a 2-byte aligned address.
__device__ __forceinline__ uint32_t ld32_unaligned(const uint8_t* p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j from the 12 packed bytes.
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// The four int8 weights k..k+3 (k a multiple of 4) of 32-value group j (Q4_K, Q5_K, Q8_0) or
// 16-value group j (Q6_K) of one output's super-block.
template <int T> __device__ __forceinline__ uint32_t weights4(const uint8_t* sb, int j, int k);

template <> __device__ __forceinline__ uint32_t weights4<Q4_K>(const uint8_t* sb, int j, int k) {
    return (ld32(sb + 16 + 32 * (j / 2) + k) >> (4 * (j & 1))) & 0x0F0F0F0Fu;
}

template <> __device__ __forceinline__ uint32_t weights4<Q5_K>(const uint8_t* sb, int j, int k) {
    const uint32_t low = (ld32(sb + 48 + 32 * (j / 2) + k) >> (4 * (j & 1))) & 0x0F0F0F0Fu;
    const uint32_t high = ((ld32(sb + 16 + k) >> j) & 0x01010101u) << 4;
    return low | high;
}

template <> __device__ __forceinline__ uint32_t weights4<Q6_K>(const uint8_t* sb, int j, int k) {
    // Group j holds values 16j..16j+15: half n of the super-block, quarter, and offset l.
    const int v = 16 * j + k, n = v / 128, quarter = (v % 128) / 32, l = v % 32;
    const uint32_t low = (ld32(sb + 64 * n + l + 32 * (quarter & 1)) >> (4 * (quarter >> 1))) & 0x0F0F0F0Fu;
    const uint32_t high = ((ld32(sb + 128 + 32 * n + l) >> (2 * quarter)) & 0x03030303u) << 4;
    return __vsub4(low | high, 0x20202020u);  // q - 32, bytewise
}

template <> __device__ __forceinline__ uint32_t weights4<Q8_0>(const uint8_t* sb, int j, int k) {
    return ld32_unaligned(sb + 34 * j + 2 + k);
}

// Q6_K's scale of 16-value group j.
__device__ __forceinline__ int q6_k_scale(const uint8_t* sb, int j) {
    const int n = j / 8, quarter = (j % 8) / 2, h = j % 2;
    return (int)(int8_t)sb[192 + 8 * n + h + 2 * quarter];
}

// x: int8 activations [n_rows][n_in]; xd: their scales, [n_rows][n_in/256] (K-quants, Q8_K) or
// [n_rows][n_in/32] (Q8_0); bsums: [n_rows][n_in/16] (K-quants with a min term, else unused).
template <int T>
__device__ void qgemm(const uint8_t* w, const int8_t* x, const float* xd, const int16_t* bsums, float* out,
                      int n_rows, int n_in, int n_out) {
    typedef Layout<T> L;
    __shared__ __align__(16) uint8_t xs[BM * XS];
    __shared__ __align__(16) uint8_t ws[BN * L::STRIDE];
    __shared__ float xd_s[BM][8];
    __shared__ int bsum_s[BM][8];  // sums of 32-value groups: a 16-sum pair added
    __shared__ float wd_s[BN][8];  // per-output scale: d (K-quants, index 0) or each Q8_0 block's d
    __shared__ float wmin_s[BN];
    __shared__ int8_t wsc_s[BN][16];
    __shared__ int8_t wm_s[BN][8];

    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int n_sb = n_in / 256;
    const size_t row_bytes = (size_t)n_sb * L::BYTES;

    float acc[2][2][4];
    for (int mi = 0; mi < 2; mi++)
        for (int ni = 0; ni < 2; ni++)
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

    for (int sb = 0; sb < n_sb; sb++) {
        __syncthreads();
        // Activations: 32 rows x 256 bytes as 16-byte vectors; missing rows are zero.
        for (int i = tid; i < BM * 16; i += THREADS) {
            const int r = i / 16, c = i % 16;
            int4 v = make_int4(0, 0, 0, 0);
            if (row0 + r < n_rows) v = *(const int4*)(x + (size_t)(row0 + r) * n_in + (size_t)sb * 256 + c * 16);
            *(int4*)(xs + r * XS + c * 16) = v;
        }
        for (int i = tid; i < BM * 8; i += THREADS) {
            const int r = i / 8, j = i % 8;
            const bool in = row0 + r < n_rows;
            if (T == Q8_0) {
                xd_s[r][j] = in ? xd[(size_t)(row0 + r) * (n_in / 32) + sb * 8 + j] : 0.0f;
            } else {
                if (j == 0) xd_s[r][0] = in ? xd[(size_t)(row0 + r) * n_sb + sb] : 0.0f;
                const int16_t* bs = bsums + (size_t)(row0 + r) * (n_in / 16) + sb * 16 + 2 * j;
                bsum_s[r][j] = in ? (int)bs[0] + (int)bs[1] : 0;
            }
        }
        // Weights: the super-block of each of the 64 outputs, copied as 16-bit words (every
        // block size is even, Q6_K's is not a multiple of 4).
        for (int i = tid; i < BN * (L::BYTES / 2); i += THREADS) {
            const int o = i / (L::BYTES / 2), h = i % (L::BYTES / 2);
            uint16_t v = 0;
            if (col0 + o < n_out) v = ((const uint16_t*)(w + (size_t)(col0 + o) * row_bytes + (size_t)sb * L::BYTES))[h];
            ((uint16_t*)(ws + o * L::STRIDE))[h] = v;
        }
        __syncthreads();
        for (int i = tid; i < BN * 8; i += THREADS) {
            const int o = i / 8, j = i % 8;
            const uint8_t* b = ws + o * L::STRIDE;
            if (T == Q4_K || T == Q5_K) {
                int sc, m;
                scale_min_k4(j, b + 4, &sc, &m);
                wsc_s[o][j] = (int8_t)sc;
                wm_s[o][j] = (int8_t)m;
                if (j == 0) {
                    wd_s[o][0] = f16_to_f32(*(const uint16_t*)b);
                    wmin_s[o] = f16_to_f32(*(const uint16_t*)(b + 2));
                }
            } else if (T == Q6_K) {
                wsc_s[o][2 * j] = (int8_t)q6_k_scale(b, 2 * j);
                wsc_s[o][2 * j + 1] = (int8_t)q6_k_scale(b, 2 * j + 1);
                if (j == 0) wd_s[o][0] = f16_to_f32(*(const uint16_t*)(b + 208));
            } else {
                wd_s[o][j] = f16_to_f32((uint16_t)b[34 * j] | ((uint16_t)b[34 * j + 1] << 8));
            }
        }
        __syncthreads();

        int isc[2][2][4], imin[2][2][4];
        for (int mi = 0; mi < 2; mi++)
            for (int ni = 0; ni < 2; ni++)
                for (int e = 0; e < 4; e++) isc[mi][ni][e] = imin[mi][ni][e] = 0;

        for (int j = 0; j < L::GROUPS; j++) {
            for (int ni = 0; ni < 2; ni++) {
                const int o = warp * 16 + ni * 8;  // first output of this n8 tile in the block
                const uint8_t* wb = ws + (o + g) * L::STRIDE;
                for (int mi = 0; mi < 2; mi++) {
                    const uint8_t* xr0 = xs + (mi * 16 + g) * XS;
                    const uint8_t* xr1 = xr0 + 8 * XS;
                    int c[4] = {0, 0, 0, 0};
                    if (T == Q6_K) {
                        mma_k16(c, ld32(xr0 + 16 * j + 4 * t), ld32(xr1 + 16 * j + 4 * t), weights4<T>(wb, j, 4 * t));
                    } else {
                        const uint32_t a[4] = {ld32(xr0 + 32 * j + 4 * t), ld32(xr1 + 32 * j + 4 * t),
                                               ld32(xr0 + 32 * j + 16 + 4 * t), ld32(xr1 + 32 * j + 16 + 4 * t)};
                        mma_k32(c, a, weights4<T>(wb, j, 4 * t), weights4<T>(wb, j, 16 + 4 * t));
                    }
                    // c[e] sits at row g (+8 for e >= 2), output column 2t + (e & 1) of the tile.
                    for (int e = 0; e < 4; e++) {
                        const int col = o + 2 * t + (e & 1), row = mi * 16 + g + (e >= 2 ? 8 : 0);
                        if (T == Q8_0) {
                            acc[mi][ni][e] += wd_s[col][j] * xd_s[row][j] * (float)c[e];
                        } else {
                            isc[mi][ni][e] += (int)wsc_s[col][j] * c[e];
                            if (T != Q6_K) imin[mi][ni][e] += (int)wm_s[col][j] * bsum_s[row][j];
                        }
                    }
                }
            }
        }
        if (T != Q8_0) {
            for (int mi = 0; mi < 2; mi++)
                for (int ni = 0; ni < 2; ni++)
                    for (int e = 0; e < 4; e++) {
                        const int col = warp * 16 + ni * 8 + 2 * t + (e & 1), row = mi * 16 + g + (e >= 2 ? 8 : 0);
                        const float xdr = xd_s[row][0];
                        acc[mi][ni][e] += wd_s[col][0] * xdr * (float)isc[mi][ni][e];
                        if (T != Q6_K) acc[mi][ni][e] -= wmin_s[col] * xdr * (float)imin[mi][ni][e];
                    }
        }
    }
    for (int mi = 0; mi < 2; mi++)
        for (int ni = 0; ni < 2; ni++)
            for (int e = 0; e < 4; e++) {
                const int col = col0 + warp * 16 + ni * 8 + 2 * t + (e & 1);
                const int row = row0 + mi * 16 + g + (e >= 2 ? 8 : 0);
                if (row < n_rows && col < n_out) out[(size_t)row * n_out + col] = acc[mi][ni][e];
            }
}

#define QGEMM(name, T)                                                                                   \
    extern "C" __global__ void __launch_bounds__(THREADS) name(const uint8_t* w, const int8_t* x,         \
                                                               const float* xd, const int16_t* bsums,     \
                                                               float* out, int n_rows, int n_in, int n_out) { \
        qgemm<T>(w, x, xd, bsums, out, n_rows, n_in, n_out);                                              \
    }

// A mixture-of-experts product: expert e (blockIdx.z) multiplies rows starts[e]..starts[e+1] of
// the gathered activations by its matrix ws[e], into the same rows of out. The grid's y covers
// the most rows an expert can take (every row of the pass); tiles past an expert's rows return.
#define QGEMM_EXPERTS(name, T)                                                                           \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                 \
        name(const uint8_t* const* ws, const int* starts, const int8_t* x, const float* xd,               \
             const int16_t* bsums, float* out, int n_in, int n_out) {                                     \
        const int e = blockIdx.z, first = starts[e], rows = starts[e + 1] - first;                        \
        if ((int)blockIdx.y * BM >= rows) return;                                                         \
        const int xd_per_row = T == Q8_0 ? n_in / 32 : n_in / 256;                                       \
        qgemm<T>(ws[e], x + (size_t)first * n_in, xd + (size_t)first * xd_per_row,                      \
                 bsums + (size_t)first * (n_in / 16), out + (size_t)first * n_out, rows, n_in, n_out);    \
    }

QGEMM(qgemm_q4_k, Q4_K)
QGEMM(qgemm_q5_k, Q5_K)
QGEMM(qgemm_q6_k, Q6_K)
QGEMM(qgemm_q8_0, Q8_0)
QGEMM_EXPERTS(qgemm_q4_k_experts, Q4_K)
QGEMM_EXPERTS(qgemm_q5_k_experts, Q5_K)
QGEMM_EXPERTS(qgemm_q6_k_experts, Q6_K)
QGEMM_EXPERTS(qgemm_q8_0_experts, Q8_0)

// Float weights (F32, F16, BF16 matrices, and types without an int8 kernel dequantized to F32 at
// upload): a plain 16x16-tiled product in f32.
template <int T> __device__ __forceinline__ float weight_at(const void* w, size_t i);
template <> __device__ __forceinline__ float weight_at<0>(const void* w, size_t i) { return ((const float*)w)[i]; }
template <> __device__ __forceinline__ float weight_at<1>(const void* w, size_t i) {
    return f16_to_f32(((const uint16_t*)w)[i]);
}
template <> __device__ __forceinline__ float weight_at<2>(const void* w, size_t i) {
    return bf16_to_f32(((const uint16_t*)w)[i]);
}

template <int T>
__device__ void gemm_float(const void* w, const float* x, float* out, int n_rows, int n_in, int n_out) {
    __shared__ float xt[16][17];
    __shared__ float wt[16][17];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float sum = 0.0f;
    for (int k0 = 0; k0 < n_in; k0 += 16) {
        const int wrow = blockIdx.x * 16 + ty;
        xt[ty][tx] = (row < n_rows && k0 + tx < n_in) ? x[(size_t)row * n_in + k0 + tx] : 0.0f;
        wt[ty][tx] = (wrow < n_out && k0 + tx < n_in) ? weight_at<T>(w, (size_t)wrow * n_in + k0 + tx) : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; k++) sum += xt[ty][k] * wt[tx][k];
        __syncthreads();
    }
    if (row < n_rows && col < n_out) out[(size_t)row * n_out + col] = sum;
}

extern "C" __global__ void gemm_f32(const void* w, const float* x, float* out, int n_rows, int n_in, int n_out) {
    gemm_float<0>(w, x, out, n_rows, n_in, n_out);
}
extern "C" __global__ void gemm_f16(const void* w, const float* x, float* out, int n_rows, int n_in, int n_out) {
    gemm_float<1>(w, x, out, n_rows, n_in, n_out);
}
extern "C" __global__ void gemm_bf16(const void* w, const float* x, float* out, int n_rows, int n_in, int n_out) {
    gemm_float<2>(w, x, out, n_rows, n_in, n_out);
}

// gemm_float over a mixture of experts, as QGEMM_EXPERTS: expert blockIdx.z, 16-row tiles.
#define GEMM_EXPERTS(name, T)                                                                          \
    extern "C" __global__ void name(const void* const* ws, const int* starts, const float* x, float* out, \
                                    int n_in, int n_out) {                                             \
        const int e = blockIdx.z, first = starts[e], rows = starts[e + 1] - first;                     \
        if ((int)blockIdx.y * 16 >= rows) return;                                                      \
        gemm_float<T>(ws[e], x + (size_t)first * n_in, out + (size_t)first * n_out, rows, n_in, n_out); \
    }

GEMM_EXPERTS(gemm_f32_experts, 0)
GEMM_EXPERTS(gemm_f16_experts, 1)
GEMM_EXPERTS(gemm_bf16_experts, 2)
