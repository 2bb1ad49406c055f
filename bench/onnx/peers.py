"""The peer benchmark: tir's compiled executable next to onnxruntime, tract and IREE on the
same ONNX models and weights, in one run, printed as one table.

    bash bench/onnx/peers.sh [--runs N] [MODEL ...]      # venvs, models, release tirc, this
    bench/.venv/bin/python bench/onnx/peers.py --tirc target/release/tirc --models DIR

For each model and runtime a fresh process loads the model, runs it once untimed (warm-up),
then --runs times on one thread; latency is the median of those runs, peak RSS the process's
maximum resident set (wait4's ru_maxrss: the Python interpreter and the runtime's library are
part of the peers' figure, as they are part of any program using them; tir's figure is its
whole executable). Runtimes:

- tir: `tirc compile MODEL.onnx` (weights from the model), the executable's `--bench N`;
- onnxruntime: CPU provider, intra_op_num_threads=1, inter_op_num_threads=1, sequential,
  ORT_ENABLE_ALL;
- tract: the `tract` package, into_model().into_runnable() (optimised; one thread);
- IREE: iree-import-onnx, iree-compile --iree-hal-target-backends=llvm-cpu for the host CPU
  with channels-last preprocessing, run on the local-sync driver (one thread). IREE's ONNX
  importer legalises ops only from opset 13 on (an opset-11 MaxPool, as tflite2onnx writes for
  BlazeFace, is "explicitly marked illegal"), so IREE gets the model upgraded to opset 13 by
  onnx's own version converter: the same computation, spelled in the opset IREE reads.

Correctness: every runtime's first output against onnxruntime's (max |x - ort| / max |ort|, the
conformance suite's measure), tir's within 1e-4 or the row says FAIL. Memory: tir's slab
against the lower bound of its usage records (`tirc plan --offsets`, the paper's bound).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOL = 1e-4
PEERS = ("ort", "tract", "iree")
# IREE's preprocessing that rewrites NCHW convolutions to channels-last (NHWC), the layout its
# CPU code generation is tuned for.
IREE_CHANNELS_LAST = ("--iree-preprocessing-pass-pipeline="
                      "builtin.module(util.func(iree-preprocessing-convert-conv-to-channels-last))")

# The oldest opset whose ops IREE's ONNX importer legalises (MaxPool-11 is refused).
IREE_MIN_OPSET = 13

# ---- child processes: one runtime, one model ------------------------------------------------

def child(runtime, model, inp, out, runs, fn):
    x = np.load(inp)
    if runtime == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        call = lambda: sess.run(None, {name: x})[0]  # noqa: E731
    elif runtime == "tract":
        import tract

        # into_model: typed and decluttered; into_runnable: optimised (tract's full pipeline).
        m = tract.onnx().load(model).into_model().into_runnable()
        call = lambda: m.run([x])[0].to_numpy()  # noqa: E731
    elif runtime == "iree":
        import iree.runtime as rt

        config = rt.Config("local-sync")
        ctx = rt.SystemContext(config=config)
        vm = rt.VmModule.mmap(config.vm_instance, model)
        ctx.add_vm_module(vm)
        f = ctx.modules[vm.name][fn]
        def call():
            r = f(x)
            r = r[0] if isinstance(r, (tuple, list)) else r
            return np.asarray(r.to_host() if hasattr(r, "to_host") else r)
    else:
        sys.exit(f"unknown runtime {runtime}")
    y = call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    np.save(out, np.asarray(y, dtype=np.float32))
    print(f"median_ms {1e3 * float(np.median(times)):.4f}")


# ---- the parent -----------------------------------------------------------------------------

# Peak RSS through a tiny C launcher: a child forked from the (large) Python process would
# inherit its high-water mark across exec (Linux keeps the larger of the old and new image's),
# so the launcher, itself a few hundred KiB, forks and execs the command and reports wait4's
# ru_maxrss for it alone.
RSS_C = r"""
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) { execvp(argv[2], argv + 2); _exit(127); }
    int status; struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) return 2;
    FILE *f = fopen(argv[1], "w");
    if (!f) return 2;
    fprintf(f, "%ld\n", ru.ru_maxrss);
    fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
"""


def rss_launcher(work):
    src, exe = work / "rss.c", work / "rss"
    src.write_text(RSS_C)
    subprocess.run(["cc", "-O2", str(src), "-o", str(exe)], check=True)
    return str(exe)


def run_with_rss(launcher, args, work):
    """Runs `args`; returns (exit code, stdout, stderr, peak RSS in bytes)."""
    report = work / "rss.txt"
    r = subprocess.run([launcher, str(report)] + args, capture_output=True, text=True)
    rss = int(report.read_text()) * 1024 if report.exists() else 0
    report.unlink(missing_ok=True)
    return r.returncode, r.stdout, r.stderr, rss


def rel_err(got, want):
    if got.shape != want.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(want))), 1e-6)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


def first_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return (lines[-1] if lines else "no output")[:200]


def bench_model(a, path, work, notes):
    import onnx
    import onnxruntime as ort

    name = path.stem
    row = {"model": name}
    proto = onnx.load(str(path), load_external_data=False)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    inp_file = work / f"{name}.in.npy"
    np.save(inp_file, x)
    reference = sess.run(None, {inp.name: x})[0]

    # tir
    exe = work / f"{name}.exe"
    r = subprocess.run([a.tirc, "compile", str(path), "-o", str(exe)], capture_output=True, text=True)
    if r.returncode != 0:
        notes.append(f"{name}: tir: compile failed: {first_line(r.stderr)}")
    else:
        tir = work / f"{name}.tir"
        subprocess.run([a.tirc, "import", str(path), "-o", str(tir), "--weights",
                        str(work / f"{name}.safetensors")], capture_output=True, check=True)
        text = tir.read_text()
        param = re.search(r"func @main\(\s*%([A-Za-z0-9_.$]+):", text).group(1)
        first_ret = re.search(r"^\s*return\s*%([A-Za-z0-9_.$]+)", text, re.M).group(1)
        out_dir = work / f"{name}.tir.out"
        out_dir.mkdir(exist_ok=True)
        code, so, se, rss = run_with_rss(a.launcher, [str(exe), "--input", f"{param}={inp_file}",
                                          "--output", str(out_dir), "--bench", str(a.runs)], work)
        if code != 0:
            notes.append(f"{name}: tir: executable failed: {first_line(se)}")
        else:
            row["tir_ms"] = float(re.search(r"median ([0-9.]+) ms", so).group(1))
            row["tir_rss"] = rss
            row["slab"] = int(re.search(r"slab: (\d+) bytes", so).group(1))
            row["tir_err"] = rel_err(np.load(out_dir / f"{first_ret}.npy"), reference)
        p = subprocess.run([a.tirc, "plan", str(tir), "--offsets", "--json"], capture_output=True,
                           text=True)
        if p.returncode == 0:
            row["bound"] = json.loads(p.stdout)["lower_bounds"]["offsets"]
        else:
            notes.append(f"{name}: tirc plan failed: {first_line(p.stderr)}")

    # the peers
    for rt in PEERS:
        if rt not in a.peers:
            continue
        model_file, fn = str(path), ""
        if rt == "iree":
            vmfb = work / f"{name}.vmfb"
            mlir = work / f"{name}.mlir"
            bindir = Path(sys.executable).parent
            iree_onnx = path
            opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                        default=IREE_MIN_OPSET)
            if opset < IREE_MIN_OPSET:
                from onnx import version_converter
                iree_onnx = work / f"{name}.opset{IREE_MIN_OPSET}.onnx"
                onnx.save(version_converter.convert_version(onnx.load(str(path)), IREE_MIN_OPSET),
                          str(iree_onnx))
                notes.append(f"{name}: iree: given the model converted from opset {opset} to "
                             f"{IREE_MIN_OPSET} (onnx.version_converter)")
            c = subprocess.run([str(bindir / "iree-import-onnx"), str(iree_onnx), "-o", str(mlir)],
                               capture_output=True, text=True)
            if c.returncode == 0:
                base = [str(bindir / "iree-compile"), str(mlir), "--iree-hal-target-backends=llvm-cpu",
                        "--iree-llvmcpu-target-cpu=host", "-o", str(vmfb)]
                c = subprocess.run(base + [IREE_CHANNELS_LAST], capture_output=True, text=True)
                if c.returncode != 0:
                    notes.append(f"{name}: iree: channels-last preprocessing failed, compiled "
                                 f"without it: {first_line(c.stderr)}")
                    c = subprocess.run(base, capture_output=True, text=True)
            if c.returncode != 0:
                notes.append(f"{name}: iree: compile failed: {first_line(c.stderr)}")
                continue
            model_file = str(vmfb)
            # The entry's name is the graph's, quoted when it is not an identifier.
            m = re.search(r'func\.func @(?:"([^"]+)"|([A-Za-z0-9_$.]+))', mlir.read_text())
            fn = m.group(1) or m.group(2)
        out = work / f"{name}.{rt}.out.npy"
        code, so, se, rss = run_with_rss(a.launcher, [sys.executable, __file__, "--child", rt, model_file,
                                          str(inp_file), str(out), str(a.runs), fn], work)
        if code != 0:
            notes.append(f"{name}: {rt}: failed: {first_line(se)}")
            continue
        row[f"{rt}_ms"] = float(re.search(r"median_ms ([0-9.]+)", so).group(1))
        row[f"{rt}_rss"] = rss
        row[f"{rt}_err"] = rel_err(np.load(out), reference)
        if row[f"{rt}_err"] > TOL:
            notes.append(f"{name}: {rt}: max rel error {row[f'{rt}_err']:.2e} vs onnxruntime")
    return row


COLS = [
    ("model", 28), ("tir err", 9), ("tir ms", 8), ("ort ms", 8), ("tract ms", 9), ("iree ms", 8),
    ("/ort", 6), ("/tract", 6), ("/iree", 6), ("tir MiB", 8), ("ort MiB", 8), ("tract MiB", 9),
    ("iree MiB", 9), ("/ort", 6), ("slab MiB", 9), ("bound MiB", 9), ("slab/lb", 8),
]


def cells(row):
    def ms(k):
        return f"{row[k]:.2f}" if k in row else "-"

    def mib(k):
        return f"{row[k] / 2**20:.1f}" if k in row else "-"

    def ratio(k, peer):
        return f"{row[k] / row[peer]:.2f}" if k in row and peer in row and row[peer] else "-"

    err = "-"
    if "tir_err" in row:
        err = f"{row['tir_err']:.1e}" + ("" if row["tir_err"] <= TOL else " FAIL")
    return [row["model"], err, ms("tir_ms"), ms("ort_ms"), ms("tract_ms"), ms("iree_ms"),
            ratio("tir_ms", "ort_ms"), ratio("tir_ms", "tract_ms"), ratio("tir_ms", "iree_ms"),
            mib("tir_rss"), mib("ort_rss"), mib("tract_rss"), mib("iree_rss"),
            ratio("tir_rss", "ort_rss"), mib("slab"), mib("bound"), ratio("slab", "bound")]


def line(values):
    return " ".join(f"{v:<{w}}" if i == 0 else f"{v:>{w}}" for i, ((_, w), v) in
                    enumerate(zip(COLS, values)))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        rt, model, inp, out, runs = sys.argv[2:7]
        child(rt, model, inp, out, int(runs), sys.argv[7] if len(sys.argv) > 7 else "")
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tirc", default=str(ROOT / "target" / "release" / "tirc"))
    ap.add_argument("--models", default=str(HERE / "models"), help="directory of MODEL.onnx")
    ap.add_argument("--runs", type=int, default=30, help="timed runs per model and runtime (>= 20)")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of ort,tract,iree")
    ap.add_argument("--keep", help="keep executables, vmfb files and outputs here")
    ap.add_argument("models_", nargs="*", metavar="MODEL", help="only these models")
    a = ap.parse_args()
    a.peers = a.peers.split(",")
    if a.runs < 20:
        ap.error("--runs must be at least 20")
    paths = sorted(Path(a.models).glob("*.onnx"))
    if a.models_:
        paths = [p for p in paths if p.stem in a.models_]
    if not paths:
        print(f"no models in {a.models}", file=sys.stderr)
        return 1
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    notes = []
    print(f"single thread; latency = median of {a.runs} runs after one warm-up; "
          f"ratios are tir/peer; err = max rel error vs onnxruntime (tol {TOL:g}); MiB = peak RSS;\n"
          "bound = lower bound of the usage records without buffer sharing (`tirc plan`): "
          "the slab, planned with sharing (in-place ops, views), can be below it")
    print(line([c for c, _ in COLS]))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep) if a.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        a.launcher = rss_launcher(work)
        for p in paths:
            row = bench_model(a, p, work, notes)
            if row.get("tir_err", float("inf")) > TOL:
                failed += 1
            print(line(cells(row)), flush=True)
    for n in notes:
        print(n)
    print(f"{len(paths) - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
