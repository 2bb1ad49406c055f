#!/usr/bin/env bash
# Builds the fuzz targets and runs each for SECONDS (default 60; 0 replays the corpus only),
# FUZZ_JOBS of them at a time (default: the available cores):
#
#   fuzz/run.sh [SECONDS] [TARGET...]        (all five targets when none is named)
#
# Used by `.ci/run` (a bounded smoke run) and by hand for long runs (docs/fuzzing.md). It needs
# only stable Rust and a C++ compiler: the targets are built with plain cargo and the
# SanitizerCoverage flags cargo-fuzz uses (no sanitizer, so no `-Z` flag and no nightly), and
# libfuzzer-sys compiles libFuzzer itself. Inputs the fuzzer finds go to fuzz/work/corpus/TARGET
# (not committed), the committed seeds in fuzz/corpus/TARGET and the saved crashers in
# fuzz/regressions/TARGET are read first, so every run replays them. A crash, a timeout or an
# out-of-memory stops the target, leaves the input in fuzz/artifacts/TARGET/ and makes the
# script exit 1 after the other targets ran.
#
# Environment: FUZZ_SEED (libFuzzer's -seed), FUZZ_ARGS (more libFuzzer flags, e.g. "-jobs=2"),
# FUZZ_NO_BUILD=1 (reuse the binaries built last).
set -euo pipefail
cd "$(dirname "$0")"

ALL_TARGETS=(tir_parse_verify csv_records onnx_import npy_read safetensors_weights)
seconds=${1:-60}
shift || true
if ! [[ $seconds =~ ^[0-9]+$ ]]; then
    echo "usage: fuzz/run.sh [SECONDS] [TARGET...]; targets: ${ALL_TARGETS[*]}" >&2
    exit 2
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
    [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || {
        echo "fuzz/run.sh: unknown target \`$t\`; targets: ${ALL_TARGETS[*]}" >&2
        exit 2
    }
done

# The largest input each target mutates: room for the seeds, small enough to stay fast.
max_len() {
    case $1 in
        tir_parse_verify) echo 16384 ;;
        onnx_import) echo 8192 ;;
        *) echo 4096 ;;
    esac
}

host=$(rustc -vV | sed -n 's/^host: //p')
bin_dir="${CARGO_TARGET_DIR:-target}/$host/release"
if [[ ${FUZZ_NO_BUILD:-} != 1 ]]; then
    # An explicit --target keeps these flags off build scripts and proc macros, as cargo-fuzz does.
    RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares ${RUSTFLAGS:-}" \
        cargo build --release --locked --target "$host" --bins
fi

# One target's run: its summary line goes to artifacts/TARGET/summary, "FAILED" in it when the
# fuzzer stopped on a crash, a timeout or an out-of-memory.
fuzz_one() {
    local t=$1 log="artifacts/$1/last-run.log" status=0 budget args execs cov line
    mkdir -p "work/corpus/$t" "artifacts/$t" "corpus/$t" "regressions/$t"
    # 0 seconds: replay the corpus and the regressions only (libFuzzer reads 0 as "no limit").
    if [[ $seconds -eq 0 ]]; then budget=(-runs=0); else budget=(-max_total_time="$seconds"); fi
    args=(
        "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")"
        -print_final_stats=1 -artifact_prefix="artifacts/$t/"
    )
    [[ -f "dict/$t.dict" ]] && args+=(-dict="dict/$t.dict")
    [[ -n ${FUZZ_SEED:-} ]] && args+=(-seed="$FUZZ_SEED")
    # shellcheck disable=SC2206
    [[ -n ${FUZZ_ARGS:-} ]] && args+=($FUZZ_ARGS)
    "$bin_dir/$t" "${args[@]}" "work/corpus/$t" "corpus/$t" "regressions/$t" >"$log" 2>&1 || status=$?
    stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
    # -fork mode prints no final stats: its progress lines `#N: cov: ...` carry the count.
    execs=$(stat number_of_executed_units)
    [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+(/[0-9]+[a-zA-Z]*)?' "$log" | tail -1 || true)
    line="$t: ${execs:-no} executions in ${seconds}s, ${cov:-no coverage line}"
    [[ $status -eq 0 ]] || line="$line, FAILED (exit $status; log $PWD/$log)"
    echo "$line" >"artifacts/$t/summary"
}

# FUZZ_JOBS targets at a time (default: the cores this process may run on), each a single
# libFuzzer process: the same fuzzing per target in a fraction of the wall time.
jobs=${FUZZ_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz/run.sh: FUZZ_JOBS must be a positive count" >&2; exit 2; }
running=0
for t in "${targets[@]}"; do
    echo "== fuzz $t: ${seconds}s"
    rm -f "artifacts/$t/summary"
    fuzz_one "$t" &
    running=$((running + 1))
    if [[ $running -ge $jobs ]]; then wait -n || true; running=$((running - 1)); fi
done
wait

failed=()
summary=()
for t in "${targets[@]}"; do
    line=$(cat "artifacts/$t/summary" 2>/dev/null || echo "$t: no summary, FAILED")
    if [[ $line == *FAILED* ]]; then
        tail -n 60 "artifacts/$t/last-run.log" 2>/dev/null || true
        failed+=("$t")
    fi
    summary+=("$line")
done

echo "== fuzz summary"
printf '%s\n' "${summary[@]}"
echo "fuzz: $((${#targets[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz/run.sh: ${failed[*]} found a crash, a timeout or an out-of-memory; the input is in fuzz/artifacts/TARGET/" >&2
    echo "reproduce with: $bin_dir/TARGET fuzz/artifacts/TARGET/crash-..." >&2
    exit 1
fi
