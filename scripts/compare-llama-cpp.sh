#!/usr/bin/env bash
# dllm against llama.cpp's llama-diffusion-cli on the same GGUF file, threads and canvas, in one
# run on this machine, so that the two step times are a ratio measured together.
#   scripts/compare-llama-cpp.sh MODEL [OUT_DIR]      (default: benches/results)
# Writes OUT_DIR/compare-NAME-xTHREADS-dllm.json (a `dllm bench` result) and
# OUT_DIR/compare-NAME-xTHREADS-llama-cpp.json (the CLI's numbers), NAME the model's file name.
# llama.cpp is built (CPU, -march=native) from the source that the llama-cpp-python sdist on PyPI
# vendors: PyPI is reachable from machines that cannot reach GitHub.
# Env: THREADS (2), STEPS (8: a multiple of 4, because the CLI's block schedule counts the prompt
# and splits a 148-token canvas into 4 blocks of 37), BLOCK (dllm's block length, 32; empty for
# Dream, whose sampler without a threshold fills the whole answer at once), LLAMA_CPP_PYTHON_VERSION (0.3.36),
# LLAMA_CPP_WORK (/tmp/llama-cpp-compare: the source and its build, kept between runs).
# Needs: cargo, python3, curl, a C++ compiler, /usr/bin/time; cmake (installed with pip if absent).
set -euo pipefail
cd "$(dirname "$0")/.."
model="$(realpath "$1")"
out="${2:-benches/results}"
threads="${THREADS:-2}"
steps="${STEPS:-8}"
block=("--block" "${BLOCK-32}")
[ -n "${BLOCK-32}" ] || block=()
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
work="${LLAMA_CPP_WORK:-/tmp/llama-cpp-compare}"
mkdir -p "$work" "$out"

src="$work/llama_cpp_python-$version/vendor/llama.cpp"
cli="$src/build/bin/llama-diffusion-cli"
if [ ! -x "$cli" ]; then
    if [ ! -d "$src" ]; then
        # The simple index (PEP 503): some registry mirrors answer it but not the JSON API.
        url="$(curl -fsSL "https://pypi.org/simple/llama-cpp-python/" \
            | grep -o "https://[^\"#]*llama_cpp_python-$version.tar.gz" | head -n 1)"
        [ -n "$url" ] || { echo "no sdist of llama-cpp-python $version on PyPI's simple index" >&2; exit 1; }
        curl -fsSL "$url" | tar xz -C "$work"
    fi
    command -v cmake > /dev/null || pip install --quiet cmake
    cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF > "$work/cmake.log"
    cmake --build "$src/build" -j "$(nproc)" --target llama-diffusion-cli > "$work/build.log"
fi

cargo build --release --locked
name="$(basename "$model" .gguf)"
base="$out/compare-$name-x$threads"

# Both tools read the file from the page cache; dllm's first run also writes its pack cache, so
# that the timed run starts the way a user's second run does.
cat "$model" > /dev/null
target/release/dllm bench -m "$model" --threads "$threads" --prompt-tokens 20 --gen 128 --steps 4 --runs 1 > /dev/null
target/release/dllm bench -m "$model" --threads "$threads" --prompt-tokens 20 --gen 128 --steps "$steps" \
    "${block[@]}" --runs 2 --json "$base-dllm.json"

cat "$model" > /dev/null
log="$work/llama-diffusion-cli.log"
# A 148-token canvas (-ub 148) as dllm's 20 + 128; greedy, confidence-based (the CLI's default).
cmd=("$cli" -m "$model" -p "Write a short story about a robot who learns to paint" -ub 148 -c 148 -b 148
    --diffusion-block-length 37 --diffusion-steps "$steps" -t "$threads" --temp 0 --seed 1)
/usr/bin/time -v "${cmd[@]}" > "$log" 2>&1
"$cli" --version > "$work/version.txt" 2>&1 || true

# The command as recorded: the paths shortened to file names.
shown=(llama-diffusion-cli -m "$(basename "$model")" "${cmd[@]:3}")
python3 - "$log" "$work/version.txt" "$base-llama-cpp.json" "$(basename "$base-dllm.json")" "$version" "$threads" \
    "$steps" "${shown[*]}" << 'EOF'
import json, re, sys
log_path, version_path, out_path, dllm_file, sdist, threads, steps, command = sys.argv[1:]
log = open(log_path, errors="replace").read()
per_step = re.search(r"total time: ([\d.]+)ms, time per step: ([\d.]+)ms, sampling time per step: ([\d.]+)ms", log)
rss_kb = re.search(r"Maximum resident set size \(kbytes\): (\d+)", log)
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", log)
if not (per_step and rss_kb and wall):
    sys.exit(f"llama-diffusion-cli output not understood; see {log_path}")
wall_s = 0.0
for part in wall.group(1).split(":"):
    wall_s = wall_s * 60 + float(part)
total_ms, ms_per_step, sampling_ms = (float(g) for g in per_step.groups())
version = open(version_path, errors="replace").read().split("\n")[0].strip()
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
result = {
    "tool": "llama.cpp llama-diffusion-cli",
    "version": version,
    "source": f"llama-cpp-python {sdist} sdist from PyPI (vendor/llama.cpp), CPU build, -march=native",
    "command": command,
    "cpu": cpu,
    "cpu_flags": [f for f in flags if f.startswith(("avx", "fma", "f16c"))],
    "threads": int(threads),
    "canvas": 148,
    "steps": int(steps),
    "ms_per_step": ms_per_step,
    "sampling_ms_per_step": sampling_ms,
    # Process start to exit, less the generation: loading, repacking, tokenizing and teardown.
    "startup_ms": wall_s * 1000 - total_ms,
    "peak_rss_bytes": int(rss_kb.group(1)) * 1024,
    "dllm_result": dllm_file,
}
json.dump(result, open(out_path, "w"), indent=2)
print(f"llama.cpp: {ms_per_step:.0f} ms/step; written {out_path}")
EOF
