"""ONNX conformance: every model of make_models.py run by tir twice -- `tirc import` +
`tirc run` (the reference interpreter) and `tirc compile MODEL.onnx` (the native executable,
weights taken from the model) -- and compared with onnxruntime on the same seeded inputs.

    bash bench/onnx/run.sh [ARGS]                  # creates bench/.venv, then runs this script
    bench/.venv/bin/python bench/onnx/conformance.py [--tirc PATH] [--keep DIR] [--tol 1e-4]
        [--engines interp,exe] [MODEL ...]

The error of an output is max|tir - ort| / max(max|ort|, 1e-6): the largest deviation
relative to the output's scale. A model passes when every output's error, on every engine,
is <= --tol. Prints one row per model and a closing `N passed, N failed` line; exits 1 on
any failure.
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


# Models whose executable cannot be built yet because codegen lacks a kernel (or bufferize a
# case) the interpreter has: their `exe` column says `pending` and the interpreter still checks
# them. An entry that compiles after all is compared like any other model (and must pass), and
# the run says so, so the list only shrinks.
EXE_PENDING = {}


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


def compare(returns, expected, out_dir, repeated):
    """The worst relative error over the outputs, or a message when an output is missing or
    misshapen. `repeated(name, k)` names the file of a value returned twice."""
    worst = 0.0
    for k, (ret, want) in enumerate(zip(returns, expected)):
        f = out_dir / (f"{ret}.npy" if ret not in returns[:k] else repeated(ret, k))
        if not f.exists():
            return None, f"output {k} (`{ret}`) was not written"
        got = np.load(f)
        if got.shape != want.shape:
            return None, f"output {k} has shape {got.shape}, onnxruntime {want.shape}"
        worst = max(worst, rel_err(got, want))
    return worst, None


def rel_err(got, want):
    if not want.size:
        return 0.0
    scale = max(float(np.max(np.abs(want))), 1e-6)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


def run_model(tirc, path, work, tol, engines):
    """{engine: error} for the engines that ran, and the first problem (None when all pass)."""
    name = path.stem
    tir = work / f"{name}.tir"
    st = work / f"{name}.safetensors"
    r = subprocess.run([tirc, "import", str(path), "-o", str(tir), "--weights", str(st)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return {}, f"import failed: {r.stderr.strip()}"
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
    errors = {}
    if "interp" in engines:
        out_dir = work / f"{name}.out"
        out_dir.mkdir(exist_ok=True)
        r = subprocess.run(args + ["--output", str(out_dir)], capture_output=True, text=True)
        if r.returncode != 0:
            return errors, f"run failed: {r.stderr.strip()}"
        # `tirc run` names a repeated value NAME.k.npy
        err, problem = compare(returns, expected, out_dir, lambda n, k: f"{n}.{k}.npy")
        if problem:
            return errors, f"interp: {problem}"
        errors["interp"] = err
    if "exe" in engines:
        exe = work / f"{name}.exe"
        r = subprocess.run([tirc, "compile", str(path), "-o", str(exe)], capture_output=True, text=True)
        known_gap = "no kernel for" in r.stderr or "bufferize" in r.stderr
        if r.returncode != 0 and name in EXE_PENDING and known_gap:
            errors["exe"] = "pending"
            return errors, None
        if r.returncode != 0:
            return errors, f"compile failed: {r.stderr.strip()}"
        out_dir = work / f"{name}.exe.out"
        out_dir.mkdir(exist_ok=True)
        exe_args = [str(exe), "--output", str(out_dir)]
        for i, p in enumerate(params):
            exe_args += ["--input", f"{p}={work / f'{name}.in{i}.npy'}"]
        r = subprocess.run(exe_args, capture_output=True, text=True)
        if r.returncode != 0:
            return errors, f"executable failed: {r.stderr.strip()}"
        # the executable names a repeated value NAME_k.npy
        err, problem = compare(returns, expected, out_dir, lambda n, k: f"{n}_{k}.npy")
        if problem:
            return errors, f"exe: {problem}"
        errors["exe"] = err
    bad = [f"{e} error {v:.3g} > {tol:g}" for e, v in errors.items() if not isinstance(v, str) and v > tol]
    return errors, "; ".join(bad) or None


def cell(v):
    return v if isinstance(v, str) else f"{v:.2e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tirc", help="the tirc binary (default: cargo build, target/debug/tirc)")
    ap.add_argument("--keep", help="write models, .tir files and outputs here instead of a temp dir")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--engines", default="interp,exe",
                    help="comma-separated: interp (tirc run), exe (tirc compile)")
    ap.add_argument("models", nargs="*", help="only these models (default: all)")
    a = ap.parse_args()

    engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    if not engines or any(e not in ("interp", "exe") for e in engines):
        ap.error("--engines takes interp and/or exe")
    tirc = find_tirc(a.tirc)
    if not has_run(tirc):
        print("tirc run not available: this tirc has no reference interpreter (`tirc run`); "
              "conformance cannot compare outputs")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep) if a.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        passed = failed = 0
        print(f"{'model':<36}" + "".join(f" {e + ' rel err':>15}" for e in engines) + "  result")
        for m in make_models.models():
            if a.models and m.graph.name not in a.models:
                continue
            path = work / f"{m.graph.name}.onnx"
            onnx.save(m, path)
            errors, problem = run_model(tirc, path, work, a.tol, engines)
            shown = "".join(f" {cell(errors.get(e, '-')):>15}" for e in engines)
            result = "ok" if problem is None else "FAIL: " + problem
            if errors.get("exe") == "pending":
                result += f" (exe pending: {EXE_PENDING[m.graph.name]})"
            print(f"{m.graph.name:<36}{shown}  {result}", flush=True)
            if "exe" in engines and m.graph.name in EXE_PENDING and "exe" in errors \
                    and errors["exe"] != "pending":
                print(f"  note: {m.graph.name} now compiles: remove it from EXE_PENDING")
            if problem is None:
                passed += 1
            else:
                failed += 1
        print(f"{passed} passed, {failed} failed")
        return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
