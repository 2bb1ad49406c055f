"""The peer benchmark: tir's compiled executable next to onnxruntime (and tract, IREE) on the same
ONNX models and weights, measured so that load from neighbours cannot fool it.

    bash bench/onnx/peers.sh [--rounds R] [--runs N] [--threads 1,2] [MODEL ...]
    bench/.venv/bin/python bench/onnx/peers.py --tirc target/release/tirc --models DIR ...

Method (issue 20, "a peer benchmark that load cannot fool"):
- every measurement is a fresh process pinned with `taskset` to the same cores (core 1 for one
  thread, cores 0,1 for two), which loads the model, runs it 10 times untimed, then --runs
  times; it reports the median latency and its CPU time per run (user + system);
- the runtimes are interleaved round by round (>= 3 rounds; the order rotates every round), so
  a busy neighbour hits all of them alike; the ratio tir/peer is taken within each round and
  the table prints the median over rounds, with the medians of wall and CPU time beside;
- CPU time beside wall time exposes load: at one thread a CPU time well below the wall time
  means the process waited for its core, and the row is suspect;
- one thread: tir, onnxruntime (intra_op_num_threads=1, sequential, ORT_ENABLE_ALL), tract,
  IREE (local-sync driver); two threads: tir `--threads 2` against onnxruntime
  `intra_op_num_threads=2` (tract and IREE are left out there);
- err: the largest relative error (max |x - ref| / max |ref|) over every output against
  onnxruntime's default session, tir's within 1e-4 or the row says FAIL; the models of
  fetch_trained.py (RapidOCR's PP-OCRv4, RapidAI's layout and orientation models) and
  BlazeFace carry trained weights, so their error column means something; torchvision exports
  (make_zoo.py) carry random weights and are marked `rw`;
- peak RSS: a separate single-thread run per runtime (ru_maxrss; the peers' figure includes the
  Python interpreter, as any program using them from Python pays it); tir's slab beside the
  lower bound of its usage records (`tirc plan`'s `best` offsets).

A model's `<name>.json` beside it (fetch_trained.py writes them) gives the values of its
symbolic dimensions (`tirc compile --dim`) and its input shape; without one the graph's input
shape must be concrete.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOL = 1e-4
PEERS = ("ort", "tract", "iree")
TRAINED = {"blazeface"}  # trained models among make_zoo.py's exports
IREE_CHANNELS_LAST = ("--iree-preprocessing-pass-pipeline="
                      "builtin.module(util.func(iree-preprocessing-convert-conv-to-channels-last))")
IREE_MIN_OPSET = 13  # the oldest opset whose ops IREE's ONNX importer legalises

# ---- child processes: one runtime, one model ------------------------------------------------


def child(runtime, model, inp, out, runs, threads, fn):
    import time

    x = np.load(inp)
    if runtime == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        call = lambda: sess.run(None, {name: x})  # noqa: E731
    elif runtime == "tract":
        import tract

        m = tract.onnx().load(model).into_model().into_runnable()
        call = lambda: [t.to_numpy() for t in m.run([x])]  # noqa: E731
    elif runtime == "iree":
        import iree.runtime as rt

        config = rt.Config("local-sync")
        ctx = rt.SystemContext(config=config)
        vm = rt.VmModule.mmap(config.vm_instance, model)
        ctx.add_vm_module(vm)
        f = ctx.modules[vm.name][fn]

        def call():
            r = f(x)
            r = r if isinstance(r, (tuple, list)) else [r]
            return [np.asarray(t.to_host() if hasattr(t, "to_host") else t) for t in r]
    else:
        sys.exit(f"unknown runtime {runtime}")
    ys = call()
    for _ in range(10):
        call()
    times = []
    c0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    cpu = (time.process_time() - c0) / runs
    if out:
        np.savez(out, *[np.asarray(y, dtype=np.float32) for y in ys])
    print(f"{1e3 * float(np.median(times)):.4f} {1e3 * cpu:.4f}")


# ---- the parent -----------------------------------------------------------------------------


def run(argv, cores=None, check=True):
    argv = (["taskset", "-c", cores] if cores else []) + [str(a) for a in argv]
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ...: {last_line(r.stderr)}")
    return r


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return (lines[-1] if lines else "no output")[:200]


def peak_rss_mib(argv, cores):
    """Peak RSS of argv in MiB (GNU time's %M, KiB)."""
    r = run(["/usr/bin/time", "-f", "%M", "taskset", "-c", cores] + argv, check=False)
    if r.returncode != 0:
        return None
    return int(r.stderr.strip().splitlines()[-1]) / 1024


def rel_err(got, want):
    if got.shape != want.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(want))), 1e-6)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


class Model:
    """One model made ready for every runtime: input, reference outputs, tir's executable,
    the peers' model files; `argv(runtime, threads, runs)` is one measurement's command."""

    def __init__(self, a, path, work, notes):
        import onnx
        import onnxruntime as ort

        self.name, self.a, self.work, self.notes = path.stem, a, work, notes
        meta_file = path.with_suffix(".json")
        meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
        self.trained = bool(meta) or self.name in TRAINED
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        shape = meta.get("shape") or inp.shape
        if not all(isinstance(d, int) and d > 0 for d in shape):
            raise RuntimeError(f"input shape {shape} is not concrete: give {path.stem}.json")
        x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
        self.inp = work / f"{self.name}.in.npy"
        np.save(self.inp, x)
        self.reference = sess.run(None, {inp.name: x})
        self.files = {"ort": (str(path), "")}
        self.err, self.slab, self.bound = {}, None, None

        # tir: the executable, its parameter's name, its plan.
        dims = [f for k, v in meta.get("dims", {}).items() for f in ("--dim", f"{k}={v}")]
        exe, tir = work / f"{self.name}.exe", work / f"{self.name}.tir"
        c = run([a.tirc, "compile", path, "-o", exe] + dims, check=False)
        i = run([a.tirc, "import", path, "-o", tir, "--weights", work / f"{self.name}.st"] + dims,
                check=False)
        if c.returncode != 0 or i.returncode != 0:
            notes.append(f"{self.name}: tir: {last_line(c.stderr if c.returncode else i.stderr)}")
        else:
            text = tir.read_text()
            param = re.search(r"func @main\(\s*%([A-Za-z0-9_.$]+):", text).group(1)
            self.tir_argv = [str(exe), "--input", f"{param}={self.inp}"]
            self.tir_outs = re.findall(r"%([A-Za-z0-9_.$]+)", re.search(r"^\s*return\s+(.*)$",
                                                                       text, re.M).group(1))
            plan = json.loads(run([a.tirc, "plan", tir, "--offsets", "--json"]).stdout)
            self.slab = next(o["total_size"] for o in plan["offsets"] if o["strategy"] == "best")
            self.bound = plan["lower_bounds"]["offsets"]
            out = work / f"{self.name}.tir.out"
            out.mkdir(exist_ok=True)
            run(self.tir_argv + ["--output", out])
            got = [np.load(out / f"{o}.npy") for o in dict.fromkeys(self.tir_outs)]
            self.err["tir"] = max(rel_err(g, w) for g, w in zip(got, self.reference))
        self.prepare_peers(path, onnx)

    def prepare_peers(self, path, onnx):
        a, work, name = self.a, self.work, self.name
        if "tract" in a.peers:
            self.files["tract"] = (str(path), "")
        if "iree" not in a.peers:
            return
        bindir = Path(sys.executable).parent
        proto = onnx.load(str(path), load_external_data=False)
        opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                    default=IREE_MIN_OPSET)
        src = path
        if opset < IREE_MIN_OPSET:
            from onnx import version_converter
            src = work / f"{name}.opset{IREE_MIN_OPSET}.onnx"
            onnx.save(version_converter.convert_version(onnx.load(str(path)), IREE_MIN_OPSET),
                      str(src))
        mlir, vmfb = work / f"{name}.mlir", work / f"{name}.vmfb"
        c = run([bindir / "iree-import-onnx", src, "-o", mlir], check=False)
        if c.returncode == 0:
            base = [bindir / "iree-compile", mlir, "--iree-hal-target-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host", "-o", vmfb]
            c = run(base + [IREE_CHANNELS_LAST], check=False)
            if c.returncode != 0:
                c = run(base, check=False)
        if c.returncode != 0:
            self.notes.append(f"{name}: iree: {last_line(c.stderr)}")
            return
        m = re.search(r'func\.func @(?:"([^"]+)"|([A-Za-z0-9_$.]+))', mlir.read_text())
        self.files["iree"] = (str(vmfb), m.group(1) or m.group(2))

    def runtimes(self, threads):
        rts = (["tir"] if hasattr(self, "tir_argv") else []) + ["ort"]
        if threads == 1:
            rts += [p for p in ("tract", "iree") if p in self.files]
        return rts

    def argv(self, rt, threads, runs, out=""):
        if rt == "tir":
            return self.tir_argv + ["--bench", str(runs), "--threads", str(threads)]
        model, fn = self.files[rt]
        return [sys.executable, __file__, "--child", rt, model, str(self.inp), out, str(runs),
                str(threads), fn]

    def check_peer(self, rt):
        out = self.work / f"{self.name}.{rt}.npz"
        r = run(self.argv(rt, 1, 1, str(out)), check=False)
        if r.returncode != 0:
            self.notes.append(f"{self.name}: {rt}: {last_line(r.stderr)}")
            return False
        got = np.load(out)
        self.err[rt] = max(rel_err(got[f"arr_{i}"], w) for i, w in enumerate(self.reference))
        return True


def measure(cores, argv):
    """(median ms, CPU ms per run) of one pinned measurement."""
    out = run(argv, cores).stdout
    m = re.search(r"median ([0-9.]+) ms.*cpu ([0-9.]+) ms per run", out)
    if m:
        return float(m.group(1)), float(m.group(2))
    ms, cpu = out.split()[-2:]
    return float(ms), float(cpu)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        rt, model, inp, out, runs, threads = sys.argv[2:8]
        child(rt, model, inp, out, int(runs), int(threads), sys.argv[8] if len(sys.argv) > 8 else "")
        return 0
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tirc", default=str(ROOT / "target" / "release" / "tirc"))
    ap.add_argument("--models", action="append",
                    help="directory of MODEL.onnx (repeatable; default bench/onnx/trained and "
                         "bench/onnx/models)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (>= 3)")
    ap.add_argument("--runs", type=int, default=50, help="timed runs per measurement (>= 20)")
    ap.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    ap.add_argument("--peers", default="ort", help="comma-separated subset of ort,tract,iree")
    ap.add_argument("--keep", help="keep executables and outputs in this directory")
    ap.add_argument("models_", nargs="*", metavar="MODEL", help="only these models")
    a = ap.parse_args()
    a.peers = set(a.peers.split(",")) | {"ort"}
    if a.rounds < 3:
        ap.error("--rounds must be at least 3 (medians of >= 3 rounds)")
    if a.runs < 20:
        ap.error("--runs must be at least 20")
    if unknown := a.peers - set(PEERS):
        ap.error(f"unknown peers {sorted(unknown)}; known: {','.join(PEERS)}")
    dirs = [Path(d) for d in (a.models or [HERE / "trained", HERE / "models"])]
    paths = sorted(p for d in dirs for p in d.glob("*.onnx"))
    if a.models_:
        paths = [p for p in paths if p.stem in a.models_]
    if not paths:
        print(f"no models in {', '.join(map(str, dirs))}", file=sys.stderr)
        return 1
    thread_counts = [int(t) for t in a.threads.split(",")]
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    notes, failed = [], 0
    print(f"load before: {' '.join(open('/proc/loadavg').read().split()[:3])}; "
          f"{a.rounds} interleaved rounds of {a.runs} runs; medians over rounds; ratio = tir/peer "
          f"within a round; err = max rel error vs onnxruntime (tol {TOL:g}), rw = random weights")
    print(f"{'model':22s} {'thr':>3s} {'peer':>5s} {'tir ms':>8s} {'cpu':>7s} {'peer ms':>8s} "
          f"{'cpu':>7s} {'tir/peer':>8s} {'tir err':>12s} {'peer err':>8s} {'tir MiB':>7s} "
          f"{'peer MiB':>8s} {'slab MiB':>8s} {'slab/lb':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep) if a.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for path in paths:
            try:
                m = Model(a, path, work, notes)
            except (RuntimeError, OSError) as e:
                notes.append(f"{path.stem}: {e}")
                failed += 1
                continue
            tir_err = m.err.get("tir")
            if tir_err is None or tir_err > TOL:
                failed += 1
            peers = [p for p in m.runtimes(1) if p != "tir" and m.check_peer(p)]
            if "tir" not in m.runtimes(1):
                continue
            rss = {rt: peak_rss_mib(m.argv(rt, 1, 20), "1") for rt in ["tir"] + peers}
            for threads in thread_counts:
                cores = "1" if threads == 1 else ",".join(str(c) for c in range(threads))
                rts = ["tir"] + [p for p in m.runtimes(threads) if p in peers]
                rounds = []
                for r in range(a.rounds):
                    order = rts[r % len(rts):] + rts[:r % len(rts)]
                    rounds.append({rt: measure(cores, m.argv(rt, threads, a.runs)) for rt in order})
                tir_ms = statistics.median(x["tir"][0] for x in rounds)
                tir_cpu = statistics.median(x["tir"][1] for x in rounds)
                for p in rts[1:]:
                    ratio = statistics.median(x["tir"][0] / x[p][0] for x in rounds)
                    err = "-" if tir_err is None else f"{tir_err:.1e}" + (
                        "" if tir_err <= TOL else " FAIL") + ("" if m.trained else " rw")
                    print(f"{m.name:22s} {threads:3d} {p:>5s} {tir_ms:8.3f} {tir_cpu:7.3f} "
                          f"{statistics.median(x[p][0] for x in rounds):8.3f} "
                          f"{statistics.median(x[p][1] for x in rounds):7.3f} {ratio:8.2f} "
                          f"{err:>12s} {m.err.get(p, 0):8.1e} {fmt(rss['tir'], '7.1f')} "
                          f"{fmt(rss.get(p), '8.1f')} {m.slab / 2**20:8.2f} "
                          f"{m.slab / m.bound if m.bound else 1:7.3f}", flush=True)
    print(f"load after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for n in notes:
        print(n)
    print(f"{len(paths) - failed} of {len(paths)} models within {TOL:g} of onnxruntime")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
