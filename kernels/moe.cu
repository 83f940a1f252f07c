// A mixture-of-experts FFN's routing on the device, as backend::Routes computes it on the host
// (src/backend/routing.rs): each row's experts and weights (moe_route), the chosen (row, expert)
// pairs grouped by expert (moe_group), the rows gathered in that order (gather_rows), and the
// experts' weighted outputs summed back per row (moe_combine). Nothing goes back to the host.
#include "common.cuh"

// The most experts moe_group handles (its cursors live in shared memory); the loader checks.
#define MAX_EXPERTS 1024

// llama.cpp's clamp of the kept weights' sum: 2^-14, the smallest normal f16.
#define MIN_WEIGHT_SUM (1.0f / 16384.0f)

// Whether expert a ranks before expert b: higher probability first, ties to the lower index (a
// stable descending sort, as the host and the reference).
__device__ __forceinline__ bool ranks_before(float pa, int a, float pb, int b) {
    return pa > pb || (pa == pb && a < b);
}

// One thread per row: softmax over the row's n_expert logits (ggml's: exponentials of x - max in
// f32, their sum in f64), its k best experts, most probable first, and their weights (divided by
// their sum when normalize, scaled by scale when it is neither 0 nor 1). Writes row r's slot s at
// r * k + s.
extern "C" __global__ void moe_route(const float* logits, int n_rows, int n_expert, int k, int normalize,
                                     float scale, int* slot_expert, float* slot_weight) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rows) return;
    const float* x = logits + (size_t)r * n_expert;
    float max = NEG_INF;
    for (int e = 0; e < n_expert; e++) max = fmaxf(max, x[e]);
    double sum = 0.0;
    for (int e = 0; e < n_expert; e++) sum += (double)expf(x[e] - max);
    const float inv = (float)(1.0 / sum);
    // The s-th choice is the best expert ranked after the (s-1)-th.
    int prev = -1;
    float prev_p = 0.0f, kept = 0.0f;
    for (int s = 0; s < k; s++) {
        int best = -1;
        float best_p = 0.0f;
        for (int e = 0; e < n_expert; e++) {
            const float p = expf(x[e] - max) * inv;
            if (prev >= 0 && !ranks_before(prev_p, prev, p, e)) continue;
            if (best < 0 || ranks_before(p, e, best_p, best)) {
                best = e;
                best_p = p;
            }
        }
        slot_expert[(size_t)r * k + s] = best;
        slot_weight[(size_t)r * k + s] = best_p;
        kept += best_p;
        prev = best;
        prev_p = best_p;
    }
    for (int s = 0; s < k; s++) {
        float w = slot_weight[(size_t)r * k + s];
        if (normalize) w /= fmaxf(kept, MIN_WEIGHT_SUM);
        if (scale != 0.0f && scale != 1.0f) w *= scale;
        slot_weight[(size_t)r * k + s] = w;
    }
}

// One thread: a counting sort of the n_slots (row, expert) pairs by expert, stable in row order.
// starts[e]..starts[e+1] are expert e's gathered positions, gathered[p] the row at position p,
// slot_position[slot] where a slot went. A few thousand slots: a single thread keeps the order
// stable at no measurable cost next to the products.
extern "C" __global__ void moe_group(const int* slot_expert, int n_slots, int k, int n_expert, int* starts,
                                     int* gathered, int* slot_position) {
    __shared__ int next[MAX_EXPERTS];
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (int e = 0; e <= n_expert; e++) starts[e] = 0;
    for (int i = 0; i < n_slots; i++) starts[slot_expert[i] + 1]++;
    for (int e = 0; e < n_expert; e++) {
        starts[e + 1] += starts[e];
        next[e] = starts[e];
    }
    for (int i = 0; i < n_slots; i++) {
        const int p = next[slot_expert[i]]++;
        gathered[p] = i / k;
        slot_position[i] = p;
    }
}

// dst[i][c] = src[rows[i]][c] for i < n_rows, c < width. Grid: (column blocks, n_rows).
extern "C" __global__ void gather_rows(const float* src, const int* rows, float* dst, int n_rows, int width) {
    const int i = blockIdx.y;
    if (i >= n_rows) return;
    const float* from = src + (size_t)rows[i] * width;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < width; c += gridDim.x * blockDim.x)
        dst[(size_t)i * width + c] = from[c];
}

// dst[r][c] = sum over s < k of slot_weight[r*k+s] * src[slot_position[r*k+s]][c], slot by slot
// (llama.cpp multiplies each expert's output by its weight, then adds the experts in order; the
// _rn intrinsics keep the multiply and the add separate, as there). Grid: (column blocks, n_rows).
extern "C" __global__ void moe_combine(const float* src, const int* slot_position, const float* slot_weight,
                                       float* dst, int n_rows, int k, int width) {
    const int r = blockIdx.y;
    if (r >= n_rows) return;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < width; c += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < k; s++) {
            const int slot = r * k + s;
            const float v = __fmul_rn(src[(size_t)slot_position[slot] * width + c], slot_weight[slot]);
            acc = s == 0 ? v : __fadd_rn(acc, v);
        }
        dst[(size_t)r * width + c] = acc;
    }
}
