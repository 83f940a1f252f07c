// Non-causal multi-head attention with grouped K/V heads on the f16 tensor cores, flash style:
// scores, an online softmax in f32 and the weighted sum of values stay in registers, tile by tile,
// so no n_rows x n_keys matrix is ever written. Mirrors src/ops/attention.rs.
//
// Grid: (query rows / 64, heads); 4 warps, each owning 16 query rows of one head. Keys and values
// are staged in shared memory as f16, 64 keys at a time. The score tile (m16n8k16 accumulators)
// is rescaled and turned into the P operand of the next mma without leaving registers.
#include "common.cuh"

#define ROWS_PER_WARP 16
#define KEYS 64

__device__ __forceinline__ void mma_f16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// q, out: [n_rows][n_head * HD]; k, v: [n_keys][n_head_kv * HD].
template <int HD>
__device__ void attention(const float* q, const float* k, const float* v, float* out, int n_rows, int n_keys,
                          int n_head, int n_head_kv) {
    const int S = HD + 8;  // shared row stride in halves, against bank conflicts
    __shared__ __align__(16) uint16_t ks[KEYS * (HD + 8)];
    __shared__ __align__(16) uint16_t vs[KEYS * (HD + 8)];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int g = lane >> 2, t = lane & 3;
    const int head = blockIdx.y, kv_head = head / (n_head / n_head_kv);
    const int q_stride = n_head * HD, kv_stride = n_head_kv * HD;
    const int r0 = blockIdx.x * (4 * ROWS_PER_WARP) + warp * ROWS_PER_WARP;
    const float scale = rsqrtf((float)HD);
    const float log2e = 1.4426950408889634f;

    // This warp's queries as A operands, one set of four registers per 16 dimensions.
    uint32_t qa[HD / 16][4];
    {
        const bool in0 = r0 + g < n_rows, in1 = r0 + g + 8 < n_rows;
        const float* q0 = q + (size_t)(r0 + g) * q_stride + head * HD;
        const float* q1 = q0 + (size_t)8 * q_stride;
        for (int s = 0; s < HD / 16; s++) {
            const int c = 16 * s + 2 * t;
            qa[s][0] = in0 ? pack_f16x2(q0[c], q0[c + 1]) : 0u;
            qa[s][1] = in1 ? pack_f16x2(q1[c], q1[c + 1]) : 0u;
            qa[s][2] = in0 ? pack_f16x2(q0[c + 8], q0[c + 9]) : 0u;
            qa[s][3] = in1 ? pack_f16x2(q1[c + 8], q1[c + 9]) : 0u;
        }
    }
    float o[HD / 8][4];
    for (int n = 0; n < HD / 8; n++)
        for (int e = 0; e < 4; e++) o[n][e] = 0.0f;
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};  // rows g and g + 8

    for (int k0 = 0; k0 < n_keys; k0 += KEYS) {
        __syncthreads();
        for (int i = tid; i < KEYS * HD; i += blockDim.x) {
            const int key = i / HD, d = i % HD;
            const bool in = k0 + key < n_keys;
            const size_t at = (size_t)(k0 + key) * kv_stride + kv_head * HD + d;
            ks[key * S + d] = in ? f32_to_f16(k[at]) : 0;
            vs[key * S + d] = in ? f32_to_f16(v[at]) : 0;
        }
        __syncthreads();
        for (int c = 0; c < KEYS / 16; c++) {
            float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
            for (int nt = 0; nt < 2; nt++) {
                const uint16_t* kr = ks + (16 * c + 8 * nt + g) * S;
                for (int st = 0; st < HD / 16; st++) {
                    const uint32_t b0 = *(const uint32_t*)(kr + 16 * st + 2 * t);
                    const uint32_t b1 = *(const uint32_t*)(kr + 16 * st + 8 + 2 * t);
                    mma_f16(s[nt], qa[st][0], qa[st][1], qa[st][2], qa[st][3], b0, b1);
                }
            }
            // s[nt][e]: row g (+8 for e >= 2), key 16c + 8nt + 2t + (e & 1).
            float row_max[2] = {NEG_INF, NEG_INF};
            for (int nt = 0; nt < 2; nt++)
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + 16 * c + 8 * nt + 2 * t + (e & 1);
                    s[nt][e] = key < n_keys ? s[nt][e] * scale : NEG_INF;
                    row_max[e >> 1] = fmaxf(row_max[e >> 1], s[nt][e]);
                }
            float corr[2];
            for (int h = 0; h < 2; h++) {
                row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 1));
                row_max[h] = fmaxf(row_max[h], __shfl_xor_sync(0xffffffffu, row_max[h], 2));
                const float m_new = fmaxf(m[h], row_max[h]);
                corr[h] = m[h] == NEG_INF ? 0.0f : exp2f((m[h] - m_new) * log2e);
                m[h] = m_new;
                l[h] *= corr[h];
            }
            for (int nt = 0; nt < 2; nt++)
                for (int e = 0; e < 4; e++) {
                    const float p = s[nt][e] == NEG_INF ? 0.0f : exp2f((s[nt][e] - m[e >> 1]) * log2e);
                    s[nt][e] = p;
                    l[e >> 1] += p;
                }
            for (int n = 0; n < HD / 8; n++)
                for (int e = 0; e < 4; e++) o[n][e] *= corr[e >> 1];
            // P (16 rows x 16 keys) as the A operand: the two score tiles in mma order.
            const uint32_t p0 = pack_f16x2(s[0][0], s[0][1]), p1 = pack_f16x2(s[0][2], s[0][3]);
            const uint32_t p2 = pack_f16x2(s[1][0], s[1][1]), p3 = pack_f16x2(s[1][2], s[1][3]);
            const uint16_t* v0 = vs + (16 * c + 2 * t) * S;
            for (int n = 0; n < HD / 8; n++) {
                const int d = 8 * n + g;
                const uint32_t b0 = (uint32_t)v0[d] | ((uint32_t)v0[S + d] << 16);
                const uint32_t b1 = (uint32_t)v0[8 * S + d] | ((uint32_t)v0[9 * S + d] << 16);
                mma_f16(o[n], p0, p1, p2, p3, b0, b1);
            }
        }
    }
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    for (int n = 0; n < HD / 8; n++)
        for (int e = 0; e < 4; e++) {
            const int row = r0 + g + (e >= 2 ? 8 : 0);
            if (row < n_rows) out[(size_t)row * q_stride + head * HD + 8 * n + 2 * t + (e & 1)] = o[n][e] / l[e >> 1];
        }
}

#define ATTENTION(name, HD)                                                                                      \
    extern "C" __global__ void __launch_bounds__(128) name(const float* q, const float* k, const float* v,        \
                                                           float* out, int n_rows, int n_keys, int n_head,      \
                                                           int n_head_kv) {                                      \
        attention<HD>(q, k, v, out, n_rows, n_keys, n_head, n_head_kv);                                         \
    }

ATTENTION(attention_d32, 32)
ATTENTION(attention_d64, 64)
ATTENTION(attention_d128, 128)
