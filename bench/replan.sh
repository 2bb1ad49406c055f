#!/usr/bin/env bash
# Incremental re-planning against full re-planning (issue 21): `examples/replan` on the zoo's
# records (written by `tirc plan MODEL --emit-csv`), ../shared/benchmarks' traces and the four
# synthetic shapes at 100k records (bench/records_shapes.py), pinned to CPU 1.
#
#   bash bench/replan.sh                       # BENCHMARKS=DIR if not ../shared/benchmarks
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
nice cargo build --release -p tir-planner --example replan
nice cargo build --release --bin tirc
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
files=()
for m in examples/*.tir; do
  "$CARGO_TARGET_DIR/release/tirc" plan "$m" --strategy greedy_by_size --offsets \
    --emit-csv "$work/$(basename "$m" .tir).csv" > /dev/null
  files+=("$work/$(basename "$m" .tir).csv")
done
for s in chain uniform fan_out_bounded fan_out_growing; do
  python3 bench/records_shapes.py "$s" 100000 "$work/$s-100k.csv"
  files+=("$work/$s-100k.csv")
done
traces=()
benchmarks="${BENCHMARKS:-../shared/benchmarks}"
for f in "$benchmarks"/idealloc-traces/*.csv "$benchmarks"/minimalloc-challenging/*.csv; do
  [ -f "$f" ] && traces+=("$f")
done
taskset -c 1 "$CARGO_TARGET_DIR/release/examples/replan" "${files[@]}" "${traces[@]}"
