#!/usr/bin/env bash
# The ONNX backend node tests (the suite inside the pinned onnx package) through tir: creates
# bench/.venv with the pinned packages, then runs bench/onnx/backend.py with the given arguments.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$here/setup.sh" >&2
exec "$here/../.venv/bin/python" "$here/backend.py" "$@"
