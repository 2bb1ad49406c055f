"""The ONNX backend node tests (the conformance suite shipped inside the pinned onnx package,
onnx/backend/test/data/node/) through tir: per test `tirc import` -> `tirc run` (the reference
interpreter) compared with the suite's expected outputs, then, for every test the interpreter
passes, the compiled executable (`tirc compile`) on the same inputs.

    bash bench/onnx/backend.sh [ARGS]          # creates bench/.venv, then runs this script
    bench/.venv/bin/python bench/onnx/backend.py [--tirc PATH] [--jobs 2] [--engines interp,exe]
        [--results FILE.md] [--check PASSING.txt] [--write-passing PASSING.txt] [TEST ...]

An output matches when every element has |tir - expected| <= 1e-4 + 1e-4 * |expected| (NaN
where NaN is expected). A test passes when it imports, runs and matches on every engine asked
for. A failing test is put in one class, named by the first thing that stopped it: `opset`,
`non-constant operand`, `dtype`, `missing op`, `other refusal` (an import diagnostic of another
kind), `wrong result`, `crash` (a panic or a signal instead of a diagnostic), `timeout`.

Writes the per-operator table (tests, passing, failures by class) to --results and a summary
to stdout. With --check, exits 1 when a test named in that file (one per line) does not pass:
the floor CI keeps, which can only rise. --write-passing rewrites such a file from this run.
Nothing is cached: every run starts from the suite's .pb files (converted to .npy here).
"""

import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "node"

# Seconds one tirc or executable invocation may take before the test counts as a timeout.
STEP_TIMEOUT = 120

CLASSES = ["opset", "non-constant operand", "dtype", "missing op", "other refusal",
           "wrong result", "crash", "timeout"]


class Failure(Exception):
    def __init__(self, cls, detail):
        super().__init__(detail)
        self.cls = cls
        self.detail = detail


def snake(op_type):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", op_type).lower()


def operator_of(name, model):
    """The operator a test is about: the node op type whose snake_case name the test name
    starts with (longest match; `_expanded` tests are function bodies of several nodes), else
    the first node's op type."""
    best = None
    for n in model.graph.node:
        s = snake(n.op_type)
        if name.startswith(f"test_{s}") and (best is None or len(s) > len(snake(best))):
            best = n.op_type
    if best is None and model.graph.node:
        best = model.graph.node[0].op_type
    return best or "?"


def classify_refusal(stderr):
    s = stderr
    if re.search(r"opset \d+ is not supported", s):
        return "opset"
    if "must be a constant" in s or "supported only on constants" in s:
        return "non-constant operand"
    if re.search(r"element type|f32 only|dtype|run-time Cast|only tensor inputs", s):
        return "dtype"
    if "has no `" in s and "op (not supported)" in s:
        return "missing op"
    return "other refusal"


def step(args, what):
    """Runs one tirc/executable step; a diagnostic exit (1, 2) is a refusal, a panic (101)
    or a signal a crash."""
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("timeout", f"{what}: no result after {STEP_TIMEOUT} s")
    if r.returncode == 0:
        return r
    msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
    # Paths (the temporary directory, the installed suite) say nothing about the failure.
    msg = re.sub(r"/[^\s:`]*/", "", " / ".join(msg[:3]))[:400]
    if r.returncode < 0 or r.returncode == 101 or "panicked" in r.stderr:
        raise Failure("crash", f"{what}: exit {r.returncode}: {msg}")
    raise Failure(classify_refusal(r.stderr), f"{what}: {msg}")


def tir_signature(tir_text):
    """The parameter and returned value names of the imported module's one function."""
    m = re.search(r"func\s+@?\w*\s*\((.*?)\)\s*->", tir_text, re.S)
    params = re.findall(r"%([\w.$]+)\s*:", m.group(1)) if m else []
    rm = re.findall(r"^\s*return\s+(.*)$", tir_text, re.M)
    returns = re.findall(r"%([\w.$]+)", rm[-1]) if rm else []
    return params, returns


def load_pb(path, what):
    """A test's .pb tensor as an array; a sequence or optional value (which tir has no type
    for) is a dtype failure."""
    try:
        t = onnx.TensorProto()
        t.ParseFromString(path.read_bytes())
        return numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 -- any decoding problem means "not a tensor"
        raise Failure("dtype", f"{what} is not a tensor tir can hold ({type(e).__name__})")


def load_inputs(data, graph_inputs):
    return [load_pb(data / f"input_{i}.pb", f"input {name}") for i, name in enumerate(graph_inputs)]


def mismatch(got, want):
    """None when got matches want within the suite's tolerance, else what is wrong."""
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = (np.abs(g - w) <= 1e-4 + 1e-4 * np.abs(w)) | (np.isnan(w) & np.isnan(g)) | (g == w)
    if ok.all():
        return None
    bad = int((~ok).sum())
    i = np.unravel_index(int(np.argmax(~ok)), ok.shape) if ok.ndim else ()
    return f"{bad} of {ok.size} elements differ (e.g. at {list(i)}: {g[i]!r} vs {w[i]!r})"


def compare(returns, expected, out_dir, repeated, engine):
    for k, (ret, want) in enumerate(zip(returns, expected)):
        f = out_dir / (f"{ret}.npy" if ret not in returns[:k] else repeated(ret, k))
        if not f.exists():
            raise Failure("crash", f"{engine}: output {ret} was not written")
        problem = mismatch(np.load(f), want)
        if problem:
            raise Failure("wrong result", f"{engine}: output {k} ({ret}): {problem}")


def run_test(tirc, test_dir, work, engines):
    """(operator, failure or None, whether operands were bound) for one node test."""
    name = test_dir.name
    model = onnx.load(str(test_dir / "model.onnx"), load_external_data=False)
    op = operator_of(name, model)
    data = test_dir / "test_data_set_0"
    try:
        tir = work / f"{name}.tir"
        st = work / f"{name}.safetensors"
        inits = {i.name for i in model.graph.initializer}
        graph_inputs = [i.name for i in model.graph.input if i.name not in inits]
        import_args = [tirc, "import", str(test_dir / "model.onnx"), "-o", str(tir),
                       "--weights", str(st)]
        bound = []
        try:
            step(import_args, "import")
        except Failure as f:
            # The suite passes shapes, axes, pads, scales and clip bounds as graph inputs; a
            # model that holds them as constants is what tir imports. Retry with every input
            # but the first (the data) bound to its value: `tirc import --bind`.
            if f.cls != "non-constant operand" or len(graph_inputs) < 2:
                raise
            inputs = load_inputs(data, graph_inputs)
            bound = list(range(1, len(graph_inputs)))
            for i in bound:
                npy = work / f"{name}.bound{i}.npy"
                np.save(npy, inputs[i])
                import_args += ["--bind", f"{graph_inputs[i]}={npy}"]
            try:
                step(import_args, "import (operands bound)")
            except Failure as g:
                raise Failure(f.cls, f"{f.detail}; with them bound: {g.detail}")
        inputs = [x for i, x in enumerate(load_inputs(data, graph_inputs)) if i not in bound]
        expected = []
        for k in range(len(model.graph.output)):
            expected.append(load_pb(data / f"output_{k}.pb", f"output {k}"))
        params, returns = tir_signature(tir.read_text())
        if len(params) != len(inputs) or len(returns) != len(expected):
            raise Failure("other refusal", f"signature {len(params)} -> {len(returns)} does not "
                          f"match the test's {len(inputs)} inputs and {len(expected)} outputs")
        feeds = []
        for p, x in zip(params, inputs):
            f = work / f"{name}.{p}.npy"
            np.save(f, x)
            feeds += ["--input", f"{p}={f}"]
        if "interp" in engines:
            out = work / f"{name}.out"
            out.mkdir(exist_ok=True)
            args = [tirc, "run", str(tir), "--output", str(out)] + feeds
            if st.exists():
                args += ["--weights", str(st)]
            step(args, "run")
            compare(returns, expected, out, lambda n, k: f"{n}.{k}.npy", "interp")
        if "exe" in engines:
            exe = work / f"{name}.exe"
            args = [tirc, "compile", str(tir), "-o", str(exe), "--opt-level", "1"]
            if st.exists():
                args += ["--weights", str(st)]
            step(args, "compile")
            out = work / f"{name}.exe.out"
            out.mkdir(exist_ok=True)
            step([str(exe), "--output", str(out)] + feeds, "executable")
            compare(returns, expected, out, lambda n, k: f"{n}_{k}.npy", "exe")
    except Failure as f:
        return op, f, False
    return op, None, bool(bound)


def find_tirc(explicit):
    if explicit:
        return str(Path(explicit).resolve())
    subprocess.run(["cargo", "build", "--quiet", "--bin", "tirc"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str(target / "debug" / "tirc")


def write_results(path, onnx_version, results, engines):
    per_op = collections.defaultdict(lambda: collections.Counter())
    for name, (op, fail, bound) in results.items():
        c = per_op[op]
        c["tests"] += 1
        c["passing" if fail is None else fail.cls] += 1
        if fail is None and bound:
            c["bound"] += 1
    total = collections.Counter()
    for c in per_op.values():
        total.update(c)
    ops_passing = sum(1 for c in per_op.values() if c["passing"])
    lines = [
        f"# ONNX backend node tests (onnx {onnx_version}), engines: {', '.join(engines)}",
        "",
        "Written by `bench/onnx/backend.py`; do not edit. A test passes when every output is "
        "within 1e-4 + 1e-4·|expected| on every engine.",
        "",
        f"**{total['passing']} of {total['tests']} tests pass, covering {ops_passing} operators.**",
        "",
        f"{total['bound']} of the passing tests pass with their operand inputs (shapes, axes, "
        "pads, scales, bounds: every input but the first) bound to the test's values at import "
        "(`tirc import --bind`), as a model holding them as constants would be; the column "
        "`bound` counts them.",
        "",
        "| operator | tests | passing | bound | " + " | ".join(CLASSES) + " |",
        "|---" * (4 + len(CLASSES)) + "|",
    ]

    def row(label, c):
        cells = [str(c[k]) if c[k] else "" for k in CLASSES]
        bound = str(c["bound"]) if c["bound"] else ""
        return f"| {label} | {c['tests']} | {c['passing']} | {bound} | " + " | ".join(cells) + " |"

    for op in sorted(per_op, key=lambda o: (-per_op[o]["passing"], o)):
        lines.append(row(op, per_op[op]))
    lines.append(row("**total**", total))
    lines += ["", "## Failures", ""]
    for name in sorted(results):
        op, fail, _ = results[name]
        if fail is not None:
            detail = fail.detail.replace("|", "\\|")
            lines.append(f"- `{name}` ({op}): {fail.cls}: {detail}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    return total, ops_passing


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tirc", help="the tirc binary (default: cargo build, target/debug/tirc)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--engines", default="interp,exe",
                    help="comma-separated: interp (tirc run), exe (tirc compile, only for tests "
                    "the interpreter passes)")
    ap.add_argument("--results", type=Path, default=HERE / "backend-results.md")
    ap.add_argument("--check", type=Path, help="a list of tests that must pass")
    ap.add_argument("--write-passing", type=Path, help="write the passing tests' names here")
    ap.add_argument("--keep", type=Path, help="keep the work files in this directory")
    ap.add_argument("tests", nargs="*", help="test names (default: every node test)")
    a = ap.parse_args()
    engines = [e for e in a.engines.split(",") if e]
    tirc = find_tirc(a.tirc)
    dirs = sorted(p for p in NODE_DIR.iterdir() if (p / "model.onnx").exists())
    if a.tests:
        wanted = set(a.tests)
        dirs = [d for d in dirs if d.name in wanted]
        missing = wanted - {d.name for d in dirs}
        if missing:
            print(f"no such node test: {', '.join(sorted(missing))}", file=sys.stderr)
            return 2
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tir-backend-") as tmp:
        work = a.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = {}
        # The interpreter over every test first, then the executables of those it passes: a
        # test is compiled only when it can pass.
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            interp = [e for e in engines if e == "interp"] or engines
            futs = {pool.submit(run_test, tirc, d, work, interp): d for d in dirs}
            for f in concurrent.futures.as_completed(futs):
                results[futs[f].name] = f.result()
            interp_s = time.monotonic() - start
            if "exe" in engines and "interp" in engines:
                passed = [d for d in dirs if results[d.name][1] is None]
                futs = {pool.submit(run_test, tirc, d, work, ["exe"]): d for d in passed}
                for f in concurrent.futures.as_completed(futs):
                    results[futs[f].name] = f.result()
    elapsed = time.monotonic() - start
    total, ops = write_results(a.results, onnx.__version__, results, engines)
    print(f"onnx {onnx.__version__} backend node tests, engines {','.join(engines)}: "
          f"{total['passing']} of {total['tests']} pass ({total['bound']} with operands bound), "
          f"{ops} operators ({elapsed:.0f} s wall, "
          f"{interp_s:.0f} s of it importing and interpreting)")
    print("failures: " + ", ".join(f"{k} {total[k]}" for k in CLASSES if total[k]))
    print(f"per-operator table: {a.results}")
    passing = sorted(n for n, (_, f, _) in results.items() if f is None)
    if a.write_passing:
        tmp = a.write_passing.with_name(a.write_passing.name + ".tmp")
        tmp.write_text("".join(f"{n}\n" for n in passing))
        tmp.replace(a.write_passing)
    if a.check:
        floor = [ln.strip() for ln in a.check.read_text().splitlines() if ln.strip()]
        lost = [n for n in floor if n in results and results[n][1] is not None]
        absent = [n for n in floor if n not in results]
        if a.tests:
            absent = []
        for n in lost:
            print(f"REGRESSION {n}: {results[n][1].cls}: {results[n][1].detail}", file=sys.stderr)
        for n in absent:
            print(f"REGRESSION {n}: not in this onnx's suite", file=sys.stderr)
        if lost or absent:
            print(f"{len(lost) + len(absent)} test(s) of {a.check} no longer pass", file=sys.stderr)
            return 1
        gained = len(passing) - len([n for n in floor if n in results])
        if gained > 0:
            print(f"{gained} test(s) pass beyond {a.check}; raise the floor with "
                  f"--write-passing {a.check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
