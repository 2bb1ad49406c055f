//! Mediapipe's custom operators of face_landmark_with_attention (version 2), imported and run
//! on tir's interpreter, against their C++ kernels (mediapipe/util/tflite/operations/*.cc)
//! written out here in f32: the box of rotated landmarks, the half-pixel-corrected bilinear
//! read that is zero outside the image, the affine map of landmarks.

mod common;

use common::*;
use tir_tflite::schema::BuiltinOperator as B;

const L2TM: &str = "Landmarks2TransformMatrix";
const TTB: &str = "TransformTensorBilinear";
const TL: &str = "TransformLandmarks";

fn custom(m: &mut Spec, name: &str, options: Option<Vec<u8>>, ins: &[i32], outs: &[i32]) {
    m.ops.push(OpSpec {
        code: B::CUSTOM,
        custom: Some(name.into()),
        custom_options: options,
        inputs: ins.to_vec(),
        outputs: outs.to_vec(),
        opts: Opts::None,
    });
    if !m.custom_versions.iter().any(|(n, _)| n == name) {
        m.custom_versions.push((name.into(), 2));
    }
}

struct L2tmOptions {
    left: i32,
    right: i32,
    target: f32,
    out: [i32; 2],
    scale: [f32; 2],
    subset: Vec<i32>,
}

fn l2tm_options(o: &L2tmOptions) -> Vec<u8> {
    let mut b = flexbuffers::Builder::default();
    let mut m = b.start_map();
    m.push("left_rotation_idx", o.left);
    m.push("output_height", o.out[0]);
    m.push("output_width", o.out[1]);
    m.push("right_rotation_idx", o.right);
    m.push("scale_x", o.scale[0]);
    m.push("scale_y", o.scale[1]);
    let mut v = m.start_vector("subset_idxs");
    for &i in &o.subset {
        v.push(i);
    }
    v.end_vector();
    m.push("target_rotation_radians", o.target);
    m.end_map();
    b.view().to_vec()
}

fn mat4_mul(a: &[f32; 16], b: &[f32; 16]) -> [f32; 16] {
    let mut r = [0f32; 16];
    for i in 0..4 {
        for j in 0..4 {
            let mut s = 0f32;
            for k in 0..4 {
                s += a[i * 4 + k] * b[k * 4 + j];
            }
            r[i * 4 + j] = s;
        }
    }
    r
}

/// `LandmarksToTransformMatrixV2`.
fn l2tm_reference(o: &L2tmOptions, lm: &[f32]) -> Vec<f32> {
    let xy = |i: i32| (lm[3 * i as usize], lm[3 * i as usize + 1]);
    let ((lx, ly), (rx, ry)) = (xy(o.left), xy(o.right));
    let rot = o.target - (ry - ly).atan2(rx - lx);
    let (c, s) = (rot.cos(), rot.sin());
    let (mut lo, mut hi) = ([f32::MAX; 2], [f32::MIN; 2]);
    for &i in &o.subset {
        let (x, y) = xy(i);
        let p = [c * x - s * y, s * x + c * y];
        for k in 0..2 {
            lo[k] = lo[k].min(p[k]);
            hi[k] = hi[k].max(p[k]);
        }
    }
    let (w, h) = (hi[0] - lo[0], hi[1] - lo[1]);
    let (mx, my) = ((lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0);
    let (ci, si) = ((-rot).cos(), (-rot).sin());
    let (cx, cy) = (ci * mx - si * my, si * mx + ci * my);
    let id = |m: &mut [f32; 16]| {
        for i in 0..4 {
            m[i * 5] = 1.0;
        }
    };
    let mut shift = [0f32; 16];
    id(&mut shift);
    shift[3] = cx;
    shift[7] = cy;
    let r = -rot;
    let mut rm = [0f32; 16];
    id(&mut rm);
    rm[0] = r.cos();
    rm[1] = -r.sin();
    rm[4] = r.sin();
    rm[5] = r.cos();
    let mut sc = [0f32; 16];
    id(&mut sc);
    sc[0] = o.scale[0] * w / o.out[1] as f32;
    sc[5] = o.scale[1] * h / o.out[0] as f32;
    let mut shift2 = [0f32; 16];
    id(&mut shift2);
    shift2[3] = -(o.out[1] as f32 / 2.0);
    shift2[7] = -(o.out[0] as f32 / 2.0);
    let t = mat4_mul(&mat4_mul(&mat4_mul(&shift, &rm), &sc), &shift2);
    t.to_vec()
}

#[test]
fn landmarks_to_transform_matrix_matches_mediapipe() {
    let cases = [
        // The model's shape of options: no target rotation, scale 1.5, an odd subset.
        L2tmOptions {
            left: 1,
            right: 4,
            target: 0.0,
            out: [16, 16],
            scale: [1.5, 1.5],
            subset: vec![0, 2, 3, 5, 6, 7, 9],
        },
        // A target rotation, unequal output sides and scales.
        L2tmOptions {
            left: 8,
            right: 0,
            target: 0.7,
            out: [12, 20],
            scale: [1.2, 2.0],
            subset: vec![1, 2, 4, 8],
        },
    ];
    for (k, o) in cases.iter().enumerate() {
        let n = 10;
        let lm: Vec<f32> = values(n * 3, 70 + k as u64)
            .into_iter()
            .map(|v| 20.0 + 15.0 * v)
            .collect();
        let mut m = Spec::default();
        let tl = m.input("landmarks", &[1, n as i32, 3]);
        let tm = m.act("matrix", &[1, 4, 4]);
        custom(&mut m, L2TM, Some(l2tm_options(o)), &[tl], &[tm]);
        m.outputs.push(tm);
        let got = run_tir(&m.build(), &[(vec![1, n as u64, 3], lm.clone())]);
        assert_eq!(got[0].0, [1, 4, 4]);
        let want = l2tm_reference(o, &lm);
        for (i, (g, w)) in got[0].1.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                "case {k} entry {i}: tir {g}, mediapipe {w}"
            );
        }
    }
}

/// `TransformTensorBilinearV2`.
fn ttb_reference(x: &Nhwc, m: &[f32], out: [usize; 2]) -> Vec<f32> {
    let [_, h, w, c] = x.shape;
    let mut xt = [m[0], m[1], m[2], m[3]];
    let mut yt = [m[4], m[5], m[6], m[7]];
    xt[3] += xt[0] * 0.5 + xt[1] * 0.5 - 0.5;
    yt[3] += yt[0] * 0.5 + yt[1] * 0.5 - 0.5;
    let mut y = vec![0f32; out[0] * out[1] * c];
    for oy in 0..out[0] {
        for ox in 0..out[1] {
            let p = [ox as f32, oy as f32, 0.0, 1.0];
            let dot = |t: &[f32; 4]| t[0] * p[0] + t[1] * p[1] + t[2] * p[2] + t[3] * p[3];
            let (tx, ty) = (dot(&xt), dot(&yt));
            if tx < 0.0 || tx > (w - 1) as f32 || ty < 0.0 || ty > (h - 1) as f32 {
                continue;
            }
            let (fx, fy) = (tx.floor(), ty.floor());
            let read = |r: f32, col: f32, ch: usize| -> f32 {
                if r < 0.0 || col < 0.0 || r >= h as f32 || col >= w as f32 {
                    0.0
                } else {
                    x.at(0, r as usize, col as usize, ch)
                }
            };
            for ch in 0..c {
                let (q11, q21) = (read(fy, fx, ch), read(fy, fx + 1.0, ch));
                let (q12, q22) = (read(fy + 1.0, fx, ch), read(fy + 1.0, fx + 1.0, ch));
                let (rc, lc) = (tx - fx, ty - fy);
                let upper = (1.0 - rc) * q11 + rc * q21;
                let lower = (1.0 - rc) * q12 + rc * q22;
                y[(oy * out[1] + ox) * c + ch] = lc * lower + (1.0 - lc) * upper;
            }
        }
    }
    y
}

#[test]
fn transform_tensor_bilinear_matches_mediapipe_inside_and_outside_the_image() {
    let (h, w, c) = (7, 9, 3);
    let out = [6, 5];
    // Rotated, scaled and shifted so that some output pixels fall outside the image (zero) and
    // some land exactly on its last row and column.
    let (a, s) = (0.4f32.cos() * 1.3, 0.4f32.sin() * 1.3);
    let matrices: [[f32; 16]; 2] = [
        [
            a, -s, 0.0, 2.0, s, a, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
        ],
        [
            1.5, 0.0, 0.0, 1.75, 0.0, 1.2, 0.0, 0.9, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
        ],
    ];
    for (k, mat) in matrices.iter().enumerate() {
        let x = values(h * w * c, 80 + k as u64);
        let mut b = flexbuffers::Builder::default();
        let mut mb = b.start_map();
        mb.push("output_height", out[0] as i32);
        mb.push("output_width", out[1] as i32);
        mb.end_map();
        let mut m = Spec::default();
        let tx = m.input("x", &[1, h as i32, w as i32, c as i32]);
        let tm = m.input("matrix", &[1, 4, 4]);
        let ty = m.act("crop", &[1, out[0] as i32, out[1] as i32, c as i32]);
        custom(&mut m, TTB, Some(b.view().to_vec()), &[tx, tm], &[ty]);
        m.outputs.push(ty);
        let got = run_tir(
            &m.build(),
            &[
                (vec![1, h as u64, w as u64, c as u64], x.clone()),
                (vec![1, 4, 4], mat.to_vec()),
            ],
        );
        let want = ttb_reference(&Nhwc::new([1, h, w, c], x), mat, out);
        assert!(want.contains(&0.0) && want.iter().any(|&v| v != 0.0));
        assert_eq!(got[0].0, [1, out[0] as u64, out[1] as u64, c as u64]);
        assert_close(&got[0].1, &want);
    }
}

#[test]
fn transform_landmarks_maps_xy_and_keeps_z() {
    let mat: Vec<f32> = vec![
        0.9, -0.3, 0.5, 4.0, 0.2, 1.1, -0.7, -2.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    ];
    for d in [2usize, 3] {
        let k = 6;
        let lm = values(k * d, 90 + d as u64);
        let mut m = Spec::default();
        let tl = m.input("landmarks", &[1, k as i32, d as i32]);
        let tm = m.input("matrix", &[1, 4, 4]);
        let ty = m.act("moved", &[1, k as i32, d as i32]);
        custom(&mut m, TL, None, &[tl, tm], &[ty]);
        m.outputs.push(ty);
        let got = run_tir(
            &m.build(),
            &[
                (vec![1, k as u64, d as u64], lm.clone()),
                (vec![1, 4, 4], mat.clone()),
            ],
        );
        let mut want = lm.clone();
        for i in 0..k {
            let (x, y) = (lm[i * d], lm[i * d + 1]);
            want[i * d] = mat[0] * x + mat[1] * y + mat[2] * 0.0 + mat[3];
            want[i * d + 1] = mat[4] * x + mat[5] * y + mat[6] * 0.0 + mat[7];
        }
        assert_close(&got[0].1, &want);
    }
}

#[test]
fn mediapipe_ops_of_another_version_or_without_options_are_refused() {
    let mut m = Spec::default();
    let tl = m.input("landmarks", &[1, 4, 2]);
    let tm = m.input("matrix", &[1, 4, 4]);
    let ty = m.act("moved", &[1, 4, 2]);
    custom(&mut m, TL, None, &[tl, tm], &[ty]);
    m.custom_versions[0].1 = 1;
    m.outputs.push(ty);
    assert_eq!(
        refusal(&m.build()),
        "operator 0 (CUSTOM(TransformLandmarks)): version 1 of mediapipe's `TransformLandmarks` is not supported (version 2 is)"
    );
    let mut m = Spec::default();
    let tl = m.input("landmarks", &[1, 4, 3]);
    let tm = m.act("matrix", &[1, 4, 4]);
    custom(&mut m, L2TM, None, &[tl], &[tm]);
    m.outputs.push(tm);
    let msg = refusal(&m.build());
    assert!(
        msg.contains("the custom options are not a FlexBuffers map"),
        "{msg}"
    );
}
