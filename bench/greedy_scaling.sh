#!/usr/bin/env bash
# Issue 3's performance target: greedy_by_size offsets (paper Alg. 3, best fit) near n log n.
# 1. `examples/greedy_scaling`: 1k/10k/100k/1M x {chain, fan_out, random} (the planner bench's
#    record sets, align 64) and the idealloc traces (align 1), the planner's placement side by
#    side with the placement it replaced and with Alg. 3 as printed (quadratic; up to
#    TEXTBOOK_MAX records), as ratios; CPU time of the planning thread. Every plan is checked
#    and the peers' offsets must equal the new ones exactly (the script fails otherwise).
# 2. `tirc plan --records ... --strategy greedy_by_size --offsets` on the traces: the end-to-end
#    command (CSV parsing, bounds, checker, table) and the planning time it reports.
#
#   bench/greedy_scaling.sh                    # up to 1M records
#   MAX=100000 TEXTBOOK_MAX=100000 bench/greedy_scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -p tir-planner --example greedy_scaling
cargo build --release --bin tirc
traces=../shared/benchmarks/idealloc-traces
"$CARGO_TARGET_DIR/release/examples/greedy_scaling" --max "${MAX:-1000000}" \
  --textbook-max "${TEXTBOOK_MAX:-10000}" --runs "${RUNS:-3}" "$traces"/*.csv
echo
for f in "$traces"/*.csv; do
  echo "== tirc plan --records $f --strategy greedy_by_size --offsets --align 1"
  /usr/bin/time -f "wall %e s, user %U s, max RSS %M KiB" \
    "$CARGO_TARGET_DIR/release/tirc" plan --records "$f" --strategy greedy_by_size --offsets --align 1
done
