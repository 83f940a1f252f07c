// The samplers' per-row rules over a vocabulary of logits, applied where the logits are so that
// only a token and a confidence per row cross to the host. Mirrors `RowRule::choose` in
// src/sampler/row_rule.rs (and the reductions of src/sampler/rows.rs it calls): LLaDA's greedy
// choice (first argmax, softmax probability in f32 or f64), and Dream's sample_tokens
// (temperature, top-p, top-k, softmax, argmax or a draw, then probability, margin or negative
// entropy). Sums run in a different order than on the CPU, so values agree to float rounding
// and choices can differ only where two candidates are within that rounding (a tie).
#include "common.cuh"

#define THREADS 512
// f32::MIN, what the CPU's filters write over the logits they remove.
#define F32_MIN (-3.40282347e+38f)

enum { LLADA_F32 = 0, LLADA_F64 = 1, DREAM = 2 };
enum { PROBABILITY = 0, MARGIN = 1, NEG_ENTROPY = 2 };

// A float's bits mapped to an unsigned key of the same order, so a bisection over keys finds
// a value of the row exactly.
__device__ __forceinline__ uint32_t key_of(float f) {
    const uint32_t b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float float_of(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// `op` over the block; every thread gets the result. Fixed order: a butterfly in each warp,
// then the warps in order.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op) {
    __shared__ T part[THREADS / WARP];
    for (int o = WARP / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = part[0];
    for (int w = 1; w < THREADS / WARP; w++) v = op(v, part[w]);
    return v;
}

template <typename T>
__device__ __forceinline__ T block_add(T v) {
    return block_reduce(v, [](T a, T b) { return a + b; });
}

// Prefix sums of one value per thread (Hillis-Steele): `*before` gets the sum over the threads
// before this one and `*through` the sum including it, exactly the next thread's `*before`, so
// the ranges [before, through) of consecutive threads tile without gaps. Returns the whole sum.
template <typename T>
__device__ T block_scan(T v, T* before, T* through) {
    __shared__ T s[THREADS];
    const int tid = threadIdx.x;
    __syncthreads();
    s[tid] = v;
    __syncthreads();
    for (int off = 1; off < THREADS; off <<= 1) {
        const T t = tid >= off ? s[tid - off] : T(0);
        __syncthreads();
        s[tid] += t;
        __syncthreads();
    }
    *before = tid == 0 ? T(0) : s[tid - 1];
    *through = s[tid];
    const T total = s[THREADS - 1];
    __syncthreads();
    return total;
}

// The contiguous range of the row a thread owns where index order matters.
__device__ __forceinline__ void chunk_of(int n, int* begin, int* end) {
    const int per = (n + THREADS - 1) / THREADS;
    *begin = min(n, (int)threadIdx.x * per);
    *end = min(n, *begin + per);
}

struct Top2 {
    float best, second;
    int at;  // first index of `best`
};

// Keeps (value, index) of the larger value, the smaller index on ties.
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
    }
}

__device__ Top2 top2(const float* x, int n) {
    __shared__ float sv[THREADS / WARP], sv2[THREADS / WARP];
    __shared__ int si[THREADS / WARP];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    float best = NEG_INF, second = NEG_INF;
    int at = 0x7fffffff;
    for (int i = tid; i < n; i += THREADS) {
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
    __syncthreads();
    if (lane == 0) {
        sv[warp] = best;
        sv2[warp] = second;
        si[warp] = at;
    }
    __syncthreads();
    Top2 t = {sv[0], sv2[0], si[0]};
    for (int w = 1; w < THREADS / WARP; w++) {
        t.second = fmaxf(fmaxf(t.second, sv2[w]), fminf(t.best, sv[w]));
        better(t.best, t.at, sv[w], si[w]);
    }
    return t;
}

// The largest key K such that `holds(K)` for a predicate true at key 0 and monotone (true up to
// some key, false beyond it): 32 halvings of the key range, each one block-wide decision.
template <typename Holds>
__device__ uint32_t largest_key(Holds holds) {
    unsigned long long lo = 0, hi = 0xffffffffull;
    while (lo < hi) {
        const unsigned long long mid = lo + (hi - lo + 1) / 2;
        if (holds((uint32_t)mid)) lo = mid;
        else hi = mid - 1;
    }
    return (uint32_t)lo;
}

// Dream's top_p_logits (top_p_filter on the CPU): sorted by logit, descending, ties in index
// order, the tokens after the first whose cumulative probability exceeds top_p become f32::MIN.
// The cut token's logit tau is the largest logit whose tokens at or above it hold more than
// top_p; of the tokens tied at tau, the first ones in index order are kept until the sum passes.
__device__ void keep_top_p(float* x, int n, float max, float top_p) {
    const int tid = threadIdx.x;
    float e = 0.0f;
    for (int i = tid; i < n; i += THREADS) e += expf(x[i] - max);
    const float total = block_add(e);
    auto mass_from = [&](uint32_t k) {
        float m = 0.0f;
        for (int i = tid; i < n; i += THREADS)
            if (key_of(x[i]) >= k) m += expf(x[i] - max) / total;
        return block_add(m);
    };
    const uint32_t cut = largest_key([&](uint32_t k) { return mass_from(k) > top_p; });
    const float tau = float_of(cut);
    const float above = cut == 0xffffffffu ? 0.0f : mass_from(cut + 1);
    int ties = 0;
    for (int i = tid; i < n; i += THREADS) ties += x[i] == tau;
    ties = block_add(ties);
    const float q_tau = expf(tau - max) / total;
    int keep = 0;
    for (float cum = above; keep < ties;) {
        cum += q_tau;
        keep++;
        if (cum > top_p) break;
    }
    // The first `keep` tied tokens in index order stay: count them over owned ranges.
    int begin, end, owned_ties = 0, rank, through;
    chunk_of(n, &begin, &end);
    for (int i = begin; i < end; i++) owned_ties += x[i] == tau;
    block_scan(owned_ties, &rank, &through);
    for (int i = begin; i < end; i++) {
        if (x[i] < tau) x[i] = F32_MIN;
        else if (x[i] == tau && rank++ >= keep) x[i] = F32_MIN;
    }
    __syncthreads();
}

// Dream's top_k_logits (top_k_filter on the CPU): logits below the k-th largest become
// f32::MIN, ties kept.
__device__ void keep_top_k(float* x, int n, int k) {
    const int tid = threadIdx.x;
    const uint32_t kth_key = largest_key([&](uint32_t key) {
        int c = 0;
        for (int i = tid; i < n; i += THREADS) c += key_of(x[i]) >= key;
        return block_add(c) >= k;
    });
    const float kth = float_of(kth_key);
    for (int i = tid; i < n; i += THREADS)
        if (x[i] < kth) x[i] = F32_MIN;
    __syncthreads();
}

// categorical() on the CPU: the first token, in index order, at which the running sum of the
// f32 probabilities passes u times their f64 total; the last token of nonzero probability if
// rounding leaves none.
__device__ int draw(const float* x, int n, float max, float sum, double u) {
    __shared__ int drawn;
    const int tid = threadIdx.x;
    int begin, end;
    chunk_of(n, &begin, &end);
    double owned = 0.0;
    int last = -1;
    for (int i = begin; i < end; i++) {
        const float w = expf(x[i] - max) / sum;
        owned += (double)w;
        if (w > 0.0f) last = i;
    }
    double before, through;
    const double target = u * block_scan(owned, &before, &through);
    if (tid == 0) drawn = -1;
    __syncthreads();
    if (target >= before && target < through) {
        double left = target - before;
        int pick = last;
        for (int i = begin; i < end; i++) {
            const float w = expf(x[i] - max) / sum;
            if (w > 0.0f) {
                if (left < (double)w) {
                    pick = i;
                    break;
                }
                left -= (double)w;
            }
        }
        drawn = pick;
    }
    __syncthreads();
    const int fallback = block_reduce(last, [](int a, int b) { return a > b ? a : b; });
    return drawn >= 0 ? drawn : fallback;
}

// One block of THREADS per row. `logits` is consumed (Dream's rule writes the filtered logits
// over it). `uniforms` has a number per row when the rule draws (Dream, temperature above 0).
// Outputs per row: the token and its confidence (f64: f32 confidences convert exactly).
extern "C" __global__ void __launch_bounds__(THREADS)
    choose_token(float* logits, int n_vocab, int rule, float temperature, float top_p, int top_k, int confidence,
                 const double* uniforms, int* token, double* confidence_out) {
    float* x = logits + (size_t)blockIdx.x * n_vocab;
    const int tid = threadIdx.x;
    const bool dream = rule == DREAM, draws = dream && temperature > 0.0f;
    if (draws) {
        for (int i = tid; i < n_vocab; i += THREADS) x[i] = x[i] / temperature;
        __syncthreads();
    }
    if (dream && top_p > 0.0f && top_p < 1.0f) {
        float m = NEG_INF;
        for (int i = tid; i < n_vocab; i += THREADS) m = fmaxf(m, x[i]);
        keep_top_p(x, n_vocab, block_reduce(m, [](float a, float b) { return fmaxf(a, b); }), top_p);
    }
    if (dream && top_k > 0 && top_k < n_vocab) keep_top_k(x, n_vocab, top_k);
    const Top2 t = top2(x, n_vocab);
    if (rule == LLADA_F64) {
        double s = 0.0;
        for (int i = tid; i < n_vocab; i += THREADS) s += exp((double)x[i] - (double)t.best);
        s = block_add(s);
        if (tid == 0) {
            token[blockIdx.x] = t.at;
            confidence_out[blockIdx.x] = 1.0 / s;
        }
        return;
    }
    float s = 0.0f;
    for (int i = tid; i < n_vocab; i += THREADS) s += expf(x[i] - t.best);
    const float sum = block_add(s);
    const int x0 = draws ? draw(x, n_vocab, t.best, sum, uniforms[blockIdx.x]) : t.at;
    float c;
    if (!dream || confidence == PROBABILITY) {
        c = expf(x[x0] - t.best) / sum;
    } else if (confidence == MARGIN) {
        c = 1.0f / sum - expf(t.second - t.best) / sum;
    } else {
        float ent = 0.0f;
        for (int i = tid; i < n_vocab; i += THREADS) {
            const float p = expf(x[i] - t.best) / sum;
            ent += p * logf(p + 1e-10f);
        }
        c = block_add(ent);
    }
    if (tid == 0) {
        token[blockIdx.x] = x0;
        confidence_out[blockIdx.x] = (double)c;
    }
}
