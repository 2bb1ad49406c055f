"""Per-class time of a tir executable against onnxruntime, op by op (issue 20).

Runs the executable's `--profile RUNS --threads N` and onnxruntime's own per-node profile
(`SessionOptions.enable_profiling`, `intra_op_num_threads=N`) on the same model, groups both
by class (convolutions by kernel, stride and output size; other ops by kind and output size)
and prints tir's and onnxruntime's milliseconds per class (the layers' medians summed) with
the gap, largest first. Pin and prioritise the whole command, e.g.
`chrt -f 1 taskset -c 1 bench/.venv/bin/python bench/onnx/op_classes.py ./inception_v3
bench/onnx/models/inception_v3.onnx --threads 1`.
"""

import argparse
import collections
import json
import os

# numpy's OpenBLAS starts a thread per core that spins for a while after the import; under
# `chrt -f` it holds a core, and the first tir run at 2 threads ran on one (6.6 against
# 3.4 ms for SqueezeNet). One BLAS thread: this script does no linear algebra.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import statistics
import subprocess
import tempfile

import numpy as np
import onnxruntime as ort


def tir_classes(exe, threads, runs):
    out = subprocess.run(
        [exe, "--profile", str(runs), "--threads", str(threads)],
        check=True, capture_output=True, text=True,
    ).stdout
    ms = collections.defaultdict(float)
    for line in out.splitlines():
        f = line.split()
        if len(f) < 6 or not f[0].isdigit():
            continue
        dims = f[-1].split("x")
        size = "x".join(dims[2:4]) if len(dims) >= 4 else ""
        if f[4].startswith("conv2d"):
            key = f"conv {f[5]} at {size}"
        else:
            key = f"{f[4]} {size}".strip()
        ms[key] += float(f[1])
    return ms


# onnxruntime's op names as tir's kinds.
ORT_KINDS = {"MaxPool": "max_pool", "AveragePool": "avg_pool",
             "GlobalAveragePool": "global_avg_pool", "Gemm": "gemm"}


def ort_classes(model, threads, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.gettempdir(), f"op_classes_{os.getpid()}")
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for _ in range(3 + runs):
        s.run(None, {i.name: x})
    path = s.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    per, args = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per[e["name"]].append(e["dur"] / 1000)
            args[e["name"]] = e["args"]
    first = lambda shapes: list(shapes[0].values())[0] if shapes else []
    ms = collections.defaultdict(float)
    for name, durs in per.items():
        a = args[name]
        op, ins, o = a.get("op_name", "?"), a.get("input_type_shape", []), first(a.get("output_type_shape", []))
        size = "x".join(map(str, o[2:4])) if len(o) >= 4 else ""
        if "Conv" in op and len(ins) > 1:
            w = list(ins[1].values())[0]
            ih = list(ins[0].values())[0][2]
            stride = 2 if o[2] and ih / o[2] >= 1.5 else 1
            key = f"conv {w[2]}x{w[3]}/{stride} at {size}"
        else:
            key = f"{ORT_KINDS.get(op, op)} {size}".strip()
        ms[key] += statistics.median(durs[-runs:])
    return ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("exe", help="the tir executable compiled from the model")
    p.add_argument("model", help="the ONNX model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--min-gap", type=float, default=0.05, help="ms; smaller gaps are summed only")
    a = p.parse_args()
    t = tir_classes(a.exe, a.threads, a.runs)
    o = ort_classes(a.model, a.threads, a.runs)
    keys = sorted(set(t) | set(o), key=lambda k: o.get(k, 0) - t.get(k, 0))
    print(f"{'class (output)':30s} {'tir':>8s} {'ort':>8s} {'gap':>8s}")
    for k in keys:
        gap = t.get(k, 0) - o.get(k, 0)
        if abs(gap) >= a.min_gap:
            print(f"{k:30s} {t.get(k, 0):8.3f} {o.get(k, 0):8.3f} {gap:+8.3f}")
    st, so_ = sum(t.values()), sum(o.values())
    print(f"{'all ops':30s} {st:8.3f} {so_:8.3f} {st - so_:+8.3f}")


if __name__ == "__main__":
    main()
