#!/usr/bin/env bash
# Thread scaling (issue 20): each model's executable at --threads 1 and --threads 2, both
# pinned to cores 0 and 1, alternating within every round (the order flips each round) so that
# load from other processes hits both alike. Per round: the median latency of RUNS runs and
# the process's CPU time (user + system) of each, and the speedup t1/t2; then the median
# speedup over the rounds. CPU time beside wall time shows load: a run whose CPU time is far
# below threads x wall time was waiting for a core.
#
# Usage: bench/threads.sh [ROUNDS] [MODEL...]   (default: 5 rounds, mobilenet_v2 and resnet50)
# RUNS=N sets the runs per measurement (default 100: with 20, a 2-thread process is still
# settling, docs/codegen.md "Threads").
set -u
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}; shift || true
RUNS=${RUNS:-100}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-codegen}
cargo build --release -q || exit 1
TIRC=$CARGO_TARGET_DIR/release/tirc
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(examples/mobilenet_v2.tir examples/resnet50.tir)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# One measurement: prints "median_ms cpu_s" for `--threads $2` of executable $1.
measure() {
  local res
  res=$( { /usr/bin/time -f 'cpu %U %S' taskset -c 0,1 "$1" --threads "$2" --bench "$RUNS"; } 2>&1)
  local med cpu
  med=$(echo "$res" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
  cpu=$(echo "$res" | awk '/^cpu /{printf "%.2f", $2 + $3}')
  echo "$med $cpu"
}

printf '%-16s %5s %10s %8s %10s %8s %8s\n' model round t1_ms t1_cpu_s t2_ms t2_cpu_s speedup
for m in "${MODELS[@]}"; do
  name=$(basename "$m" .tir)
  if ! "$TIRC" compile "$m" -o "$OUT/$name" 2>"$OUT/$name.err"; then
    echo "$name: not compiled: $(head -1 "$OUT/$name.err")"; continue
  fi
  ups=()
  for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then
      a=$(measure "$OUT/$name" 1); b=$(measure "$OUT/$name" 2)
    else
      b=$(measure "$OUT/$name" 2); a=$(measure "$OUT/$name" 1)
    fi
    read -r t1 c1 <<<"$a"; read -r t2 c2 <<<"$b"
    up=$(echo "$t1 / $t2" | bc -l)
    ups+=("$up")
    printf '%-16s %5d %10s %8s %10s %8s %7.2fx\n' "$name" "$r" "$t1" "$c1" "$t2" "$c2" "$up"
  done
  med=$(printf '%s\n' "${ups[@]}" | sort -g | sed -n "$(( (ROUNDS + 1) / 2 ))p")
  printf '%-16s %5s %10s %8s %10s %8s %7.2fx\n' "$name" median - - - - "$med"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
