#!/usr/bin/env bash
# Process-to-process speed of one compiled model (issue 20, "stable speed"): PROCS fresh
# processes, pinned to core 1, each timing RUNS runs after its warm-up, alternating a normal
# process with one whose address-space layout is not randomised (`setarch -R`); prints every
# process's median and, for each kind, the spread of those medians (max/min). If the spread
# came from where ASLR puts code and data (branch-predictor or cache aliasing), the `setarch
# -R` processes, all laid out alike, would agree with each other.
#
# Usage: bench/bimodal.sh [PROCS] [RUNS] [MODEL.tir...]   (default 12 processes, 50 runs,
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

printf '%-14s %-6s %8s %8s %8s %8s  %s\n' model layout min_ms median max_ms max/min "per-process medians (ms)"
for m in "${MODELS[@]}"; do
  name=$(basename "$m" .tir)
  if ! "$TIRC" compile "$m" -o "$OUT/$name" 2>"$OUT/$name.err"; then
    echo "$name: not compiled: $(head -1 "$OUT/$name.err")"; continue
  fi
  : >"$OUT/aslr"; : >"$OUT/fixed"
  for p in $(seq "$PROCS"); do
    one "$OUT/$name" aslr >>"$OUT/aslr"; one "$OUT/$name" fixed >>"$OUT/fixed"
  done
  for v in aslr fixed; do
    sort -g "$OUT/$v" | awk -v n="$name" -v v="$v" '{x[NR]=$1; all=all $1 " "}
      END {m=(NR%2)?x[(NR+1)/2]:(x[NR/2]+x[NR/2+1])/2;
           printf "%-14s %-6s %8.3f %8.3f %8.3f %8.3f  %s\n", n, v, x[1], m, x[NR], x[NR]/x[1], all}'
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
