#!/usr/bin/env bash
# One command for the ONNX conformance suite: venv with the pinned packages, then every small
# model through `tirc import` + `tirc run`, compared with onnxruntime (max rel error <= 1e-4).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup.sh" >&2
exec "$here/../.venv/bin/python" "$here/conformance.py" "$@"
