#!/usr/bin/env bash
# Codegen benchmark (issue 6): per zoo model, compile time, slab bytes, binary size and
# single-thread latency (median and min of N runs of the linked executable), then the GEMM
# micro-kernel's GFLOP/s on 512x512x512 next to the machine's estimated peak.
#
# Usage: bench/codegen.sh [RUNS] [MODEL...]   (default: 20 runs, every examples/*.tir)
#
# With BASE=/path/to/an/older/tirc, every model is also compiled by that compiler and both
# executables are timed in the same run (interleaved, same core), adding base_ms (median)
# and speedup = base_ms / median_ms columns: before/after as a ratio on one loaded machine.
set -u
cd "$(dirname "$0")/.."
RUNS=${1:-20}; shift || true
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-codegen}
cargo build --release -q || exit 1
TIRC=$CARGO_TARGET_DIR/release/tirc
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(examples/*.tir)

BASE=${BASE:-}
printf '%-20s %10s %14s %12s %12s %12s' model compile_s slab_bytes binary_B median_ms min_ms
[ -n "$BASE" ] && printf ' %12s %8s' base_ms speedup
printf '\n'

for m in "${MODELS[@]}"; do
  name=$(basename "$m" .tir)
  t0=$(date +%s.%N)
  if ! "$TIRC" compile "$m" -o "$OUT/$name" 2>"$OUT/$name.err"; then
    printf '%-20s %s\n' "$name" "not compiled: $(grep -o 'no kernel for `[a-z_0-9]*`' "$OUT/$name.err" | head -1)"
    continue
  fi
  t1=$(date +%s.%N)
  base_ok=
  if [ -n "$BASE" ] && "$BASE" compile "$m" -o "$OUT/$name.base" 2>/dev/null; then base_ok=1; fi
  # Alternate new and base in rounds of RUNS/5 so load changes hit both alike.
  rounds=5; per=$(( (RUNS + rounds - 1) / rounds ))
  meds=(); mins=(); bmeds=()
  for _ in $(seq $rounds); do
    res=$(taskset -c 0 "$OUT/$name" --bench "$per" 2>&1)
    meds+=("$(echo "$res" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')")
    mins+=("$(echo "$res" | sed -n 's/.*min \([0-9.]*\) ms.*/\1/p')")
    if [ -n "$base_ok" ]; then
      bres=$(taskset -c 0 "$OUT/$name.base" --bench "$per" 2>&1)
      bmeds+=("$(echo "$bres" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')")
    fi
  done
  slab=$(echo "$res" | sed -n 's/^slab: \([0-9]*\) bytes/\1/p')
  med=$(printf '%s\n' "${meds[@]}" | sort -g | sed -n "$(( (rounds + 1) / 2 ))p")
  min=$(printf '%s\n' "${mins[@]}" | sort -g | head -1)
  printf '%-20s %10.2f %14s %12s %12s %12s' "$name" "$(echo "$t1 - $t0" | bc)" "$slab" \
    "$(stat -c %s "$OUT/$name")" "$med" "$min"
  if [ -n "$base_ok" ]; then
    bmed=$(printf '%s\n' "${bmeds[@]}" | sort -g | sed -n "$(( (rounds + 1) / 2 ))p")
    printf ' %12s %7.2fx' "$bmed" "$(echo "$bmed / $med" | bc -l)"
  elif [ -n "$BASE" ]; then
    printf ' %12s %8s' - -
  fi
  printf '\n'
done

# GEMM: C[512,512] = A[512,512] . B[512,512] (B a weight), one matmul op.
cat > "$OUT/gemm512.tir" <<'TIR'
module @gemm512 {
  func @main(%a: tensor<512x512xf32>) {
    %b = const {name = "b"} : tensor<512x512xf32>
    %c = matmul(%a, %b)
    return %c
  }
}
TIR
"$TIRC" compile "$OUT/gemm512.tir" -o "$OUT/gemm512" 2>/dev/null || exit 1
res=$(taskset -c 0 "$OUT/gemm512" --bench 50)
min=$(echo "$res" | sed -n 's/.*min \([0-9.]*\) ms.*/\1/p')
med=$(echo "$res" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
# Peak: f32 lanes per vector (16 with avx512f, 8 with avx2/fma) x 2 (an FMA is two flops)
# x FMA units per core (2 assumed: server Intel cores with AVX-512 have two 512-bit FMA
# ports; /proc/cpuinfo cannot tell) x the clock /proc/cpuinfo reports (no turbo assumed).
flags=$(grep -m1 '^flags' /proc/cpuinfo)
lanes=4; case "$flags" in *avx512f*) lanes=16;; *avx2*) lanes=8;; esac
fma=1; case "$flags" in *" fma "*) fma=2;; esac
mhz=$(grep -m1 'cpu MHz' /proc/cpuinfo | awk '{print $4}')
peak=$(echo "$lanes * 2 * $fma * $mhz / 1000" | bc -l)
gf_min=$(echo "2 * 512^3 / ($min / 1000) / 1000000000" | bc -l)
gf_med=$(echo "2 * 512^3 / ($med / 1000) / 1000000000" | bc -l)
printf '\nGEMM 512x512x512: median %s ms (%.1f GFLOP/s), min %s ms (%.1f GFLOP/s)\n' "$med" "$gf_med" "$min" "$gf_min"
printf 'peak estimate: %d lanes x 2 flops x %d FMA units x %s MHz = %.1f GFLOP/s; best run = %.0f%% of peak\n' \
  "$lanes" "$fma" "$mhz" "$peak" "$(echo "100 * $gf_min / $peak" | bc -l)"
