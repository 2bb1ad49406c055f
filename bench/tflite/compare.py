"""TFLite conformance on trained models: every .tflite file under WORK/wheel is imported with
`tirc import`, run with `tirc run` (the reference interpreter) and, with `--engines
interp,exe`, compiled with `tirc compile MODEL.tflite` and run as a native executable; each is
compared with LiteRT on the same seeded random inputs.

The error of an output is max |tir - litert| / max |litert|. LiteRT is run twice, with its
default XNNPACK delegate and with its reference kernels (`OpResolverType.BUILTIN_REF`); the two
disagree with each other on deep models (summation order, XNNPACK's approximations of the
transcendental functions), and tir's kernels are a third implementation. So an output passes
when tir's error against the nearer of LiteRT's two is at most max(TOL, the two's error against
each other): a tolerance tighter than LiteRT's own disagreement would judge LiteRT against
itself. The columns show, per engine, the largest such error over the outputs, and LiteRT's
largest disagreement (`litert spread`).

Usage: compare.py --tirc TIRC --work WORK [--engines interp,exe] [--subset] [MODEL ...]
Exit 1 when an imported model differs, fails to run, or a model of the subset is refused."""
import argparse
import glob
import os
import re
import subprocess
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import mediapipe_ops

TOL = 1e-4
# Small models run in CI (`.ci/run`), between them every family of operators the importer maps
# (strided and depthwise convolutions with padding, resize, concatenation, fully connected
# layers, PReLU, sparse weights behind DENSIFY, DEPTH_TO_SPACE).
SUBSET = ["face_detection_full_range_sparse", "face_detection_short_range", "hand_recrop", "iris_landmark"]


def litert(path, inputs, resolver):
    if mediapipe_ops.custom_ops(path):
        # LiteRT cannot resolve these custom operators: LiteRT runs the rest, NumPy them.
        return mediapipe_ops.run(path, inputs, resolver), None
    it = Interpreter(model_path=path, experimental_op_resolver_type=resolver, num_threads=1)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()], it


def rel(got, want):
    if got.shape != want.shape:
        return float("inf")
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(float(np.max(np.abs(want))), 1e-6))


def signature(text):
    """The parameters and the returned values of @main, in order."""
    head = text.split("func @main(", 1)[1].split(")", 1)[0]
    params = re.findall(r"%([A-Za-z0-9_.$]+): tensor<", head)
    returns = re.findall(r"%([A-Za-z0-9_.$]+)", text.rsplit("return", 1)[1].split("\n", 1)[0])
    return params, returns


def outputs(out_dir, returns, repeated):
    """The output files of a run; a value returned twice is NAME.k.npy (`tirc run`) or
    NAME_k.npy (the executable) from its second occurrence on."""
    seen = {}
    got = []
    for v in returns:
        k = seen.get(v, 0)
        seen[v] = k + 1
        got.append(np.load(os.path.join(out_dir, f"{v}.npy" if k == 0 else repeated(v, k))))
    return got


def run_model(tirc, path, out, engines):
    """(row, failed) for one model: row is the printed line."""
    name = os.path.basename(path)[:-7]
    tir = os.path.join(out, "model.tir")
    r = subprocess.run([tirc, "import", path, "-o", tir], capture_output=True, text=True)
    if r.returncode != 0:
        return f"{name:36s} refused: {r.stderr.strip().split(': error: ', 1)[-1]}", None
    params, returns = signature(open(tir).read())
    probe = Interpreter(model_path=path)
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, d["shape"]).astype(np.float32) for d in probe.get_input_details()]
    args = []
    for k, (p, x) in enumerate(zip(params, inputs)):
        f = os.path.join(out, f"input{k}.npy")
        np.save(f, x)
        args += ["--input", f"{p}={f}"]
    xnn, _ = litert(path, inputs, OpResolverType.AUTO)
    try:
        ref, _ = litert(path, inputs, OpResolverType.BUILTIN_REF)
    except RuntimeError:
        # LiteRT's reference kernels have no mediapipe custom ops (selfie segmentation's
        # Convolution2DTransposeBias); only its XNNPACK delegate runs them, so XNNPACK alone
        # is the reference (a spread of 0, so the tolerance is TOL).
        ref = xnn
    spreads = [rel(a, b) for a, b in zip(xnn, ref)]
    errs = {}
    failed = False

    def judge(engine, got):
        nonlocal failed
        near = [min(rel(g, a), rel(g, b)) for g, a, b in zip(got, xnn, ref)]
        failed |= any(e > max(TOL, s) for e, s in zip(near, spreads))
        errs[engine] = max(near)

    if "interp" in engines:
        d = os.path.join(out, "interp")
        r = subprocess.run([tirc, "run", tir, "--weights", os.path.join(out, "model.safetensors"),
                            "-o", d] + args, capture_output=True, text=True)
        if r.returncode != 0:
            return f"{name:36s} FAIL tirc run: {r.stderr.strip()}", True
        judge("interp", outputs(d, returns, lambda v, k: f"{v}.{k}.npy"))
    if "exe" in engines:
        exe = os.path.join(out, "model")
        r = subprocess.run([tirc, "compile", path, "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            return f"{name:36s} FAIL tirc compile: {r.stderr.strip()}", True
        d = os.path.join(out, "exe")
        os.makedirs(d, exist_ok=True)
        r = subprocess.run([exe, "--output", d] + args, capture_output=True, text=True)
        if r.returncode != 0:
            return f"{name:36s} FAIL executable: {r.stderr.strip()}", True
        judge("exe", outputs(d, returns, lambda v, k: f"{v}_{k}.npy"))
    spread = max(spreads)
    cells = "  ".join(f"{e} {v:.2e}" for e, v in errs.items())
    return f"{name:36s} {'FAIL' if failed else 'ok  '} {cells}  litert spread {spread:.2e} ({len(returns)} outputs)", failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tirc", required=True)
    ap.add_argument("--work", required=True, help="holds wheel/ (the unpacked mediapipe wheel)")
    ap.add_argument("--engines", default="interp,exe")
    ap.add_argument("--subset", action="store_true", help="only the CI subset: " + ", ".join(SUBSET))
    ap.add_argument("models", nargs="*", help="only these models (file names without .tflite)")
    a = ap.parse_args()
    engines = set(a.engines.split(","))
    if not engines or not engines <= {"interp", "exe"}:
        ap.error("--engines takes interp, exe or both")
    wanted = set(a.models) | (set(SUBSET) if a.subset else set())
    paths = sorted(glob.glob(os.path.join(a.work, "wheel", "**", "*.tflite"), recursive=True))
    paths = [p for p in paths if not wanted or os.path.basename(p)[:-7] in wanted]
    missing = wanted - {os.path.basename(p)[:-7] for p in paths}
    if missing:
        print(f"compare.py: no such model under {a.work}/wheel: {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    passed = failed = refused = 0
    for path in paths:
        out = os.path.join(a.work, os.path.basename(path)[:-7])
        os.makedirs(out, exist_ok=True)
        row, bad = run_model(a.tirc, path, out, engines)
        print(row, flush=True)
        if bad is None:
            refused += 1
            # A model of the subset imported before: its refusal is a regression.
            failed += a.subset
        elif bad:
            failed += 1
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed, {refused} refused (engines: {', '.join(sorted(engines))})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
