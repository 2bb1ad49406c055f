#!/usr/bin/env bash
# Issue 8: operator orders and egg rewriting on every zoo model (release build), one table.
# Two currencies, never mixed in one ratio:
# - without buffer sharing (what the order rows of `tirc plan --reorder` plan): the peak
#   breadth (offsets lower bound, ".lb") and the slab of the best offsets strategy (checked)
#   for the input order, Kahn's order, the best of XLA's three heuristics (list, dfs,
#   post_order), the exact search; e/kahn and e/xla are the exact slab over Kahn's and XLA's;
# - compile's slab (".c": `rewrite::compile_slab` with every offsets strategy, with views,
#   in-place element-wise ops and concat sharing, exactly as `tirc compile` plans): the
#   unrewritten program in Kahn's order, in the best XLA order, in the best order known (the
#   smallest of every row's order and the order the rewrite pass's own exact search judged,
#   which the pass plans with its judge's fast strategies, an upper bound; the pass starts
#   from the row order compile plans smallest), and egg, the program the pass kept, in its
#   order. egg/k.c, egg/x.c and egg/e.c are egg's compile slab over those three: below 1 on
#   egg/e.c, rewriting lowered what compile gets beyond the best order of the unrewritten
#   program.
# Then the exact and egg times (s) and, in the last column, which budget stopped exact or egg.
# Extra arguments go to `tirc plan` (e.g. --time-limit 5 --states 5000).
# Details per model: `tirc plan MODEL --reorder=egg`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release --bin tirc
tirc="$CARGO_TARGET_DIR/release/tirc"
printf '%-18s %9s %9s %9s %9s %9s %9s %9s %9s %6s %6s | %9s %9s %9s %9s %9s %6s %6s %6s | %6s %6s  %s\n' \
  model input.lb input kahn.lb kahn xla.lb xla exact.lb exact e/kahn e/xla \
  kahn.c xla.c exact.c egg.lb egg.c egg/k.c egg/x.c egg/e.c exact.s egg.s stopped
for f in examples/*.tir; do
  m=$(basename "$f" .tir)
  "$tirc" plan "$f" --reorder=egg "$@" 2>/dev/null | awk -v m="$m" '
    $1=="input"||$1=="kahn"||$1=="exact"||$1=="egg" { lb[$1]=$2; slab[$1]=$3; t[$1]=$5/1000 }
    $1=="exact" && /stopped by the/ { s=$0; sub(/.*stopped by the /,"",s); sub(/:.*/,"",s); stop = stop "exact:" s " " }
    $1=="egg" && /stopped by the time budget/ { stop = stop "egg:time" }
    $1=="egg" { r=$0; sub(/.*compile slab: reordered /,"",r); sub(/ .*/,"",r); reordered=r }
    $1=="egg" { p=$0; sub(/.*, planned /,"",p); sub(/;.*/,"",p); planned=p }
    ($1=="list"||$1=="dfs"||$1=="post_order") && (xs=="" || $3+0 < xs+0) { xs=$3; xl=$2 }
    $1=="compile" { for (i = 5; i < NF; i += 2) c[$i] = $(i+1) }
    END {
      xc = c["list"]; if (c["dfs"]+0 < xc+0) xc = c["dfs"]; if (c["post_order"]+0 < xc+0) xc = c["post_order"]
      ec = reordered; for (k in c) if (c[k]+0 < ec+0) ec = c[k]
      printf "%-18s %9d %9d %9d %9d %9d %9d %9d %9d %6.3f %6.3f | %9d %9d %9d %9d %9d %6.3f %6.3f %6.3f | %6.2f %6.2f  %s\n",
        m, lb["input"], slab["input"], lb["kahn"], slab["kahn"], xl, xs, lb["exact"], slab["exact"],
        slab["exact"]/slab["kahn"], slab["exact"]/xs,
        c["kahn"], xc, ec, lb["egg"], planned, planned/c["kahn"], planned/xc, planned/ec,
        t["exact"], t["egg"], stop
    }'
done
