#!/usr/bin/env bash
# Process-to-process speed of one compiled model (issue 20, "stable speed"): PROCS fresh
# processes, pinned to core 1, each timing RUNS runs after its warm-up, alternating a normal
# process with one whose address-space layout is not randomised (`setarch -R`); prints every
# process's median and, for each kind, the spread of those medians (max/min). If the spread
# came from where ASLR puts code and data (branch-predictor or cache aliasing), the `setarch
# -R` processes, all laid out alike, would agree with each other. A model given as `.onnx`
# also gets an onnxruntime control (`ort`): PROCS fresh Python processes, pinned to the same
# core, each the median of RUNS `InferenceSession.run` calls after 10 warm-up runs
# (`intra_op_num_threads=1`, bench/.venv as peers.sh makes it): if onnxruntime's processes
# spread as much as tir's, the spread is the machine's, not tir's code or layout.
#
# Usage: bench/bimodal.sh [PROCS] [RUNS] [MODEL.tir|MODEL.onnx...]   (default 12 processes, 50 runs,
# blazeface, mobilenet_v2 and resnet50 from examples/: weights of 0.4, 14 and 100 MB)
set -u
cd "$(dirname "$0")/.."
PROCS=${1:-12}; shift || true
RUNS=${1:-50}; shift || true
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-codegen}
cargo build --release -q || exit 1
TIRC=$CARGO_TARGET_DIR/release/tirc
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(examples/blazeface.tir examples/mobilenet_v2.tir examples/resnet50.tir)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# One process's median latency (ms); $2 = "aslr" or "fixed".
one() {
  local pre=()
  [ "$2" = fixed ] && pre=(setarch "$(uname -m)" -R)
  "${pre[@]}" taskset -c 1 "$1" --threads 1 --bench "$RUNS" 2>&1 |
    sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'
}

# One onnxruntime process's median latency (ms) on the model $1 (its input shape from the
# graph; symbolic dims as 1).
ort_one() {
  OPENBLAS_NUM_THREADS=1 taskset -c 1 bench/.venv/bin/python - "$1" "$RUNS" <<'PY'
import statistics, sys, time
import numpy as np, onnxruntime as ort
so = ort.SessionOptions()
so.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
feed = {i.name: np.random.default_rng(0).standard_normal(
    [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32) for i in s.get_inputs()}
for _ in range(10):
    s.run(None, feed)
ts = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter(); s.run(None, feed); ts.append(time.perf_counter() - t)
print(f"{statistics.median(ts) * 1e3:.3f}")
PY
}

printf '%-14s %-6s %8s %8s %8s %8s  %s\n' model layout min_ms median max_ms max/min "per-process medians (ms)"
for m in "${MODELS[@]}"; do
  name=$(basename "$(basename "$m" .tir)" .onnx)
  if ! "$TIRC" compile "$m" -o "$OUT/$name" 2>"$OUT/$name.err"; then
    echo "$name: not compiled: $(head -1 "$OUT/$name.err")"; continue
  fi
  kinds=(aslr fixed)
  if [[ $m == *.onnx ]]; then
    if [ -x bench/.venv/bin/python ]; then kinds+=(ort); else echo "$name: no bench/.venv, no onnxruntime control"; fi
  fi
  for v in "${kinds[@]}"; do : >"$OUT/$v"; done
  for p in $(seq "$PROCS"); do
    one "$OUT/$name" aslr >>"$OUT/aslr"; one "$OUT/$name" fixed >>"$OUT/fixed"
    [[ " ${kinds[*]} " == *" ort "* ]] && ort_one "$m" >>"$OUT/ort"
  done
  for v in "${kinds[@]}"; do
    sort -g "$OUT/$v" | awk -v n="$name" -v v="$v" '{x[NR]=$1; all=all $1 " "}
      END {m=(NR%2)?x[(NR+1)/2]:(x[NR/2]+x[NR/2+1])/2;
           printf "%-14s %-6s %8.3f %8.3f %8.3f %8.3f  %s\n", n, v, x[1], m, x[NR], x[NR]/x[1], all}'
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
