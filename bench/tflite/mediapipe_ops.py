"""A reference for models with mediapipe's custom operators that LiteRT cannot resolve
(face_landmark_with_attention's Landmarks2TransformMatrix, TransformTensorBilinear and
TransformLandmarks, version 2): LiteRT runs every builtin operator, NumPy runs the custom ones.

The NumPy kernels below are written from mediapipe's C++ kernels
(mediapipe/util/tflite/operations/{landmarks_to_transform_matrix,transform_tensor_bilinear,
transform_landmarks}.cc, version 2), in float32 and in their order of operations; they share no
code with tir's importer, which decomposes the same operators into IR ops.

How the model is split: the custom operators are removed from a copy of the file, their outputs
become extra graph inputs and their inputs extra graph outputs. LiteRT runs the copy; the custom
operators are evaluated in file order on what it returned; their results are fed back and LiteRT
runs again, until no custom result changes (one more run than the depth of the custom
operators' chain: here three). The last run's original outputs are the reference.
"""
import os
import tempfile

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S
from ai_edge_litert.interpreter import Interpreter
from flatbuffers import flexbuffers

CUSTOM = ("Landmarks2TransformMatrix", "TransformTensorBilinear", "TransformLandmarks")
f32 = np.float32


def _mat4_mul(a, b):
    """Mediapipe's Mat4 `*=`: row-major, each entry summed left to right in float32."""
    r = np.zeros((4, 4), f32)
    for i in range(4):
        for j in range(4):
            s = f32(0)
            for k in range(4):
                s = f32(s + f32(a[i, k] * b[k, j]))
            r[i, j] = s
    return r


def landmarks_to_transform_matrix(opts, landmarks):
    data = landmarks.reshape(-1).astype(f32)
    idx = opts["subset_idxs"]
    pairs = [(idx[2 * i], idx[2 * i + 1]) for i in range(len(idx) // 2)]
    if len(idx) % 2:
        pairs.append((idx[-1], idx[-1]))
    li, ri = opts["left_rotation_idx"], opts["right_rotation_idx"]
    lx, ly = data[3 * li], data[3 * li + 1]
    rx, ry = data[3 * ri], data[3 * ri + 1]
    rotation = f32(f32(opts["target_rotation_radians"]) - f32(np.arctan2(f32(ry - ly), f32(rx - lx))))
    c, s = f32(np.cos(rotation)), f32(np.sin(rotation))
    pts = []
    for a, b in pairs:
        for i in (a, b):
            x, y = data[3 * i], data[3 * i + 1]
            # t_rotation * (x, y, 1): rows (c, -s, 0) and (s, c, 0).
            pts.append((f32(f32(f32(c * x) + f32(-s * y)) + f32(0)), f32(f32(f32(s * x) + f32(c * y)) + f32(0))))
    pts = np.array(pts, f32)
    mx, mn = pts.max(axis=0), pts.min(axis=0)
    crop_w, crop_h = f32(mx[0] - mn[0]), f32(mx[1] - mn[1])
    cx, cy = f32(f32(mn[0] + mx[0]) / f32(2)), f32(f32(mn[1] + mx[1]) / f32(2))
    ci, si = f32(np.cos(-rotation)), f32(np.sin(-rotation))
    crop_x = f32(f32(f32(ci * cx) + f32(-si * cy)) + f32(0))
    crop_y = f32(f32(f32(si * cx) + f32(ci * cy)) + f32(0))
    t = np.eye(4, dtype=f32)
    shift = np.eye(4, dtype=f32)
    shift[0, 3], shift[1, 3] = crop_x, crop_y
    t = _mat4_mul(t, shift)
    r = -rotation
    rot = np.eye(4, dtype=f32)
    rot[0, 0], rot[0, 1], rot[1, 0], rot[1, 1] = f32(np.cos(r)), f32(-np.sin(r)), f32(np.sin(r)), f32(np.cos(r))
    t = _mat4_mul(t, rot)
    oh, ow = opts["output_height"], opts["output_width"]
    scale = np.eye(4, dtype=f32)
    scale[0, 0] = f32(f32(f32(opts["scale_x"]) * crop_w) / f32(ow))
    scale[1, 1] = f32(f32(f32(opts["scale_y"]) * crop_h) / f32(oh))
    t = _mat4_mul(t, scale)
    shift2 = np.eye(4, dtype=f32)
    shift2[0, 3], shift2[1, 3] = f32(-1.0 * (ow / 2.0)), f32(-1.0 * (oh / 2.0))
    t = _mat4_mul(t, shift2)
    return t.reshape(1, 4, 4)


def _dot4(l, r):
    return f32(f32(f32(f32(l[0] * r[0]) + f32(l[1] * r[1])) + f32(l[2] * r[2])) + f32(l[3] * r[3]))


def transform_tensor_bilinear(x, matrix, out_shape):
    _, h, w, c = x.shape
    _, oh, ow, _ = out_shape
    m = matrix.reshape(-1).astype(f32)
    xt, yt = m[0:4].copy(), m[4:8].copy()
    # Mediapipe's half-pixel correction of the translation.
    xt[3] = f32(xt[3] + f32(f32(f32(xt[0] * f32(0.5)) + f32(xt[1] * f32(0.5))) - f32(0.5)))
    yt[3] = f32(yt[3] + f32(f32(f32(yt[0] * f32(0.5)) + f32(yt[1] * f32(0.5))) - f32(0.5)))
    img = x[0].astype(f32)
    out = np.zeros((1, oh, ow, c), f32)

    def read(r, col):
        if r < 0 or col < 0 or r >= h or col >= w:
            return np.zeros(c, f32)
        return img[r, col]

    for oy in range(oh):
        for ox in range(ow):
            coord = (f32(ox), f32(oy), f32(0), f32(1))
            tx, ty = _dot4(xt, coord), _dot4(yt, coord)
            if tx < 0 or tx > w - 1 or ty < 0 or ty > h - 1:
                continue
            fx, fy = int(np.floor(tx)), int(np.floor(ty))
            q11, q21 = read(fy, fx), read(fy, fx + 1)
            q12, q22 = read(fy + 1, fx), read(fy + 1, fx + 1)
            right, lower = f32(tx - f32(fx)), f32(ty - f32(fy))
            upper_v = (f32(1) - right) * q11 + right * q21
            lower_v = (f32(1) - right) * q12 + right * q22
            out[0, oy, ox] = lower * lower_v + (f32(1) - lower) * upper_v
    return out


def transform_landmarks(landmarks, matrix):
    m = matrix.reshape(-1).astype(f32)
    xt, yt = m[0:4], m[4:8]
    out = landmarks.astype(f32).copy()
    for k in range(landmarks.shape[1]):
        lv = (out[0, k, 0], out[0, k, 1], f32(0), f32(1))
        out[0, k, 0], out[0, k, 1] = _dot4(xt, lv), _dot4(yt, lv)
    return out


def custom_ops(path):
    """The indices and names of the operators of subgraph 0 that are CUSTOM ones (empty when the
    model has none)."""
    m = S.ModelT.InitFromPackedBuf(bytearray(open(path, "rb").read()), 0)
    found = []
    for k, op in enumerate(m.subgraphs[0].operators):
        code = m.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) == S.BuiltinOperator.CUSTOM:
            name = code.customCode.decode()
            if name in CUSTOM:
                found.append((k, name))
    return found


def run(path, inputs, resolver, work=None):
    """The model's outputs with LiteRT (`resolver`) for the builtin operators and the NumPy
    kernels above for the custom ones."""
    m = S.ModelT.InitFromPackedBuf(bytearray(open(path, "rb").read()), 0)
    sg = m.subgraphs[0]
    customs = []
    for op in sg.operators:
        code = m.operatorCodes[op.opcodeIndex]
        name = code.customCode.decode() if code.customCode is not None else None
        if name in CUSTOM:
            if code.version != 2:
                raise RuntimeError(f"{name} version {code.version}: the reference has version 2 only")
            opts = flexbuffers.Loads(bytes(op.customOptions)) if op.customOptions is not None else {}
            customs.append((name, opts, [int(i) for i in op.inputs], [int(o) for o in op.outputs]))
    produced = {o for _, _, _, outs in customs for o in outs}
    orig_in, orig_out = [int(i) for i in sg.inputs], [int(o) for o in sg.outputs]
    extra_in = [o for _, _, _, outs in customs for o in outs]
    extra_out = []
    for _, _, ins, _ in customs:
        for i in ins:
            if i not in produced and i not in orig_in and i not in extra_out and sg.tensors[i].buffer == 0:
                extra_out.append(i)
    sg.operators = [op for op in sg.operators
                    if m.operatorCodes[op.opcodeIndex].customCode is None
                    or m.operatorCodes[op.opcodeIndex].customCode.decode() not in CUSTOM]
    sg.inputs = orig_in + extra_in
    sg.outputs = orig_out + extra_out
    b = flatbuffers.Builder(1 << 20)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    fd, split = tempfile.mkstemp(suffix=".tflite", dir=work)
    with os.fdopen(fd, "wb") as f:
        f.write(b.Output())
    try:
        it = Interpreter(model_path=split, experimental_op_resolver_type=resolver, num_threads=1)
        it.allocate_tensors()
    finally:
        os.unlink(split)
    ind, outd = it.get_input_details(), it.get_output_details()
    shape = {o: tuple(int(d) for d in sg.tensors[o].shape) for o in extra_in}
    values = {o: np.zeros(shape[o], f32) for o in extra_in}

    def const(t):
        buf = m.buffers[sg.tensors[t].buffer].data
        return np.frombuffer(bytes(buf), f32).reshape(tuple(sg.tensors[t].shape))

    for _ in range(len(customs) + 2):
        for d, x in zip(ind, list(inputs) + [values[o] for o in extra_in]):
            it.set_tensor(d["index"], x)
        it.invoke()
        got = [it.get_tensor(d["index"]) for d in outd]
        known = dict(zip(orig_out + extra_out, got))
        known.update(zip(orig_in, inputs))
        changed = False
        for name, opts, ins, outs in customs:
            args = []
            for i in ins:
                args.append(values[i] if i in values else known[i] if i in known else const(i))
            if name == "Landmarks2TransformMatrix":
                y = landmarks_to_transform_matrix(opts, args[0])
            elif name == "TransformTensorBilinear":
                y = transform_tensor_bilinear(args[0], args[1], shape[outs[0]])
            else:
                y = transform_landmarks(args[0], args[1])
            y = y.reshape(shape[outs[0]]).astype(f32)
            changed |= not np.array_equal(y, values[outs[0]])
            values[outs[0]] = y
        if not changed:
            return got[: len(orig_out)]
    raise RuntimeError("the custom operators' results did not settle")
