#!/usr/bin/env bash
# Issue 21's scale target: the whole `tirc plan --records FILE.csv --strategy greedy_by_size
# --offsets --json` process (CSV parsing, both lower bounds, planning, the checker, JSON
# writing) on the four record shapes of bench/records_shapes.py, at N records (default 1M).
# Pinned to CPU 1 (taskset -c 1), shapes interleaved round by round, median of ROUNDS (>= 3)
# rounds of CPU time (user + sys, /usr/bin/time) beside wall time, then slab / lower bound.
# With BEST=1 it also runs `--strategy best` once per shape (time limit BEST_TIMEOUT seconds).
#
#   bash bench/planner_scale.sh                # 1M records, 3 rounds
#   N=100000 ROUNDS=5 BEST=1 bash bench/planner_scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
n="${N:-1000000}"
rounds="${ROUNDS:-3}"
nice cargo build --release --bin tirc
tirc="$CARGO_TARGET_DIR/release/tirc"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
shapes=(chain uniform fan_out_bounded fan_out_growing)
for s in "${shapes[@]}"; do
  python3 bench/records_shapes.py "$s" "$n" "$work/$s.csv"
done

run() { # shape strategy round
  /usr/bin/time -f "%U %S %e" -o "$work/$1.$2.$3.time" \
    taskset -c 1 "$tirc" plan --records "$work/$1.csv" --strategy "$2" --offsets --json \
    > "$work/$1.$2.json"
}
for r in $(seq "$rounds"); do
  for s in "${shapes[@]}"; do
    run "$s" greedy_by_size "$r"
  done
done

summary() { # shape strategy rounds
  python3 - "$work" "$1" "$2" "$3" <<'PY'
import json, statistics, sys
work, shape, strategy, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
times = []
for r in range(1, rounds + 1):
    user, sys_, wall = map(float, open(f"{work}/{shape}.{strategy}.{r}.time").read().split()[-3:])
    times.append((user + sys_, wall))
cpu = statistics.median(t[0] for t in times)
wall = statistics.median(t[1] for t in times)
report = json.load(open(f"{work}/{shape}.{strategy}.json"))
row = report["offsets"][0]
bound = report["lower_bounds"]["offsets"]
winner = f" ({row['winner']})" if row.get("winner") else ""
print(f"{shape:<16} {strategy:<15} {len(report['records']):>9} {cpu:>9.2f} {wall:>9.2f} "
      f"{row['time_ms'] / 1e3:>9.2f} {row['total_size']:>12} {bound:>12} "
      f"{row['total_size'] / bound if bound else 1.0:>7.3f}{winner}")
PY
}
echo "median of $rounds rounds, pinned to CPU 1; cpu = user + sys of the whole process (s)"
printf '%-16s %-15s %9s %9s %9s %9s %12s %12s %7s\n' shape strategy records cpu wall plan slab bound ratio
for s in "${shapes[@]}"; do
  summary "$s" greedy_by_size "$rounds"
done
if [[ "${BEST:-0}" == 1 ]]; then
  for s in "${shapes[@]}"; do
    if timeout "${BEST_TIMEOUT:-600}" bash -c "$(declare -f run); tirc=$tirc work=$work run $s best 1"; then
      summary "$s" best 1
    else
      echo "$s best: did not finish in ${BEST_TIMEOUT:-600} s"
    fi
  done
fi
