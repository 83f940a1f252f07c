#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: builds dllm, runs the GPU tests (each kernel
# and row rule against the CPU, logits against the goldens, greedy decoding against the CPU),
# then benchmarks a LLaDA-8B-shaped synthetic Q4_K_M model on the GPU and writes the JSON
# results: ms/step, tokens/s, and the int8 GEMM alone on each projection shape at 128 to 600
# rows against the tensor cores' int8 peak measured in the same run.
#   scripts/gpu-check.sh [OUT_DIR]      (default: benches/results)
# Needs: the NVIDIA driver, cargo, python3 with pip (for numpy, gguf and the NVRTC wheel when
# the machine has no CUDA toolkit). Takes about 6 minutes on a fresh machine, most of it the build.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-benches/results}"
mkdir -p "$out"
work="${DLLM_GPU_WORK:-/tmp/dllm-gpu-check}"
mkdir -p "$work"

nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version --format=csv || true
if ! ldconfig -p | grep -q libnvrtc.so.12; then
    pip install --quiet nvidia-cuda-nvrtc-cu12
    nvrtc_dir="$(python3 -c 'import nvidia.cuda_nvrtc, os; print(os.path.join(nvidia.cuda_nvrtc.__path__[0], "lib"))')"
    export LD_LIBRARY_PATH="$nvrtc_dir:${LD_LIBRARY_PATH:-}"
fi
pip install --quiet numpy gguf

cargo build --release --locked
DLLM_REQUIRE_GPU=1 DLLM_REQUIRE_NVRTC=1 cargo test --release --locked --test suite cuda:: -- --nocapture --test-threads 1 \
    2>&1 | tee "$work/gpu-tests.log"

model="$work/llada-8b-synth-Q4_K_M.gguf"
if [ ! -f "$model" ]; then
    python3 tools/synthetic-model/make_synthetic_model.py \
        --vocab tests/data/tokenizer/ggml-vocab-llama-bpe.gguf -o "$model"
fi
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr -cd '[:alnum:]-')"
for rows in 20 492; do
    target/release/dllm bench -m "$model" --device cuda --prompt-tokens "$rows" --gen 128 --steps 32 --block 32 \
        --runs 3 --json "$out/cuda-llada8b-Q4_K_M-$gpu-p$rows.json"
done
target/release/dllm bench -m "$model" --device cuda --prompt-tokens 20 --gen 128 --steps 128 --block 32 \
    --threshold 0.9 --cache dual --runs 1 --json "$out/cuda-llada8b-Q4_K_M-$gpu-threshold-dual.json"
echo "results in $out"
