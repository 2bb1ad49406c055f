"""The suite's Einsum node tests (float64, which the IR does not hold) converted to float32,
and more equations, imported by tirc and run on its interpreter, compared with ONNX's reference
evaluator on the same float32 inputs.

    bench/.venv/bin/python bench/onnx/einsum_f32.py [TIRC]   (default target/debug/tirc)
"""
import onnx, numpy as np, subprocess, sys, os, glob, tempfile
from onnx import numpy_helper, helper, TensorProto
from onnx.reference import ReferenceEvaluator
base = os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node/')
tirc = sys.argv[1] if len(sys.argv) > 1 else 'target/debug/tirc'
work = tempfile.mkdtemp(prefix='einsum_f32.')
extra = [("bij,bjk->bik",[(2,3,4),(2,4,5)]),("...ij,jk,kl->...il",[(2,2,3),(3,2),(2,2)]),
         ("ba,bc",[(3,2),(3,2)]),("i,j->ij",[(2),(3)]),("abc,cd,bd->ad",[(2,3,4),(4,5),(3,5)]),
         ("bhqd,bhkd->bhqk",[(1,2,3,4),(1,2,5,4)]), ("ij,ij->ij",[(2,3),(2,3)]), ("ii->i",[(3,3)])]
cases = []
for t in sorted(os.listdir(base)):
    if not t.startswith('test_einsum'): continue
    m = onnx.load(base + t + '/model.onnx')
    eq = onnx.helper.get_attribute_value(m.graph.node[0].attribute[0]).decode()
    ins = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(base + t + '/test_data_set_0/input_*.pb'))]
    cases.append((t, eq, [x.astype(np.float32) for x in ins]))
rng = np.random.default_rng(0)
for k, (eq, shapes) in enumerate(extra):
    cases.append((f"extra{k}", eq, [rng.standard_normal(s).astype(np.float32) for s in shapes]))
ok = 0
for name, eq, ins in cases:
    names = [f"x{i}" for i in range(len(ins))]
    g = helper.make_graph([helper.make_node("Einsum", names, ["y"], equation=eq)], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, x.shape) for n, x in zip(names, ins)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    want = ReferenceEvaluator(m).run(None, dict(zip(names, ins)))[0]
    p = f"{work}/{name}.onnx"; onnx.save(m, p)
    r = subprocess.run([tirc, "import", p, "-o", f"{work}/{name}.tir"], capture_output=True, text=True)
    if r.returncode:
        print(f"{name} {eq!r}: refused: {r.stderr.strip()}"); continue
    feeds = []
    for n, x in zip(names, ins):
        np.save(f"{work}/{name}.{n}.npy", x); feeds += ["--input", f"{n}={work}/{name}.{n}.npy"]
    out = f"{work}/{name}.out"; os.makedirs(out, exist_ok=True)
    r = subprocess.run([tirc, "run", f"{work}/{name}.tir", "--output", out] + feeds, capture_output=True, text=True)
    got = np.load(glob.glob(out + "/*.npy")[0]) if r.returncode == 0 else None
    err = np.max(np.abs(got - want) / (1e-4 + np.abs(want))) if got is not None and got.size else 0.0
    print(f"{name} {eq!r}: shape {got.shape if got is not None else None} vs {want.shape}, max rel err {err:.2e} {r.stderr.strip()}")
    ok += got is not None and got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4)
print(f"{ok} of {len(cases)} within 1e-4")
