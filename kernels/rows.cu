// The sampler's per-row reductions over a vocabulary of logits, so that only a few numbers per
// row cross to the host: argmax (first index on ties, as torch.argmax), the softmax probability
// of that token, the margin between the two most likely tokens, and the negative entropy
// sum p ln(p + 1e-10). Mirrors argmax, softmax_prob, margin and neg_entropy in src/sampler/rows.rs.
#include "common.cuh"

#define THREADS 256

// Keeps (value, index) of the larger value, the smaller index on ties.
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
    }
}

// One block per row. Outputs per row: argmax, p_max, margin, neg_entropy.
extern "C" __global__ void __launch_bounds__(THREADS) row_stats(const float* logits, int n_vocab, int* argmax,
                                                                float* p_max, float* margin, float* neg_entropy) {
    __shared__ float sv[THREADS / WARP], sv2[THREADS / WARP];
    __shared__ int si[THREADS / WARP];
    __shared__ float partial[THREADS / WARP];
    const float* x = logits + (size_t)blockIdx.x * n_vocab;
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;

    // Largest and second largest logits, and the first index of the largest.
    float best = NEG_INF, second = NEG_INF;
    int at = 0x7fffffff;
    for (int i = tid; i < n_vocab; i += THREADS) {
        const float v = x[i];
        if (v > best) {
            second = best;
            best = v;
            at = i;
        } else if (v > second) {
            second = v;
        }
    }
    for (int o = WARP / 2; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o), os = __shfl_xor_sync(0xffffffffu, second, o);
        const int oa = __shfl_xor_sync(0xffffffffu, at, o);
        second = fmaxf(fmaxf(second, os), fminf(best, ob));
        better(best, at, ob, oa);
    }
    if (lane == 0) {
        sv[warp] = best;
        sv2[warp] = second;
        si[warp] = at;
    }
    __syncthreads();
    best = sv[0];
    second = sv2[0];
    at = si[0];
    for (int w = 1; w < THREADS / WARP; w++) {
        second = fmaxf(fmaxf(second, sv2[w]), fminf(best, sv[w]));
        better(best, at, sv[w], si[w]);
    }

    float sum = 0.0f;
    for (int i = tid; i < n_vocab; i += THREADS) sum += expf(x[i] - best);
    sum = block_sum(sum, partial);
    float ent = 0.0f;
    for (int i = tid; i < n_vocab; i += THREADS) {
        const float p = expf(x[i] - best) / sum;
        ent += p * logf(p + 1e-10f);
    }
    ent = block_sum(ent, partial);
    if (tid == 0) {
        argmax[blockIdx.x] = at;
        p_max[blockIdx.x] = 1.0f / sum;
        margin[blockIdx.x] = (1.0f - expf(second - best)) / sum;
        neg_entropy[blockIdx.x] = ent;
    }
}
