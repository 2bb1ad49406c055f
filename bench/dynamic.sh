#!/usr/bin/env bash
# A symbolic batch (issue 18): one executable compiled at batch 1 that runs every batch one
# sample at a time, against the executable compiled for that batch (`--dim batch=B`), side by
# side: median latency and CPU time per run, their ratio, and both slabs. The BERT layer of
# tests/dynamic/bert.tir (sequence length SEQ) and the CNN of tests/dynamic/batch.tir, pinned
# to CPU 1, one thread, ROUNDS interleaved rounds of RUNS runs each; medians over rounds.
#
#   bash bench/dynamic.sh            # TIRC=path/to/tirc ROUNDS=3 RUNS=50 SEQ=32 BATCHES="1 4 16"
#
# Then run-time dims: one executable of tests/dynamic/bert.tir compiled with batch and
# sequence length free (kernels with run-time extents, planned by the executable) against the
# static compile at each sequence length of SEQS (batch 1): median latency and CPU time, their
# ratio (goal <= 1.10), the run-time planning time for that new shape against the inference
# time (goal < 1%): the process's first plan ("plan", which also brings the planner into the
# caches) and the median of planning it again in the warm process ("replan", the planner alone in a loop),
# the median of planning a shape not seen before right after an inference, through the plan
# cache's lookup and replacement ("new", what a process serving shapes pays per new shape),
# and both slabs (goal: equal).
#
#   SEQS="8 16 32 64 128 256 512" bash bench/dynamic.sh
#
# The last column ("min") is the ratio of the medians over rounds of each run's fastest
# inference: on the shared machine a process's latencies often sit in one of two modes ~20%
# apart (other work on the core), and a round whose static run lands in the fast mode and
# whose dynamic run in the slow one gives a median ratio of ~1.2 that is not the code's.
#
# And CNNs with run-time image sizes: one executable of tests/dynamic/mobilenet_v2.tir
# (MobileNet v2 with H and W free) against the static compile at each square size of SIZES,
# the same columns.
#
#   SIZES="96 128 160 224" bash bench/dynamic.sh
#   PARTS=cnn bash bench/dynamic.sh   # only some parts: any of "batch bert cnn ocr" (ocr: below)
#
# The CNN part defaults to ROUNDS=7 and RUNS of about a second of the static executable per
# size (its own calibration; at least 50): MobileNet v2 at 96-224 takes 0.7-8 ms, and 3
# rounds of 50 runs left ratios that two quiet runs disagreed on by more than the margin.
set -euo pipefail
cd "$(dirname "$0")/.."
tirc="${TIRC:-target/release/tirc}"
if [ -z "${TIRC:-}" ]; then nice cargo build --release --bin tirc; fi
rounds="${ROUNDS:-3}"; runs="${RUNS:-50}"; seq="${SEQ:-32}"; batches="${BATCHES:-1 4 16}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

py() { python3 - "$@"; }
# npy FILE d0 d1 ...: a float32 .npy of that shape (values from a fixed rule).
npy() {
  py "$@" <<'PY'
import struct, sys
path, dims = sys.argv[1], [int(d) for d in sys.argv[2:]]
n = 1
for d in dims: n *= d
shape = "(" + "".join(f"{d}, " for d in dims).rstrip(" ") + ")"
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
pad = 64 - (10 + len(hdr) + 1) % 64
hdr = hdr + " " * (pad % 64) + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack(f"<{n}f", *[((i * 7) % 13 - 6) / 8 for i in range(n)]))
PY
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

parts=" ${PARTS:-batch bert cnn} "
part() { [[ "$parts" == *" $1 "* ]]; }

if part batch; then
printf '%-6s %5s %12s %12s %7s %12s %12s %7s %10s %10s\n' model batch "static ms" "dynamic ms" ratio \
  "static cpu" "dynamic cpu" ratio "static slab" "dyn slab"
for model in bert cnn; do
  if [ "$model" = bert ]; then src=tests/dynamic/bert.tir; pin=(--dim "seq=$seq"); else src=tests/dynamic/batch.tir; pin=(); fi
  "$tirc" compile "$src" -o "$work/$model-dyn" "${pin[@]}" > /dev/null 2>&1
  for b in $batches; do
    "$tirc" compile "$src" -o "$work/$model-$b" "${pin[@]}" --dim "batch=$b" > /dev/null 2>&1
    if [ "$model" = bert ]; then
      npy "$work/x.npy" "$b" "$seq" 64; npy "$work/m.npy" "$b" 1 "$seq"
      ins=(--input "x=$work/x.npy" --input "mask=$work/m.npy")
    else
      npy "$work/x.npy" "$b" 3 8 8; npy "$work/m.npy" "$b" 10
      ins=(--input "x=$work/x.npy" --input "bias=$work/m.npy")
    fi
    : > "$work/s"; : > "$work/d"
    for r in $(seq 1 "$rounds"); do
      for which in s d; do
        exe="$work/$model-$b"; [ "$which" = d ] && exe="$work/$model-dyn"
        taskset -c 1 "$exe" "${ins[@]}" --bench "$runs" --threads 1 > "$work/out"
        lat=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' "$work/out")
        cpu=$(sed -n 's/.*cpu \([0-9.]*\) ms per run.*/\1/p' "$work/out")
        slab=$(sed -n 's/^slab: \([0-9]*\) bytes/\1/p' "$work/out")
        echo "$lat $cpu $slab" >> "$work/$which"
      done
    done
    sl=$(cut -d' ' -f1 "$work/s" | median); dl=$(cut -d' ' -f1 "$work/d" | median)
    sc=$(cut -d' ' -f2 "$work/s" | median); dc=$(cut -d' ' -f2 "$work/d" | median)
    ss=$(cut -d' ' -f3 "$work/s" | head -1); ds=$(cut -d' ' -f3 "$work/d" | head -1)
    printf '%-6s %5s %12.3f %12.3f %7.3f %12.3f %12.3f %7.3f %10s %10s\n' "$model" "$b" "$sl" "$dl" \
      "$(echo "$dl / $sl" | bc -l)" "$sc" "$dc" "$(echo "$dc / $sc" | bc -l)" "$ss" "$ds"
  done
done
fi

# The run-time dims section's runner: `rt_row LABEL STATIC_EXE DYN_EXE INPUT_ARGS...` runs both
# executables ROUNDS times interleaved and prints one row of medians.
rt_row() {
  local label="$1" sexe="$2" dexe="$3"; shift 3
  : > "$work/s"; : > "$work/d"
  for r in $(seq 1 "$rounds"); do
    for which in s d; do
      exe="$sexe"; [ "$which" = d ] && exe="$dexe"
      taskset -c 1 "$exe" "$@" --bench "$runs" --threads 1 > "$work/out"
      lat=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' "$work/out")
      cpu=$(sed -n 's/.*cpu \([0-9.]*\) ms per run.*/\1/p' "$work/out")
      slab=$(sed -n 's/^slab: \([0-9]*\) bytes/\1/p' "$work/out")
      plan=$(sed -n 's/^plan: .* planned in \([0-9.]*\) us.*/\1/p' "$work/out")
      replan=$(sed -n 's/^re-plan over .* median \([0-9.]*\) us.*/\1/p' "$work/out")
      mn=$(sed -n 's/.*min \([0-9.]*\) ms.*/\1/p' "$work/out")
      news=$(sed -n 's/^new shape over .* median \([0-9.]*\) us.*/\1/p' "$work/out")
      echo "$lat $cpu $slab ${plan:-0} ${replan:-0} $mn ${news:-0}" >> "$work/$which"
    done
  done
  sl=$(cut -d' ' -f1 "$work/s" | median); dl=$(cut -d' ' -f1 "$work/d" | median)
  sc=$(cut -d' ' -f2 "$work/s" | median); dc=$(cut -d' ' -f2 "$work/d" | median)
  ss=$(cut -d' ' -f3 "$work/s" | head -1); ds=$(cut -d' ' -f3 "$work/d" | head -1)
  pu=$(cut -d' ' -f4 "$work/d" | median); ru=$(cut -d' ' -f5 "$work/d" | median)
  sm=$(cut -d' ' -f6 "$work/s" | median); dm=$(cut -d' ' -f6 "$work/d" | median)
  nu=$(cut -d' ' -f7 "$work/d" | median)
  printf '%-5s %12.3f %12.3f %7.3f %12.3f %12.3f %7.3f %9.2f %8.3f %9.3f %8.3f %9.3f %8.3f %10s %10s %7.3f\n' "$label" "$sl" "$dl" \
    "$(echo "$dl / $sl" | bc -l)" "$sc" "$dc" "$(echo "$dc / $sc" | bc -l)" "$pu" \
    "$(echo "100 * $pu / 1000 / $dl" | bc -l)" "$ru" "$(echo "100 * $ru / 1000 / $dl" | bc -l)" \
    "$nu" "$(echo "100 * $nu / 1000 / $dl" | bc -l)" "$ss" "$ds" "$(echo "$dm / $sm" | bc -l)"
}
rt_header() {
  printf '%-5s %12s %12s %7s %12s %12s %7s %9s %8s %9s %8s %9s %8s %10s %10s %7s\n' "$1" "static ms" "dynamic ms" ratio \
    "static cpu" "dynamic cpu" ratio "plan us" "plan %" "replan us" "replan %" "new us" "new %" "static slab" "dyn slab" "min"
}

if part bert; then
echo
rt_header seq
"$tirc" compile tests/dynamic/bert.tir -o "$work/bert-rt" > /dev/null 2>&1
for s in ${SEQS:-8 16 32 64 128 256 512}; do
  "$tirc" compile tests/dynamic/bert.tir -o "$work/bert-s$s" --dim batch=1 --dim "seq=$s" > /dev/null 2>&1
  npy "$work/x.npy" 1 "$s" 64; npy "$work/m.npy" 1 1 "$s"
  rt_row "$s" "$work/bert-s$s" "$work/bert-rt" --input "x=$work/x.npy" --input "mask=$work/m.npy"
done
fi

if part cnn; then
  echo
  echo "MobileNet v2 (tests/dynamic/mobilenet_v2.tir), size = H = W"
  rt_header size
  # More rounds and runs than the other parts: a 0.7-8 ms inference over 3 rounds of 50 runs
  # gave ratios that two quiet runs disagreed on by more than the goal's margin. ROUNDS
  # defaults to 7 here and RUNS to as many runs as take about a second of the static
  # executable at that size (from a 10-run calibration), at least 50.
  rounds="${ROUNDS:-7}"
  "$tirc" compile tests/dynamic/mobilenet_v2.tir -o "$work/cnn-rt" > /dev/null 2>&1
  for z in ${SIZES:-96 128 160 224}; do
    "$tirc" compile tests/dynamic/mobilenet_v2.tir -o "$work/cnn-s$z" --dim "h=$z" --dim "w=$z" > /dev/null 2>&1
    npy "$work/x.npy" 1 3 "$z" "$z"
    if [ -n "${RUNS:-}" ]; then runs="$RUNS"; else
      ms=$(taskset -c 1 "$work/cnn-s$z" --input "input=$work/x.npy" --bench 10 --threads 1 \
        | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
      runs=$(echo "r = 1000 / $ms; if (r < 50) r = 50; scale = 0; r / 1" | bc -l)
    fi
    rt_row "$z" "$work/cnn-s$z" "$work/cnn-rt" --input "input=$work/x.npy"
  done
fi

# PP-OCRv4's text recogniser (trained; rapidocr's wheel through bench/onnx/fetch_trained.py),
# imported with every dim free (batch, height, width: its reshape targets are written in the
# dims) and compiled once, against the static compile at batch 1, height 48 and each width of
# WIDTHS. Only with PARTS naming `ocr` (the first run downloads the wheel).
#
#   PARTS=ocr WIDTHS="160 320 640" bash bench/dynamic.sh
if part ocr; then
  rounds="${ROUNDS:-5}"; runs="${RUNS:-30}"
  rec=bench/onnx/trained/ppocrv4_rec.onnx
  if [ ! -f "$rec" ]; then
    bash bench/onnx/setup.sh >&2
    bench/.venv/bin/python bench/onnx/fetch_trained.py bench/onnx/trained >&2
  fi
  "$tirc" import "$rec" -o "$work/rec.tir" --weights "$work/rec.safetensors" > /dev/null
  "$tirc" compile "$work/rec.tir" --weights "$work/rec.safetensors" -o "$work/ocr-rt" > /dev/null 2>&1
  echo
  echo "PP-OCRv4 text recogniser (bench/onnx/trained/ppocrv4_rec.onnx), batch 1, height 48"
  rt_header width
  for wd in ${WIDTHS:-160 320 640}; do
    "$tirc" compile "$work/rec.tir" --weights "$work/rec.safetensors" -o "$work/ocr-w$wd" \
      --dim p2o.DynamicDimension.0=1 --dim x.d2=48 --dim "p2o.DynamicDimension.1=$wd" > /dev/null 2>&1
    npy "$work/x.npy" 1 3 48 "$wd"
    rt_row "$wd" "$work/ocr-w$wd" "$work/ocr-rt" --input "x=$work/x.npy"
  done
fi
