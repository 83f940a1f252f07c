#!/usr/bin/env bash
# Builds the bundled demo model from nothing: corpus, tokenizer, training (three phases, on the
# wall clock), Q8_0 GGUF export into assets/, and the reference outputs of the official LLaDA
# sampler that tests/suite/demo_model.rs checks dllm against.
#   tools/demo-model/make_demo_model.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$here/build}"
cd "$here"
pip install --quiet -r requirements.txt
python3 train.py --out "$build" --minutes 95
python3 train.py --out "$build" --resume --minutes 25 --lr 8e-4 --warmup 5
python3 train.py --out "$build" --resume --minutes 80 --lr 6e-4 --warmup 5
python3 export_gguf.py --build "$build" --out "$root/assets/demo-model-Q8_0.gguf"
mkdir -p "$root/tests/data/demo"
python3 record_reference.py --gguf "$root/assets/demo-model-Q8_0.gguf" --build "$build" \
    --out "$root/tests/data/demo/expected.json"
cp "$build/train-log.json" "$root/assets/demo-model-train-log.json"
(cd "$root/assets" && sha256sum demo-model-Q8_0.gguf)
