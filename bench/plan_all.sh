#!/usr/bin/env bash
# Runs `tirc plan --strategy all` (release build) on every model in examples/ and every public
# benchmark instance in ../shared/benchmarks/, printing each table: footprints side by side as
# ratios to the lower bound, with planning times (gergov, the `best` heuristic and `exact`
# included).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release --bin tirc
tirc=$CARGO_TARGET_DIR/release/tirc
for f in examples/*.tir; do
  "$tirc" plan "$f"
  echo
done
for f in ../shared/benchmarks/*/*.csv; do
  "$tirc" plan --records "$f" --align 1
  echo
done
