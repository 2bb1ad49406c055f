#!/usr/bin/env bash
# TFLite conformance on real models: the float .tflite files of the mediapipe 0.10.21 wheel
# (downloaded from the package index, not committed), each imported with `tirc import` and run
# with `tirc run` (the interpreter), compared with LiteRT (ai-edge-litert) on the same random
# inputs: max |tir - litert| / max |litert| <= 1e-4. Prints which models import and which are
# refused and why. Not in CI. Usage: bash bench/tflite/run.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/bench/.venv-tflite"
work="$root/bench/tflite/models"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet ai-edge-litert numpy
fi
mkdir -p "$work"
if [ ! -d "$work/wheel" ]; then
  "$venv/bin/pip" download --quiet --no-deps --dest "$work" mediapipe==0.10.21
  "$venv/bin/python" -m zipfile -e "$work"/mediapipe-0.10.21-*.whl "$work/wheel"
fi
(cd "$root" && cargo build --release --bin tirc)
exec "$venv/bin/python" "$root/bench/tflite/compare.py" "$root/target/release/tirc" "$work"
