#!/usr/bin/env bash
# Process-to-process stability of a compiled model (issue 20, "stable speed"): PROCS fresh
# processes of each variant, pinned to core 1, alternating variants process by process, each
# timing RUNS runs after its warm-up; prints every process's median and, per variant, the
# spread of those medians (max/min) and the median of medians. Variants: the slab on
# transparent huge pages (the default) and on 4 KiB pages (TIR_HUGE_PAGES=0).
#
# Usage: bench/bimodal.sh [PROCS] [RUNS] [MODEL.tir...]   (default 12 processes, 30 runs,
# googlenet, resnet50, mobilenet_v2 and blazeface from examples/)
set -u
cd "$(dirname "$0")/.."
PROCS=${1:-12}; shift || true
RUNS=${1:-30}; shift || true
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-codegen}
cargo build --release -q || exit 1
TIRC=$CARGO_TARGET_DIR/release/tirc
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(examples/googlenet.tir examples/resnet50.tir examples/mobilenet_v2.tir examples/blazeface.tir)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"

# One process: prints its median ms and CPU ms per run.
one() {
  local res
  res=$(env TIR_HUGE_PAGES="$2" taskset -c 1 "$1" --bench "$RUNS" 2>&1)
  echo "$res" | sed -n 's/.*median \([0-9.]*\) ms.*cpu \([0-9.]*\) ms.*/\1 \2/p'
}

stats() { # the medians on stdin: "min median max max/min"
  sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.3f %.3f %.3f %.3f", v[1], m, v[NR], v[NR]/v[1]}'
}

printf '%-14s %-10s %8s %8s %8s %8s  %s\n' model slab_pages min_ms median max_ms max/min "per-process medians (ms)"
for m in "${MODELS[@]}"; do
  name=$(basename "$m" .tir)
  if ! "$TIRC" compile "$m" -o "$OUT/$name" 2>"$OUT/$name.err"; then
    echo "$name: not compiled: $(head -1 "$OUT/$name.err")"; continue
  fi
  : >"$OUT/huge"; : >"$OUT/small"
  for p in $(seq "$PROCS"); do
    if [ $((p % 2)) -eq 1 ]; then
      one "$OUT/$name" 1 | cut -d' ' -f1 >>"$OUT/huge"; one "$OUT/$name" 0 | cut -d' ' -f1 >>"$OUT/small"
    else
      one "$OUT/$name" 0 | cut -d' ' -f1 >>"$OUT/small"; one "$OUT/$name" 1 | cut -d' ' -f1 >>"$OUT/huge"
    fi
  done
  for v in huge small; do
    read -r lo med hi ratio <<<"$(stats <"$OUT/$v")"
    label=$([ "$v" = huge ] && echo "2MiB(THP)" || echo "4KiB")
    printf '%-14s %-10s %8s %8s %8s %8s  %s\n' "$name" "$label" "$lo" "$med" "$hi" "$ratio" "$(sort -g "$OUT/$v" | tr '\n' ' ')"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
