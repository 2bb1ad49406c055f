#!/usr/bin/env bash
# Builds and installs the Python package exactly as a user would (`pip install ./planner/python`:
# maturin and pyo3 from the ordinary package indexes) into planner/python/.venv (gitignored),
# then runs its pytest tests. Idempotent; rerunning rebuilds only what changed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
"${pip[@]}" install -r "$here/requirements-test.txt"
"${pip[@]}" install --force-reinstall --no-deps "$here"
# From the tests directory, so that `import tir_planner` finds the installed package, not the
# source tree (which lacks the compiled extension).
cd "$here/tests"
exec "$venv/bin/python" -m pytest -q "$@"
