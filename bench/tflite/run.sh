#!/usr/bin/env bash
# TFLite conformance on trained models: the float .tflite files of the mediapipe 0.10.21 wheel
# (downloaded from the package index, not committed), each imported with `tirc import`, run with
# `tirc run` (the interpreter) and as the executable `tirc compile MODEL.tflite` makes, and
# compared with LiteRT (ai-edge-litert) on the same inputs (bench/tflite/compare.py says how).
#
#   bash bench/tflite/run.sh [--tirc PATH] [--subset] [--engines interp,exe] [MODEL ...]
#
# Without --tirc it builds a release tirc. `.ci/run` runs the --subset with the debug tirc.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/bench/.venv-tflite"
work="$root/bench/tflite/models"
tirc=""
args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --tirc) [[ $# -ge 2 ]] || { echo "run.sh: --tirc needs a path" >&2; exit 2; }; tirc=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/bench/tflite/requirements.txt"
mkdir -p "$work"
if [[ ! -d "$work/wheel" ]]; then
  "$venv/bin/pip" download --quiet --no-deps --dest "$work" mediapipe==0.10.21
  # Unpacked under a temporary name first, so an interrupted unpack is not taken for a whole one.
  rm -rf "$work/wheel.partial"
  "$venv/bin/python" -m zipfile -e "$work"/mediapipe-0.10.21-*.whl "$work/wheel.partial"
  mv "$work/wheel.partial" "$work/wheel"
fi
if [[ -z $tirc ]]; then
  (cd "$root" && cargo build --release --bin tirc)
  tirc="$root/target/release/tirc"
fi
exec "$venv/bin/python" "$root/bench/tflite/compare.py" --tirc "$tirc" --work "$work" "${args[@]}"
