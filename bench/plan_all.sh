#!/usr/bin/env bash
# Runs `tirc plan --strategy all` (release build) on every model in examples/ and every public
# benchmark instance in ../shared/benchmarks/, printing each table: footprints side by side as
# ratios to the lower bound, with planning times.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin tirc
tirc=target/release/tirc
for f in examples/*.tir; do
  "$tirc" plan "$f"
  echo
done
for f in ../shared/benchmarks/*/*.csv; do
  "$tirc" plan --records "$f" --align 1
  echo
done
