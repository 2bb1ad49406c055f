#!/usr/bin/env bash
# Issue 8: operator orders on every zoo model (release build). For each model, `tirc plan
# --reorder` prints the ops, then per scheduler (input, kahn, list, dfs, post_order, exact) the
# peak breadth (offsets lower bound), the slab planned by the best offsets strategy (checked),
# its ratio to the input order's slab, the time, and whether exact proved its peak optimal
# or which budget stopped it. Extra arguments go to tirc (e.g. --time-limit 2 --states 5000).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release --bin tirc
tirc="$CARGO_TARGET_DIR/release/tirc"
for f in examples/*.tir; do
  "$tirc" plan "$f" --reorder "$@"
  echo
done
