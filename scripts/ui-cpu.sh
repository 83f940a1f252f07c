#!/usr/bin/env bash
# The app's UI-thread CPU time, idle and while a run goes, in a real window under Xvfb with
# software GL: starts `BIN -m MODEL`, waits for the load, reads the main thread's utime+stime
# from /proc over 10 s, clicks Generate (at its place in the default 1200x820 window), waits
# 3 s and reads it over 10 s more. Needs Xvfb, xdotool and Mesa (Debian: xvfb xdotool
# libgl1-mesa-dri). Usage: scripts/ui-cpu.sh BIN MODEL [LABEL]
set -euo pipefail
BIN=$1 MODEL=$2 LABEL=${3:-$(basename "$BIN")}
export DISPLAY=:99
pgrep -x Xvfb >/dev/null || { Xvfb :99 -screen 0 1400x1000x24 >/dev/null 2>&1 & sleep 2; }
# Fresh app state, so that saved settings do not change the run.
XDG_CONFIG_HOME=$(mktemp -d) XDG_DATA_HOME=$(mktemp -d)
export XDG_CONFIG_HOME XDG_DATA_HOME LIBGL_ALWAYS_SOFTWARE=1
"$BIN" -m "$MODEL" >/dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
sleep 12
hz=$(getconf CLK_TCK)
ms() { awk -v hz="$hz" '{print int(($14 + $15) * 1000 / hz)}' "$1"; }
t0=$(ms /proc/$PID/task/$PID/stat); sleep 10; t1=$(ms /proc/$PID/task/$PID/stat)
echo "$LABEL idle:    UI thread $((t1 - t0)) ms of CPU in 10 s"
window=$(xdotool search --name dllm | head -1)
xdotool windowactivate --sync "$window" 2>/dev/null || true
xdotool mousemove --window "$window" 372 113 click 1
sleep 3
t0=$(ms /proc/$PID/task/$PID/stat); p0=$(ms /proc/$PID/stat); sleep 10
t1=$(ms /proc/$PID/task/$PID/stat); p1=$(ms /proc/$PID/stat)
echo "$LABEL running: UI thread $((t1 - t0)) ms of CPU in 10 s (whole process $((p1 - p0)) ms: the run is going)"
