#!/usr/bin/env bash
# Issue 8: operator orders and egg rewriting on every zoo model (release build), one table.
# Per model: the peak breadth (offsets lower bound, "lb") and the slab planned by the best
# offsets strategy (checked) for the input order, Kahn's order, the best of XLA's three
# heuristics (list, dfs, post_order), the exact search, and egg rewriting (judged with the
# exact scheduler); the exact and egg times; the slab ratios exact/kahn, exact/xla; and, in
# the last column, which budget stopped exact or egg, if any. The rewrite pass judges by the
# slab compile plans (with buffer sharing), so its columns are in that currency: exact.c is
# compile's slab of the input program in the exact order, egg compile's slab of the rewritten
# program, egg/e.c their ratio (below 1: rewriting lowered what compile gets).
# Extra arguments go to `tirc plan` (e.g. --time-limit 5 --states 5000).
# Details per model: `tirc plan MODEL --reorder=egg`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release --bin tirc
tirc="$CARGO_TARGET_DIR/release/tirc"
printf '%-18s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s %8s %8s %6s %6s %6s  %s\n' \
  model input.lb input kahn.lb kahn xla.lb xla exact.lb exact exact.c egg.lb egg exact.s egg.s e/kahn e/xla egg/e.c stopped
for f in examples/*.tir; do
  m=$(basename "$f" .tir)
  "$tirc" plan "$f" --reorder=egg "$@" 2>/dev/null | awk -v m="$m" '
    $1=="input"||$1=="kahn"||$1=="exact"||$1=="egg" { lb[$1]=$2; slab[$1]=$3; t[$1]=$5/1000 }
    $1=="exact" && /stopped by the/ { s=$0; sub(/.*stopped by the /,"",s); sub(/:.*/,"",s); stop = stop "exact:" s " " }
    $1=="egg" && /stopped by the time budget/ { stop = stop "egg:time" }
    $1=="egg" { r=$0; sub(/.*compile slab: reordered /,"",r); sub(/ .*/,"",r); ec=r }
    ($1=="list"||$1=="dfs"||$1=="post_order") && (xs=="" || $3+0 < xs+0) { xs=$3; xl=$2 }
    END {
      printf "%-18s %10d %10d %10d %10d %10d %10d %10d %10d %10d %10d %10d %8.2f %8.2f %6.3f %6.3f %6.3f  %s\n",
        m, lb["input"], slab["input"], lb["kahn"], slab["kahn"], xl, xs, lb["exact"], slab["exact"],
        ec, lb["egg"], slab["egg"], t["exact"], t["egg"], slab["exact"]/slab["kahn"], slab["exact"]/xs,
        slab["egg"]/ec, stop
    }'
done
