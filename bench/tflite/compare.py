"""Imports every .tflite file under WORK/wheel with tirc, runs it with `tirc run` and LiteRT on
the same random inputs, and prints the max relative error per model, or why it is refused.
Usage: compare.py TIRC WORK. Exit 1 if an imported model differs by more than 1e-4."""
import glob
import os
import re
import subprocess
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter

TOL = 1e-4


def main():
    tirc, work = sys.argv[1], sys.argv[2]
    passed = failed = refused = 0
    for path in sorted(glob.glob(os.path.join(work, "wheel", "**", "*.tflite"), recursive=True)):
        name = os.path.basename(path)[:-7]
        out = os.path.join(work, name)
        os.makedirs(out, exist_ok=True)
        tir = os.path.join(out, "model.tir")
        r = subprocess.run([tirc, "import", path, "-o", tir], capture_output=True, text=True)
        if r.returncode != 0:
            refused += 1
            print(f"{name:36s} refused: {r.stderr.strip().split(': error: ', 1)[-1]}")
            continue
        it = Interpreter(model_path=path)
        it.allocate_tensors()
        rng = np.random.default_rng(0)
        text = open(tir).read()
        params = re.findall(r"%([A-Za-z0-9_.$]+): tensor<", text.split("func @main(")[1].split(")")[0])
        returns = re.findall(r"%([A-Za-z0-9_.$]+)", text.rsplit("return", 1)[1])
        args = []
        for k, (d, p) in enumerate(zip(it.get_input_details(), params)):
            x = rng.uniform(-1, 1, d["shape"]).astype(np.float32)
            it.set_tensor(d["index"], x)
            f = os.path.join(out, f"input{k}.npy")
            np.save(f, x)
            args += ["--input", f"{p}={f}"]
        it.invoke()
        r = subprocess.run([tirc, "run", tir, "--weights", os.path.join(out, "model.safetensors"),
                            "-o", os.path.join(out, "outputs")] + args,
                           capture_output=True, text=True)
        if r.returncode != 0:
            failed += 1
            print(f"{name:36s} tirc run failed: {r.stderr.strip()}")
            continue
        errs = []
        for d, v in zip(it.get_output_details(), returns):
            ref = it.get_tensor(d["index"])
            got = np.load(os.path.join(out, "outputs", f"{v}.npy"))
            errs.append(float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-6)))
        err = max(errs)
        ok = err <= TOL
        passed += ok
        failed += not ok
        print(f"{name:36s} {'ok  ' if ok else 'FAIL'} max rel err {err:.2e} ({len(errs)} outputs)")
    print(f"{refused} refused")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
