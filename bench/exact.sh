#!/usr/bin/env bash
# The `exact` offset strategy (issue 9) against the best heuristic: for each instance, the
# max-breadth bound, the best heuristic's slab, the exact search's slab (and its ratio to the
# heuristic's) and proven bound, whether it is proven optimal, the gap (best − bound) / bound,
# search nodes, wall-clock time of the search and CPU time of the whole call (on a shared
# machine the CPU time is the figure to compare with MiniMalloc's published 0.6–5.4 s).
# Instances: MiniMalloc's challenging suite A–K and all idealloc traces (align 1, as
# published; the large traces have one component of 18k–62k buffers, above the size the
# search takes on, and keep the heuristic plan), then every zoo model in examples/ (align 64,
# fixed operator order; records emitted by `tirc plan --emit-csv`). Every plan goes through
# the independent checker.
#
#   bench/exact.sh                # 60 s limit per benchmark instance, 1 s per zoo model
#   TIME_LIMIT=10 ZOO_TIME_LIMIT=1 bench/exact.sh
set -euo pipefail
cd "$(dirname "$0")/.."
time_limit=${TIME_LIMIT:-60}
zoo_limit=${ZOO_TIME_LIMIT:-1}
target=${CARGO_TARGET_DIR:-target}
cargo build --release -p tir-planner --example exact_table
cargo build --release --bin tirc
table="$target/release/examples/exact_table"
tirc="$target/release/tirc"
bench=../shared/benchmarks

echo "== public instances (align 1, time limit ${time_limit} s)"
"$table" --time-limit "$time_limit" \
  "$bench"/minimalloc-challenging/[A-K].1048576.csv \
  "$bench"/idealloc-traces/{G_1,resnet50,pangu_2.6B,S_1,Y_1}.csv

echo
echo "== zoo models (align 64, time limit ${zoo_limit} s)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in examples/*.tir; do
  "$tirc" plan "$f" --offsets --strategy best --emit-csv "$tmp/$(basename "$f" .tir).csv" >/dev/null
done
"$table" --time-limit "$zoo_limit" --align 64 "$tmp"/*.csv
