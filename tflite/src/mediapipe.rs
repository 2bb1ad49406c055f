//! Mediapipe's custom operators of face_landmark_with_attention (mediapipe's
//! `util/tflite/operations/*.cc`, version 2 of each), decomposed at import into IR ops:
//!
//! - `Landmarks2TransformMatrix`: the 4×4 affine matrix mapping a crop's pixels to the feature
//!   map, from two landmarks (the rotation) and a subset of landmarks (the crop's box in the
//!   rotated frame, scaled). The landmarks are picked by a matmul with a constant one-hot matrix
//!   (exact: one product by 1, the rest by 0); the rotation's cosine and sine are the
//!   normalised difference of the two landmarks (what `atan2` followed by `cos`/`sin` gives,
//!   without either); min and max are reductions; the matrix is a concat of its entries.
//! - `TransformTensorBilinear`: the matrix's first two rows applied to every output pixel's
//!   centre (a matmul with a constant coordinate grid) give source positions, `grid_sample`
//!   reads them bilinearly, and a position outside `[0, W - 1] × [0, H - 1]` gives zero, as
//!   mediapipe's kernel does (`grid_sample`'s own zero padding would blend the border in).
//! - `TransformLandmarks`: `(x, y) → A·(x, y) + t` of the matrix's upper-left 2×2 and its last
//!   column, a matmul and an add (a third coordinate passes through).

use super::{Importer, R};
use crate::schema;
use flexbuffers::{FlexBufferType, MapReader, Reader};
use tir_ir::op::{BinaryOp, GridPadding, GridSample, SampleMode, Slice, UnaryOp};
use tir_ir::{CompareOp, LogicalOp, Op, ReduceKind, Value};

pub(super) const LANDMARKS_TO_MATRIX: &str = "Landmarks2TransformMatrix";
pub(super) const TRANSFORM_TENSOR: &str = "TransformTensorBilinear";
pub(super) const TRANSFORM_LANDMARKS: &str = "TransformLandmarks";

/// The custom options: a FlexBuffers map (what mediapipe's parsers read).
struct Options<'b> {
    map: MapReader<&'b [u8]>,
}

impl<'b> Options<'b> {
    fn of(op: &schema::Operator<'b>) -> R<Self> {
        let bytes = op.custom_options().map(|v| v.bytes()).unwrap_or_default();
        let root = Reader::get_root(bytes)
            .map_err(|e| format!("the custom options are not a FlexBuffers map: {e}"))?;
        if root.flexbuffer_type() != FlexBufferType::Map {
            return Err(format!(
                "the custom options are a FlexBuffers {:?}, not a map",
                root.flexbuffer_type()
            ));
        }
        Ok(Options { map: root.as_map() })
    }

    fn get(&self, key: &str) -> R<Reader<&'b [u8]>> {
        self.map
            .index(key)
            .map_err(|_| format!("the custom options have no `{key}`"))
    }

    fn int(&self, key: &str) -> R<i64> {
        let r = self.get(key)?;
        if !(r.flexbuffer_type().is_int() || r.flexbuffer_type().is_uint()) {
            return Err(format!("the custom option `{key}` is not an integer"));
        }
        Ok(r.as_i64())
    }

    fn float(&self, key: &str) -> R<f32> {
        let r = self.get(key)?;
        let t = r.flexbuffer_type();
        if !(t.is_float() || t.is_int() || t.is_uint()) {
            return Err(format!("the custom option `{key}` is not a number"));
        }
        Ok(r.as_f64() as f32)
    }

    fn ints(&self, key: &str) -> R<Vec<i64>> {
        let r = self.get(key)?;
        if !r.flexbuffer_type().is_vector() {
            return Err(format!("the custom option `{key}` is not a vector"));
        }
        Ok(r.as_vector().iter().map(|e| e.as_i64()).collect())
    }
}

/// A slice of `v` along `axes` (one range per axis).
fn slice_op(axes: &[i64], ranges: &[(i64, i64)]) -> Op {
    Op::Slice(Slice {
        starts: ranges.iter().map(|r| r.0).collect(),
        ends: ranges.iter().map(|r| r.1).collect(),
        axes: axes.to_vec(),
        steps: vec![1; axes.len()],
    })
}

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: None,
    }
}

impl<'a> Importer<'a> {
    fn version(&self, op: &schema::Operator) -> R<i32> {
        let codes = self
            .model
            .operator_codes()
            .ok_or_else(|| "the model has no operator codes".to_string())?;
        Ok(codes.get(op.opcode_index() as usize).version())
    }

    fn mp_slice(&mut self, v: Value, axes: &[i64], ranges: &[(i64, i64)]) -> R<Value> {
        self.em.push1(slice_op(axes, ranges), &[v])
    }

    fn mp_bin(&mut self, op: BinaryOp, a: Value, b: Value) -> R<Value> {
        self.em.push1(bin(op), &[a, b])
    }

    /// A `[1, 1, 1]` constant.
    fn mp_scalar(&mut self, hint: &str, x: f32) -> Value {
        self.weight(hint, vec![1, 1, 1], &[x])
    }

    /// One of mediapipe's custom operators (`custom`), version 2.
    pub(super) fn mediapipe_op(
        &mut self,
        op: &schema::Operator<'a>,
        custom: &str,
        ins: &[usize],
        out: usize,
    ) -> R<()> {
        let version = self.version(op)?;
        if version != 2 {
            return Err(format!(
                "version {version} of mediapipe's `{custom}` is not supported (version 2 is)"
            ));
        }
        let want = if custom == LANDMARKS_TO_MATRIX { 1 } else { 2 };
        if ins.len() != want {
            return Err(format!("`{custom}` takes {want} inputs, got {}", ins.len()));
        }
        match custom {
            LANDMARKS_TO_MATRIX => self.landmarks_to_matrix(op, ins[0], out),
            TRANSFORM_TENSOR => self.transform_tensor(ins[0], ins[1], out),
            _ => self.transform_landmarks(ins[0], ins[1], out),
        }
    }

    /// The `[1, 4, 4]` matrix input of the transforms, checked.
    fn matrix_input(&mut self, t: usize) -> R<Value> {
        let s = self.shape_of(t)?;
        if s != [1, 4, 4] {
            return Err(format!(
                "the matrix {} has shape {s:?}, not [1, 4, 4]",
                self.describe(t)
            ));
        }
        Ok(self.value(t, Some(false))?.0)
    }

    fn landmarks_to_matrix(&mut self, op: &schema::Operator<'a>, lt: usize, out: usize) -> R<()> {
        let o = Options::of(op)?;
        let (li, ri) = (o.int("left_rotation_idx")?, o.int("right_rotation_idx")?);
        let target = o.float("target_rotation_radians")?;
        let (oh, ow) = (o.int("output_height")?, o.int("output_width")?);
        let (scale_x, scale_y) = (o.float("scale_x")?, o.float("scale_y")?);
        let subset = o.ints("subset_idxs")?;
        let ls = self.shape_of(lt)?;
        // Mediapipe reads landmark i at `data[3 i]`: the landmarks are [1, N, 3].
        if ls.len() != 3 || ls[0] != 1 || ls[2] != 3 {
            return Err(format!(
                "the landmarks {} have shape {ls:?}, not [1, N, 3]",
                self.describe(lt)
            ));
        }
        let n = ls[1] as i64;
        if oh <= 0 || ow <= 0 {
            return Err(format!("output size {oh}×{ow} is not positive"));
        }
        if scale_x.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
            || scale_y.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
        {
            return Err(format!("scale ({scale_x}, {scale_y}) is not positive"));
        }
        // Mediapipe reads pairs (an odd last index pairs with itself); only the set of
        // landmarks matters to the box.
        if subset.is_empty() {
            return Err("subset_idxs is empty".into());
        }
        let picks: Vec<i64> = [li, ri].iter().chain(&subset).copied().collect();
        if let Some(bad) = picks.iter().find(|&&i| i < 0 || i >= n) {
            return Err(format!("landmark index {bad} is outside the {n} landmarks"));
        }
        let name = self.tname(out);
        let l = self.value(lt, Some(false))?.0;
        // Rows: left, right, then the subset; one 1 per row.
        let m = picks.len();
        let mut onehot = vec![0f32; m * n as usize];
        for (r, &i) in picks.iter().enumerate() {
            onehot[r * n as usize + i as usize] = 1.0;
        }
        let sel = self.weight(
            &format!("{name}_pick"),
            vec![1, m as u64, n as u64],
            &onehot,
        );
        let p = self.em.push1(Op::MatMul { activation: None }, &[sel, l])?;
        let xs = self.mp_slice(p, &[2], &[(0, 1)])?;
        let ys = self.mp_slice(p, &[2], &[(1, 2)])?;
        let at = |s: &mut Self, v: Value, a: i64, b: i64| s.mp_slice(v, &[1], &[(a, b)]);
        let (lx, rx) = (at(self, xs, 0, 1)?, at(self, xs, 1, 2)?);
        let (ly, ry) = (at(self, ys, 0, 1)?, at(self, ys, 1, 2)?);
        let dx = self.mp_bin(BinaryOp::Sub, rx, lx)?;
        let dy = self.mp_bin(BinaryOp::Sub, ry, ly)?;
        // θ = atan2(dy, dx): cos θ = dx / |d|, sin θ = dy / |d|; atan2(0, 0) = 0.
        let dx2 = self.mp_bin(BinaryOp::Mul, dx, dx)?;
        let dy2 = self.mp_bin(BinaryOp::Mul, dy, dy)?;
        let sq = self.mp_bin(BinaryOp::Add, dx2, dy2)?;
        let norm = self.em.push1(Op::Unary(UnaryOp::Sqrt), &[sq])?;
        let zero = self.mp_scalar(&format!("{name}_zero"), 0.0);
        let one = self.mp_scalar(&format!("{name}_one"), 1.0);
        let pos = self
            .em
            .push1(Op::Compare(CompareOp::Greater), &[norm, zero])?;
        let qc = self.mp_bin(BinaryOp::Div, dx, norm)?;
        let qs = self.mp_bin(BinaryOp::Div, dy, norm)?;
        let cos_t = self.em.push1(Op::Where, &[pos, qc, one])?;
        let sin_t = self.em.push1(Op::Where, &[pos, qs, zero])?;
        // r = target - θ: cos r = cos T cos θ + sin T sin θ, sin r = sin T cos θ - cos T sin θ.
        let (ct, st) = (target.cos(), target.sin());
        let kc = self.mp_scalar(&format!("{name}_cos_target"), ct);
        let ks = self.mp_scalar(&format!("{name}_sin_target"), st);
        let a = self.mp_bin(BinaryOp::Mul, cos_t, kc)?;
        let b = self.mp_bin(BinaryOp::Mul, sin_t, ks)?;
        let c = self.mp_bin(BinaryOp::Add, a, b)?;
        let a = self.mp_bin(BinaryOp::Mul, cos_t, ks)?;
        let b = self.mp_bin(BinaryOp::Mul, sin_t, kc)?;
        let s = self.mp_bin(BinaryOp::Sub, a, b)?;
        // The subset rotated by r: x' = c x - s y, y' = s x + c y; its box.
        let sx = at(self, xs, 2, m as i64)?;
        let sy = at(self, ys, 2, m as i64)?;
        let (cx_, sy_) = (
            self.mp_bin(BinaryOp::Mul, c, sx)?,
            self.mp_bin(BinaryOp::Mul, s, sy)?,
        );
        let xr = self.mp_bin(BinaryOp::Sub, cx_, sy_)?;
        let (sx_, cy_) = (
            self.mp_bin(BinaryOp::Mul, s, sx)?,
            self.mp_bin(BinaryOp::Mul, c, sy)?,
        );
        let yr = self.mp_bin(BinaryOp::Add, sx_, cy_)?;
        let reduce = |s: &mut Self, kind, v| {
            s.em.push1(
                Op::Reduce {
                    kind,
                    axes: vec![1],
                    keepdims: true,
                },
                &[v],
            )
        };
        let (max_x, min_x) = (
            reduce(self, ReduceKind::Max, xr)?,
            reduce(self, ReduceKind::Min, xr)?,
        );
        let (max_y, min_y) = (
            reduce(self, ReduceKind::Max, yr)?,
            reduce(self, ReduceKind::Min, yr)?,
        );
        let crop_w = self.mp_bin(BinaryOp::Sub, max_x, min_x)?;
        let crop_h = self.mp_bin(BinaryOp::Sub, max_y, min_y)?;
        let half = self.mp_scalar(&format!("{name}_half"), 0.5);
        let mx = self.mp_bin(BinaryOp::Add, min_x, max_x)?;
        let mx = self.mp_bin(BinaryOp::Mul, mx, half)?;
        let my = self.mp_bin(BinaryOp::Add, min_y, max_y)?;
        let my = self.mp_bin(BinaryOp::Mul, my, half)?;
        // The box's centre rotated back by -r: (c mx + s my, c my - s mx).
        let (a, b) = (
            self.mp_bin(BinaryOp::Mul, c, mx)?,
            self.mp_bin(BinaryOp::Mul, s, my)?,
        );
        let crop_x = self.mp_bin(BinaryOp::Add, a, b)?;
        let (a, b) = (
            self.mp_bin(BinaryOp::Mul, c, my)?,
            self.mp_bin(BinaryOp::Mul, s, mx)?,
        );
        let crop_y = self.mp_bin(BinaryOp::Sub, a, b)?;
        // shift(crop) · rot(-r) · scale(sx, sy) · shift(-ow / 2, -oh / 2).
        let kx = self.mp_scalar(&format!("{name}_scale_x"), scale_x / ow as f32);
        let ky = self.mp_scalar(&format!("{name}_scale_y"), scale_y / oh as f32);
        let scx = self.mp_bin(BinaryOp::Mul, crop_w, kx)?;
        let scy = self.mp_bin(BinaryOp::Mul, crop_h, ky)?;
        let a00 = self.mp_bin(BinaryOp::Mul, c, scx)?;
        let a01 = self.mp_bin(BinaryOp::Mul, s, scy)?;
        let s_sx = self.mp_bin(BinaryOp::Mul, s, scx)?;
        let a10 = self.em.push1(Op::Unary(UnaryOp::Neg), &[s_sx])?;
        let a11 = self.mp_bin(BinaryOp::Mul, c, scy)?;
        let hw = self.mp_scalar(&format!("{name}_half_width"), ow as f32 / 2.0);
        let hh = self.mp_scalar(&format!("{name}_half_height"), oh as f32 / 2.0);
        // t = crop - A · (ow / 2, oh / 2)
        let (p, q) = (
            self.mp_bin(BinaryOp::Mul, a00, hw)?,
            self.mp_bin(BinaryOp::Mul, a01, hh)?,
        );
        let pq = self.mp_bin(BinaryOp::Add, p, q)?;
        let tx = self.mp_bin(BinaryOp::Sub, crop_x, pq)?;
        let (p, q) = (
            self.mp_bin(BinaryOp::Mul, a10, hw)?,
            self.mp_bin(BinaryOp::Mul, a11, hh)?,
        );
        let pq = self.mp_bin(BinaryOp::Add, p, q)?;
        let ty = self.mp_bin(BinaryOp::Sub, crop_y, pq)?;
        let tail = self.weight(
            &format!("{name}_rows_2_3"),
            vec![1, 1, 8],
            &[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        );
        let row = self.em.push1(
            Op::Concat { axis: 2 },
            &[a00, a01, zero, tx, a10, a11, zero, ty, tail],
        )?;
        let v = self.result(out, Op::reshape(vec![1, 4, 4]), &[row])?;
        self.define(out, v, false)
    }

    fn transform_tensor(&mut self, xt: usize, mt: usize, out: usize) -> R<()> {
        let xs = self.shape_of(xt)?;
        let os = self.shape_of(out)?;
        if xs.len() != 4 || xs[0] != 1 || os.len() != 4 || os[0] != 1 || os[3] != xs[3] {
            return Err(format!(
                "the input {} has shape {xs:?} and the output {os:?}: expected [1, H, W, C] and [1, Ho, Wo, C]",
                self.describe(xt)
            ));
        }
        let (h, w) = (xs[1], xs[2]);
        let (oh, ow) = (os[1], os[2]);
        let name = self.tname(out);
        let m = self.matrix_input(mt)?;
        let x = self.value(xt, Some(true))?.0;
        // Source position of output pixel (ox, oy): rows 0 and 1 of the matrix applied to its
        // centre (ox + 0.5, oy + 0.5, 0, 1), less 0.5 (mediapipe's half-pixel correction).
        let mut centres = Vec::with_capacity((oh * ow * 4) as usize);
        for oy in 0..oh {
            for ox in 0..ow {
                centres.extend([ox as f32 + 0.5, oy as f32 + 0.5, 0.0, 1.0]);
            }
        }
        let base = self.weight(&format!("{name}_centres"), vec![1, oh * ow, 4], &centres);
        let rows = self.mp_slice(m, &[1], &[(0, 2)])?;
        let cols = self.em.push1(
            Op::Transpose {
                perm: vec![0, 2, 1],
            },
            &[rows],
        )?;
        let tc = self
            .em
            .push1(Op::MatMul { activation: None }, &[base, cols])?;
        let half = self.weight(&format!("{name}_half"), vec![1, 1, 1], &[0.5]);
        let tc = self.mp_bin(BinaryOp::Sub, tc, half)?;
        // Mediapipe's kernel gives zero for a position outside [0, W - 1] × [0, H - 1].
        let tx = self.mp_slice(tc, &[2], &[(0, 1)])?;
        let ty = self.mp_slice(tc, &[2], &[(1, 2)])?;
        let zero = self.weight(&format!("{name}_zero"), vec![1, 1, 1], &[0.0]);
        let wmax = self.weight(&format!("{name}_x_max"), vec![1, 1, 1], &[w as f32 - 1.0]);
        let hmax = self.weight(&format!("{name}_y_max"), vec![1, 1, 1], &[h as f32 - 1.0]);
        let cmp = |s: &mut Self, c, a, b| s.em.push1(Op::Compare(c), &[a, b]);
        let or = |s: &mut Self, a, b| s.em.push1(Op::Logical(LogicalOp::Or), &[a, b]);
        let x_lo = cmp(self, CompareOp::Less, tx, zero)?;
        let x_hi = cmp(self, CompareOp::Greater, tx, wmax)?;
        let y_lo = cmp(self, CompareOp::Less, ty, zero)?;
        let y_hi = cmp(self, CompareOp::Greater, ty, hmax)?;
        let ox_ = or(self, x_lo, x_hi)?;
        let oy_ = or(self, y_lo, y_hi)?;
        let outside = or(self, ox_, oy_)?;
        let outside = self
            .em
            .push1(Op::reshape(vec![1, 1, oh as i64, ow as i64]), &[outside])?;
        // Normalised for grid_sample without align_corners: g = (2 x + 1) / W - 1.
        let k = self.weight(
            &format!("{name}_grid_scale"),
            vec![1, 1, 2],
            &[2.0 / w as f32, 2.0 / h as f32],
        );
        let b = self.weight(
            &format!("{name}_grid_shift"),
            vec![1, 1, 2],
            &[1.0 / w as f32 - 1.0, 1.0 / h as f32 - 1.0],
        );
        let g = self.mp_bin(BinaryOp::Mul, tc, k)?;
        let g = self.mp_bin(BinaryOp::Add, g, b)?;
        let g = self
            .em
            .push1(Op::reshape(vec![1, oh as i64, ow as i64, 2]), &[g])?;
        let sampled = self.em.push1(
            Op::GridSample(GridSample {
                mode: SampleMode::Bilinear,
                padding: GridPadding::Zeros,
                align_corners: false,
            }),
            &[x, g],
        )?;
        let zero4 = self.weight(&format!("{name}_outside"), vec![1, 1, 1, 1], &[0.0]);
        let v = self.result(out, Op::Where, &[outside, zero4, sampled])?;
        self.define(out, v, true)
    }

    fn transform_landmarks(&mut self, lt: usize, mt: usize, out: usize) -> R<()> {
        let ls = self.shape_of(lt)?;
        if ls.len() != 3 || ls[0] != 1 || !(ls[2] == 2 || ls[2] == 3) {
            return Err(format!(
                "the landmarks {} have shape {ls:?}, not [1, N, 2] or [1, N, 3]",
                self.describe(lt)
            ));
        }
        let m = self.matrix_input(mt)?;
        let l = self.value(lt, Some(false))?.0;
        let a = self.mp_slice(m, &[1, 2], &[(0, 2), (0, 2)])?;
        let at = self.em.push1(
            Op::Transpose {
                perm: vec![0, 2, 1],
            },
            &[a],
        )?;
        let t = self.mp_slice(m, &[1, 2], &[(0, 2), (3, 4)])?;
        let t = self.em.push1(Op::reshape(vec![1, 1, 2]), &[t])?;
        let xy = if ls[2] == 2 {
            l
        } else {
            self.mp_slice(l, &[2], &[(0, 2)])?
        };
        let p = self.em.push1(Op::MatMul { activation: None }, &[xy, at])?;
        let v = if ls[2] == 2 {
            self.result(out, bin(BinaryOp::Add), &[p, t])?
        } else {
            let moved = self.mp_bin(BinaryOp::Add, p, t)?;
            let z = self.mp_slice(l, &[2], &[(2, 3)])?;
            self.result(out, Op::Concat { axis: 2 }, &[moved, z])?
        };
        self.define(out, v, false)
    }
}
