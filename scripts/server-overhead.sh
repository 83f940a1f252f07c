#!/usr/bin/env bash
# What `dllm serve` adds over `dllm run` on one model, measured in one run (#22):
#   - time to first step event: request sent -> first streamed `diffusion` event, against
#     `dllm run`'s first step (its trace's first line) after the model is loaded;
#   - per-step overhead: the mean interval between streamed step events, against the mean
#     step time of `dllm run` with the same prompt and settings.
# Usage: scripts/server-overhead.sh MODEL.gguf OUT.txt [GEN STEPS BLOCK]
set -euo pipefail
model="$1"; out="$2"; gen="${3:-32}"; steps="${4:-8}"; block="${5:-32}"
bin="${DLLM:-target/release/dllm}"
prompt="Once upon a time, there was a little girl who"
work="$(mktemp -d)"; serve_pid=""
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; rm -rf "$work"' EXIT
flags=(--gen "$gen" --steps "$steps" --block "$block" --temperature 0 --no-early-stop)

"$bin" run -m "$model" --raw "${flags[@]}" --trace "$work/trace.jsonl" "$prompt" >/dev/null 2>"$work/run.log"
"$bin" serve -m "$model" --port 0 2>"$work/serve.log" & serve_pid=$!
until grep -q "on http://" "$work/serve.log"; do sleep 0.1; done
base="$(grep -o 'http://[0-9.:]*' "$work/serve.log" | head -1)"
python3 - "$base" "$work/trace.jsonl" "$model" "$gen" "$steps" "$block" "$prompt" >"$out" <<'PY'
import json, sys, time, urllib.request, platform, subprocess
base, trace, model, gen, steps, block, prompt = sys.argv[1:8]
lines = [json.loads(l) for l in open(trace)]
run_steps = [l["ms"] for l in lines if "step" in l]
body = dict(prompt=prompt, max_tokens=int(gen), steps=int(steps), block_length=int(block), temperature=0,
            early_stop=False, stream=True)
def stream():
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter(); times = []
    with urllib.request.urlopen(req) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: {") and '"diffusion"' in line:
                times.append((time.perf_counter() - t0) * 1e3)
    return times
stream()  # warm: the first request pays for page faults of the weights
times = stream()
intervals = [b - a for a, b in zip(times, times[1:])]
mean_run = sum(run_steps[1:]) / max(1, len(run_steps) - 1)
mean_srv = sum(intervals) / max(1, len(intervals))
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
print(f"# dllm serve against dllm run, one run; model {model}; {gen} tokens, {steps} steps, block {block}, temperature 0")
print(f"# machine: {cpu}; scripts/server-overhead.sh")
print(f"run: first step {run_steps[0]:.1f} ms, mean of the other steps {mean_run:.1f} ms")
print(f"serve: first step event {times[0]:.1f} ms after the request, mean interval between step events {mean_srv:.1f} ms")
print(f"overhead: first step {times[0] - run_steps[0]:+.1f} ms, per step {mean_srv - mean_run:+.1f} ms ({100*(mean_srv/mean_run-1):+.1f}%)")
PY
cat "$out"
