#!/usr/bin/env bash
# The zoo's ONNX models beside LiteRT (issue 22, "on the converted zoo models"): each
# bench/onnx/models/NAME.onnx converted to a float32 .tflite by onnx2tf (bench/tflite/
# onnx_to_tflite.py, in bench/.venv-tflite-zoo), then through tir's compiled executable against
# LiteRT on the same input (compare.py, <= 1e-4) and timed beside it (peers.py: pinned,
# interleaved rounds, 1 and 2 threads, peak RSS, slab / bound).
#
#   bash bench/tflite/zoo.sh [--tirc PATH] [--runs N] [MODEL ...]   # default: every model there
#
# bench/onnx/models/ is made by `bash bench/onnx/peers.sh --torchvision` (torchvision
# architectures with random weights, exported by torch: several GB, never in CI); the
# converted models go to bench/tflite/zoo/wheel/zoo/ (never committed). Take the figures on a
# quiet machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tirc="$root/target/release/tirc"
runs=30
models=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --tirc) tirc="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -*) echo "zoo.sh: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
if [[ ${#models[@]} -eq 0 ]]; then
  for f in "$root"/bench/onnx/models/*.onnx; do
    [[ -f $f ]] && models+=("$(basename "$f" .onnx)")
  done
fi
if [[ ${#models[@]} -eq 0 ]]; then
  echo "zoo.sh: no models in bench/onnx/models (bash bench/onnx/peers.sh --torchvision makes them)" >&2
  exit 1
fi
venv="$root/bench/.venv-tflite-zoo"
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/bench/tflite/requirements-zoo.txt"
if [[ ! -x $tirc ]]; then
  (cd "$root" && cargo build --release --bin tirc)
fi
work="$root/bench/tflite/zoo"
mkdir -p "$work/wheel/zoo"
for m in "${models[@]}"; do
  src="$root/bench/onnx/models/$m.onnx"
  [[ -f $src ]] || { echo "zoo.sh: $src not found" >&2; exit 1; }
  out="$work/wheel/zoo/$m.tflite"
  [[ -f $out ]] || "$venv/bin/python" "$root/bench/tflite/onnx_to_tflite.py" "$src" "$out" > "$work/$m.convert.log" 2>&1 \
    || { echo "zoo.sh: converting $m failed, see $work/$m.convert.log" >&2; exit 1; }
done
"$venv/bin/python" "$root/bench/tflite/compare.py" --tirc "$tirc" --work "$work" --engines exe "${models[@]}"
"$venv/bin/python" "$root/bench/tflite/peers.py" --tirc "$tirc" --work "$work" --rounds 3 --runs "$runs" \
  --threads 1,2 "${models[@]}"
