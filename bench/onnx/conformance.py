"""ONNX conformance: every model of make_models.py through `tirc import` and `tirc run`
(the reference interpreter), compared with onnxruntime on the same seeded inputs.

    bash bench/onnx/setup.sh                       # once: bench/.venv with the pinned packages
    bench/.venv/bin/python bench/onnx/conformance.py [--tirc PATH] [--keep DIR] [--tol 1e-4]

The error of an output is max|tir - ort| / max(max|ort|, 1e-6): the largest deviation
relative to the output's scale. A model passes when every output's error is <= --tol.
Prints one row per model and a closing `N passed, N failed` line; exits 1 on any failure.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import make_models  # noqa: E402


def find_tirc(explicit):
    if explicit:
        return explicit
    subprocess.run(["cargo", "build", "--quiet", "--bin", "tirc"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "debug" / "tirc")


def has_run(tirc):
    r = subprocess.run([tirc, "run", "--help"], capture_output=True, text=True)
    return r.returncode == 0


def tir_signature(tir_text):
    """Parameter names and returned value names of @main, in order."""
    params = re.search(r"func @main\((.*?)\)\s*(->|\{)", tir_text, re.S).group(1)
    names = re.findall(r"%([A-Za-z0-9_.$]+):", params)
    ret = re.search(r"^\s*return\s*(.*)$", tir_text, re.M).group(1)
    returns = re.findall(r"%([A-Za-z0-9_.$]+)", ret)
    return names, returns


def run_model(tirc, path, work, tol):
    name = path.stem
    m = onnx.load(path)
    tir = work / f"{name}.tir"
    st = work / f"{name}.safetensors"
    r = subprocess.run([tirc, "import", str(path), "-o", str(tir), "--weights", str(st)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"import failed: {r.stderr.strip()}"
    params, returns = tir_signature(tir.read_text())

    rng = np.random.default_rng(0)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {}
    args = [tirc, "run", str(tir)]
    if st.exists():
        args += ["--weights", str(st)]
    for i, arg in enumerate(sess.get_inputs()):
        shape = [d if isinstance(d, int) else 1 for d in arg.shape]
        x = rng.standard_normal(shape).astype(np.float32)
        feeds[arg.name] = x
        f = work / f"{name}.in{i}.npy"
        np.save(f, x)
        args += ["--input", f"{params[i]}={f}"]
    expected = sess.run(None, feeds)
    out_dir = work / f"{name}.out"
    out_dir.mkdir(exist_ok=True)
    args += ["--output", str(out_dir)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"run failed: {r.stderr.strip()}"
    worst = 0.0
    seen = {}
    for k, (ret, want) in enumerate(zip(returns, expected)):
        # tirc run names a repeated value NAME.i.npy
        n = seen.get(ret, 0)
        seen[ret] = n + 1
        f = out_dir / (f"{ret}.npy" if n == 0 else f"{ret}.{k}.npy")
        if not f.exists():
            f = out_dir / f"{ret}.{k}.npy"
        got = np.load(f)
        if got.shape != want.shape:
            return None, f"output {k} has shape {got.shape}, onnxruntime {want.shape}"
        scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
        err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0
        worst = max(worst, err)
    return worst, None if worst <= tol else f"error {worst:.3g} > {tol:g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tirc", help="the tirc binary (default: cargo build, target/debug/tirc)")
    ap.add_argument("--keep", help="write models, .tir files and outputs here instead of a temp dir")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("models", nargs="*", help="only these models (default: all)")
    a = ap.parse_args()

    tirc = find_tirc(a.tirc)
    if not has_run(tirc):
        print("tirc run not available: this tirc has no reference interpreter (`tirc run`); "
              "conformance cannot compare outputs")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep) if a.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        passed = failed = 0
        print(f"{'model':<36} {'max rel err':>12}  result")
        for m in make_models.models():
            if a.models and m.graph.name not in a.models:
                continue
            path = work / f"{m.graph.name}.onnx"
            onnx.save(m, path)
            err, problem = run_model(tirc, path, work, a.tol)
            shown = "-" if err is None else f"{err:.2e}"
            print(f"{m.graph.name:<36} {shown:>12}  {'ok' if problem is None else 'FAIL: ' + problem}")
            if problem is None:
                passed += 1
            else:
                failed += 1
        print(f"{passed} passed, {failed} failed")
        return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
