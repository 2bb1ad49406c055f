#!/usr/bin/env bash
# Slab per zoo model (strategy `best`, alignment 64) without and with buffer sharing, beside
# the offsets lower bound (max breadth) of the unshared records, from `tirc opt --stats`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin tirc >&2
tirc=target/release/tirc
stat() { # file pipeline key
  "$tirc" opt "$1" --passes "$2" --stats 2>&1 >/dev/null | grep '^plan' | tr ',' '\n' | sed -n "s/.*$3 = //p"
}
printf '%-20s %14s %14s %14s %9s  %s\n' model lower_bound no_sharing sharing ratio "sharing used"
for f in examples/*.tir; do
  m=$(basename "$f" .tir)
  lb=$(stat "$f" 'plan{strategy=best},bufferize' 'lower bound bytes')
  a=$(stat "$f" 'plan{strategy=best},bufferize' 'slab bytes')
  b=$(stat "$f" 'plan{strategy=best,sharing=true},bufferize' 'slab bytes')
  v=$(stat "$f" 'plan{strategy=best,sharing=true},bufferize' 'sharing')
  printf '%-20s %14s %14s %14s %9.3f  %s\n' "$m" "$lb" "$a" "$b" "$(echo "$b / $a" | bc -l)" "$v"
done
