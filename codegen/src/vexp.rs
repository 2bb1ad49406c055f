//! An inline, vectorisable `exp` for the element-wise kernels.
//!
//! `llvm.exp.f32` lowers to a scalar `expf` call that the loop vectoriser cannot widen, so
//! sigmoid, swish, softmax, gelu and elu loops stayed scalar (efficientnet_b0 spent ~84% of
//! its time in `sigmoid`). This is Cephes' `expf` (S. L. Moshier, Cephes Math Library,
//! `expf.c`) written out as straight-line LLVM IR — compares and selects, no calls, no
//! branches — so `default<O3>` vectorises it at the target's width:
//!
//! 1. range reduction `x = n·ln2 + r`, `n = round(x·log2 e)` (the 1.5·2^23 "magic number"
//!    rounding, which also yields `n` in the low mantissa bits without a float→int convert),
//!    `r = x − n·C1 − n·C2` with ln2 split in two (Cody–Waite) so `n·C1` is exact;
//! 2. `e^r ≈ 1 + r + r²·P(r)`, Cephes' degree-5 minimax `P` on |r| ≤ ln2/2
//!    (relative error ≈ 1 ulp);
//! 3. scaling by `2^n` through the exponent bits, in two halves `2^⌊n/2⌋·2^(n−⌊n/2⌋)` so
//!    both factors stay normal and results in the subnormal range round like `expf`;
//! 4. `x > ln(FLT_MAX)` gives +inf, `x` below the smallest subnormal's log gives 0, NaN
//!    passes through.
use crate::nest::{llvm, K, R};
use inkwell::values::{FloatValue, IntValue};
use inkwell::FloatPredicate;

/// ln(FLT_MAX): above it `expf` overflows to +inf.
const EXP_HI: f64 = 88.722_839_355_468_75;
/// Below this `expf` underflows to 0 (half the smallest subnormal, 2^-150, rounds to 0).
const EXP_LO: f64 = -103.972_084_045_410_16;
/// 1.5·2^23: adding it rounds a float of magnitude < 2^22 to an integer (round to nearest).
const MAGIC: f64 = 12_582_912.0;
/// Cody–Waite split of ln 2 (Cephes `expf.c`): C1 has few mantissa bits so `n·C1` is exact.
const C1: f64 = 0.693_359_375;
const C2: f64 = -2.121_944_400_546_906e-4;
/// Cephes `expf.c` minimax coefficients of `P`, highest degree first.
const P: [f64; 6] = [
    1.987_569_150_0e-4,
    1.398_199_950_7e-3,
    8.333_451_907_3e-3,
    4.166_579_589_4e-2,
    1.666_666_545_9e-1,
    5.000_000_120_1e-1,
];

impl<'a, 'ctx> K<'a, 'ctx> {
    /// `e^x` as straight-line IR (see the module comment); matches `f32::exp` to a few ulp.
    /// Other float types (gelu's f64) keep `llvm.exp`.
    pub fn exp(&self, x: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
        if x.get_type() != self.f32t {
            return self.exp_libm(x);
        }
        let i32t = self.ctx.i32_type();
        // Clamp into the range where the reduction is exact; the selects at the end give the
        // overflow/underflow/NaN results. A NaN goes through the clamp unchanged.
        let xc = self.clip(x, EXP_LO, EXP_HI)?;
        let log2e = self.f(std::f64::consts::LOG2_E);
        let t = self.fma(xc, log2e, self.f(MAGIC))?;
        let nf = self.fsub(t, self.f(MAGIC))?;
        let r = self.fma(nf, self.f(-C1), xc)?;
        let r = self.fma(nf, self.f(-C2), r)?;
        let mut p = self.f(P[0]);
        for &c in &P[1..] {
            p = self.fma(p, r, self.f(c))?;
        }
        let r2 = self.fmul(r, r)?;
        let y = self.fma(p, r2, r)?;
        let y = self.fadd(y, self.f(1.0))?;
        // n = bits(t) − bits(MAGIC): the integer sits in the low mantissa bits of t.
        let tb = llvm(self.b.build_bit_cast(t, i32t, "tb"))?.into_int_value();
        let mb = i32t.const_int((MAGIC as f32).to_bits() as u64, false);
        let n = llvm(self.b.build_int_sub(tb, mb, "n"))?;
        let n1 = llvm(
            self.b
                .build_right_shift(n, i32t.const_int(1, false), true, "n1"),
        )?;
        let n2 = llvm(self.b.build_int_sub(n, n1, "n2"))?;
        let y = self.fmul(y, self.pow2(n1)?)?;
        let y = self.fmul(y, self.pow2(n2)?)?;
        let inf = self.f(f64::INFINITY);
        let y = self.select_gt(x, self.f(EXP_HI), inf, y)?;
        let y = self.select_lt(x, self.f(EXP_LO), self.f(0.0), y)?;
        let nan = llvm(
            self.b
                .build_float_compare(FloatPredicate::UNO, x, x, "isnan"),
        )?;
        Ok(llvm(self.b.build_select(nan, x, y, "exp"))?.into_float_value())
    }

    /// `2^k` for `k` in the normal exponent range [-126, 127], built from its exponent bits.
    fn pow2(&self, k: IntValue<'ctx>) -> R<FloatValue<'ctx>> {
        let i32t = self.ctx.i32_type();
        let e = llvm(self.b.build_int_add(k, i32t.const_int(127, false), "e"))?;
        let bits = llvm(
            self.b
                .build_left_shift(e, i32t.const_int(23, false), "bits"),
        )?;
        Ok(llvm(self.b.build_bit_cast(bits, self.f32t, "p2"))?.into_float_value())
    }
}
