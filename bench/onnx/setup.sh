#!/usr/bin/env bash
# Creates bench/.venv (gitignored) and installs the pinned Python packages of the ONNX
# conformance suite into it. Idempotent: rerunning only installs what is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/../.venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
echo "bench/.venv ready: $("$venv/bin/python" -c 'import onnx, onnxruntime, numpy; print("onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__)')"
