"""Dynamic-shape import against onnxruntime on public models: PP-OCRv4 (rapidocr_onnxruntime's
wheel from PyPI). Each model is imported once by `tirc import` with no --dim (its symbolic dims
kept), then run by `tirc run` at several input shapes and compared with onnxruntime.

  bench/.venv/bin/python bench/onnx/dynamic_ocr.py [--tirc target/release/tirc] [--work DIR]

The wheel is fetched with `pip download --no-deps` into the work directory (nothing is
committed). Prints one row per (model, shape): the max relative error and the verdict."""
import argparse
import pathlib
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnxruntime as ort

MODELS = {
    # model file: (dims pinned at import, input shapes to run at (N, C, H, W))
    "ch_PP-OCRv4_det_infer.onnx": ([], [(1, 3, 64, 96), (1, 3, 96, 64), (2, 3, 32, 32)]),
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": ([], [(1, 3, 48, 192), (3, 3, 48, 96)]),
    # The text recogniser's SVTR block flattens [N, 120, H', W'] to [N, 120, H'·W']: two
    # symbolic entries, which the IR's reshape writes as `[{N}, 120, -1]`; nothing pinned. Its
    # height must be 48 (a squeeze of H/48 checked at run time).
    "ch_PP-OCRv4_rec_infer.onnx": ([], [(1, 3, 48, 160), (1, 3, 48, 320), (2, 3, 48, 96)]),
}
TOL = 1e-4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tirc", default="target/release/tirc")
    ap.add_argument("--work", default=None)
    ap.add_argument("--engine", default="interp")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="tir-dynocr-"))
    work.mkdir(parents=True, exist_ok=True)
    models = work / "rapidocr_onnxruntime" / "models"
    if not models.is_dir():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "rapidocr_onnxruntime", "-d", str(work)], check=True)
        wheel = next(work.glob("rapidocr_onnxruntime-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for n in z.namelist():
                if n.startswith("rapidocr_onnxruntime/models/"):
                    z.extract(n, work)
    failures = 0
    print(f"{'model':40} {'input':>16} {'max rel err':>12}  verdict")
    for name, (dims, shapes) in MODELS.items():
        src = models / name
        tir = work / (src.stem + ".tir")
        st = work / (src.stem + ".safetensors")
        pins = [arg for d in dims for arg in ("--dim", d)]
        r = subprocess.run([a.tirc, "import", str(src), "-o", str(tir), "--weights", str(st)]
                           + pins, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name:40} {'import':>16} {'-':>12}  FAIL: {r.stderr.strip()}")
            failures += 1
            continue
        sess = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
        iname = sess.get_inputs()[0].name
        rng = np.random.default_rng(0)
        for shape in shapes:
            x = rng.standard_normal(shape).astype(np.float32)
            xin = work / "x.npy"
            out = work / "y.npy"
            np.save(xin, x)
            r = subprocess.run([a.tirc, "run", str(tir), "--weights", str(st), "--engine",
                                a.engine, "--input", f"{iname}={xin}", "-o", str(out)],
                               capture_output=True, text=True)
            label = "x".join(map(str, shape))
            if r.returncode != 0:
                print(f"{name:40} {label:>16} {'-':>12}  FAIL: {r.stderr.strip()[:300]}")
                failures += 1
                continue
            want = sess.run(None, {iname: x})[0]
            got = np.load(out)
            if got.shape != want.shape:
                print(f"{name:40} {label:>16} {'-':>12}  FAIL: shape {got.shape} vs {want.shape}")
                failures += 1
                continue
            err = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
            ok = err <= TOL
            failures += not ok
            print(f"{name:40} {label:>16} {err:12.2e}  {'ok' if ok else 'FAIL'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
