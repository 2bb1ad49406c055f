#!/usr/bin/env bash
# The peer benchmark in one command: tir's compiled executable next to onnxruntime, tract and
# IREE on torchvision models (random weights) and mediapipe's BlazeFace (trained), one table.
#
#   bash bench/onnx/peers.sh [--runs N] [--peers ort,tract,iree] [MODEL ...]
#
# Creates bench/.venv (onnxruntime, tract, IREE; pinned) and bench/.venv-export (torch,
# torchvision, tflite2onnx) on first use, exports the models into bench/onnx/models/ (not
# committed; regenerated when missing), builds tirc in release mode, then runs peers.py.
# Never part of CI: torch alone is several GB.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
python="${PYTHON:-python3}"

bash "$here/setup.sh" >&2
"$here/../.venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$here/requirements-peers.txt" >&2

export_venv="$here/../.venv-export"
if [ ! -x "$export_venv/bin/python" ]; then
    "$python" -m venv "$export_venv"
fi
if ! "$export_venv/bin/python" -c 'import torch, torchvision' 2>/dev/null; then
    # From the ordinary package index only (the project's machines reach no other): torch is
    # needed here to export the torchvision models, never by CI or `cargo test`.
    "$export_venv/bin/python" -m pip install --quiet --disable-pip-version-check torch \
        torchvision >&2
fi
"$export_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$here/requirements-export.txt" >&2
"$export_venv/bin/python" "$here/make_zoo.py" "$here/models" >&2

(cd "$root" && cargo build --release --quiet --bin tirc) >&2
exec "$here/../.venv/bin/python" "$here/peers.py" --tirc "$root/target/release/tirc" \
    --models "$here/models" "$@"
