"""LiteRT beside tir on the trained mediapipe models: latency, CPU time and peak RSS.

For each model that tir imports: the executable of `tirc compile MODEL.tflite` (its `--bench N`
median) and LiteRT 2.3 with its default XNNPACK delegate (`num_threads` 1 or 2, median of N
invokes after a warm-up), each a fresh process pinned with taskset, interleaved round by round
(tir then LiteRT within a round, so both see the same neighbours); the ratio tir/LiteRT is taken
within each round and the median over rounds printed, with the medians of wall latency, the
process's CPU time per run, and peak RSS (ru_maxrss of the process). LiteRT's RSS includes the
Python interpreter; the `py base` column is that of the same Python process importing LiteRT
without loading a model. tir's slab (`tirc plan`'s `best` offsets) and its ratio to the lower bound are printed beside.

Usage: peers.py --tirc TIRC --work WORK [--rounds 3] [--runs 200] [--threads 1,2] [MODEL ...]
`--threads 2` pins both systems to cores 0,1; tir gets `--threads 2` when its executable has
that flag (the multi-threading issue), else it runs single-threaded and the row says so."""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

import mediapipe_ops

LITERT = r"""
import sys, time, resource
import numpy as np
from ai_edge_litert.interpreter import Interpreter
path, runs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if runs == 0:
    print("0 0")  # the baseline: Python with LiteRT imported, no model
    sys.exit(0)
it = Interpreter(model_path=path, num_threads=threads)
it.allocate_tensors()
rng = np.random.default_rng(0)
for d in it.get_input_details():
    it.set_tensor(d["index"], rng.uniform(-1, 1, d["shape"]).astype(np.float32))
for _ in range(10):
    it.invoke()
t = []
c0 = time.process_time()
for _ in range(runs):
    t0 = time.perf_counter(); it.invoke(); t.append(time.perf_counter() - t0)
cpu = (time.process_time() - c0) / runs
t.sort()
print(f"{t[len(t) // 2] * 1e3:.4f} {cpu * 1e3:.4f}")
"""


def run_pinned(cores, argv):
    """The standard output of argv, pinned to `cores`."""
    r = subprocess.run(["taskset", "-c", cores] + argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r.stdout


def rss_of(argv, cores):
    """Peak RSS (MiB) of argv, via GNU time's %M (KiB)."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M", "taskset", "-c", cores] + argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return int(r.stderr.strip().splitlines()[-1]) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tirc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if a.rounds < 3:
        ap.error("--rounds must be at least 3 (medians of >= 3 rounds)")
    py = sys.executable
    paths = sorted(glob.glob(os.path.join(a.work, "wheel", "**", "*.tflite"), recursive=True))
    if a.models:
        paths = [p for p in paths if os.path.basename(p)[:-7] in a.models]
    print(f"{'model':28s} {'thr':>3s} {'tir ms':>8s} {'cpu':>7s} {'litert ms':>9s} {'cpu':>7s} {'tir/litert':>10s}"
          f" {'tir RSS':>8s} {'litert RSS':>10s} {'py base':>7s} {'slab MiB':>8s} {'bound':>6s}")
    for path in paths:
        name = os.path.basename(path)[:-7]
        out = os.path.join(a.work, name)
        os.makedirs(out, exist_ok=True)
        exe = os.path.join(out, "model.bench")
        r = subprocess.run([a.tirc, "compile", path, "-o", exe], capture_output=True, text=True)
        if r.returncode != 0:
            continue
        tir = os.path.join(out, "model.tir")
        subprocess.run([a.tirc, "import", path, "-o", tir], capture_output=True, check=True)
        plan = json.loads(subprocess.run([a.tirc, "plan", tir, "--offsets", "--json"],
                                         capture_output=True, text=True, check=True).stdout)
        has_threads = "--threads" in subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
        for threads in [int(t) for t in a.threads.split(",")]:
            cores = "1" if threads == 1 else ",".join(str(c) for c in range(threads))
            tir_argv = [exe, "--bench", str(a.runs)] + (["--threads", str(threads)] if has_threads else [])
            lit_argv = [py, "-c", LITERT, path, str(a.runs), str(threads)]
            # LiteRT cannot resolve mediapipe's attention operators: tir is timed alone.
            lit_ok = not mediapipe_ops.custom_ops(path)
            rows = []
            for _ in range(a.rounds):
                m = re.search(r"median ([0-9.]+) ms.*cpu ([0-9.]+) ms per run", run_pinned(cores, tir_argv))
                tms, tcpu = float(m.group(1)), float(m.group(2))
                if lit_ok:
                    lms, lcpu = (float(v) for v in run_pinned(cores, lit_argv).split())
                else:
                    lms, lcpu = float("nan"), float("nan")
                rows.append((tms, tcpu, lms, lcpu, tms / lms))
            med = [statistics.median(c) for c in zip(*rows)]
            tir_rss = rss_of(tir_argv[:1] + ["--bench", "1"], cores)
            nan = float("nan")
            lit_rss = rss_of([py, "-c", LITERT, path, "1", str(threads)], cores) if lit_ok else nan
            base = rss_of([py, "-c", LITERT, path, "0", str(threads)], cores) if lit_ok else nan
            note = "" if has_threads or threads == 1 else " (tir 1 thread)"
            note += "" if lit_ok else " (LiteRT cannot run its custom operators)"
            print(f"{name:28s} {threads:3d} {med[0]:8.3f} {med[1]:7.3f} {med[2]:9.3f} {med[3]:7.3f} {med[4]:10.2f}"
                  f" {tir_rss:8.1f} {lit_rss:10.1f} {base:7.1f} {plan_mib(plan):8.2f} {plan_bound(plan):6.3f}{note}",
                  flush=True)


def plan_mib(plan):
    """The slab of `tirc plan`'s `best` offsets strategy, in MiB."""
    return best(plan) / 2**20


def plan_bound(plan):
    """That slab over the offsets lower bound (1.0: provably minimal)."""
    return best(plan) / plan["lower_bounds"]["offsets"]


def best(plan):
    return next(o["total_size"] for o in plan["offsets"] if o["strategy"] == "best")


if __name__ == "__main__":
    main()
