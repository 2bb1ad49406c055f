//! The element-wise math functions beyond the activations: the unary ones (`abs` … `sign`)
//! and the binary `pow`, `max`, `min`, as scalar or vector LLVM values inside the loop nests of
//! [`super::elementwise`]. LLVM intrinsics where one exists (they vectorise or become libm
//! calls per lane), the C library's `erff` and `powf` otherwise.

use crate::nest::{llvm, K, R};
use crate::CodegenError;
use inkwell::values::{BasicMetadataValueEnum, FloatValue};
use inkwell::FloatPredicate;
use tir_ir::{BinaryOp, UnaryOp};

/// One of the unary functions this module owns; the activations stay in `elementwise`.
pub(crate) fn unary<'a, 'c>(k: &K<'a, 'c>, u: UnaryOp, x: FloatValue<'c>) -> R<FloatValue<'c>> {
    let one = x.get_type().const_float(1.0);
    match u {
        UnaryOp::Abs => intrinsic(k, "llvm.fabs", &[x]),
        UnaryOp::Neg => llvm(k.b.build_float_neg(x, "neg")),
        UnaryOp::Sqrt => k.sqrt(x),
        UnaryOp::Reciprocal => k.fdiv(one, x),
        UnaryOp::Log => intrinsic(k, "llvm.log", &[x]),
        UnaryOp::Floor => intrinsic(k, "llvm.floor", &[x]),
        UnaryOp::Ceil => intrinsic(k, "llvm.ceil", &[x]),
        UnaryOp::Round => intrinsic(k, "llvm.roundeven", &[x]),
        UnaryOp::Erf => libm(k, "erff", &[x]),
        UnaryOp::Sin => intrinsic(k, "llvm.sin", &[x]),
        UnaryOp::Cos => intrinsic(k, "llvm.cos", &[x]),
        UnaryOp::Softplus => {
            // ln(1 + e^x) in f64, as the reference computes it.
            let d = k.ctx.f64_type();
            let xd = llvm(k.b.build_float_ext(x, d, "xd"))?;
            let e = k.exp_libm(xd)?;
            let s = intrinsic(k, "llvm.log", &[k.fadd(d.const_float(1.0), e)?])?;
            llvm(k.b.build_float_trunc(s, k.f32t, "sp"))
        }
        UnaryOp::Softsign => {
            let a = intrinsic(k, "llvm.fabs", &[x])?;
            k.fdiv(x, k.fadd(one, a)?)
        }
        // The C library's, as the interpreter's `f32` methods call them.
        UnaryOp::Tan => libm(k, "tanf", &[x]),
        UnaryOp::Asin => libm(k, "asinf", &[x]),
        UnaryOp::Acos => libm(k, "acosf", &[x]),
        UnaryOp::Atan => libm(k, "atanf", &[x]),
        UnaryOp::Sinh => libm(k, "sinhf", &[x]),
        UnaryOp::Cosh => libm(k, "coshf", &[x]),
        UnaryOp::Asinh => libm(k, "asinhf", &[x]),
        UnaryOp::Acosh => libm(k, "acoshf", &[x]),
        UnaryOp::Atanh => libm(k, "atanhf", &[x]),
        UnaryOp::Sign => {
            // 1 above zero, -1 below, `x` itself for ±0 and NaN (both compares false).
            let pos = llvm(k.b.build_float_compare(
                FloatPredicate::OGT,
                x,
                x.get_type().const_zero(),
                "pos",
            ))?;
            let neg = llvm(k.b.build_float_compare(
                FloatPredicate::OLT,
                x,
                x.get_type().const_zero(),
                "negv",
            ))?;
            let m = k.fsel(neg, x.get_type().const_float(-1.0), x)?;
            k.fsel(pos, one, m)
        }
        UnaryOp::Relu
        | UnaryOp::Relu6
        | UnaryOp::Sigmoid
        | UnaryOp::Tanh
        | UnaryOp::HardSwish
        | UnaryOp::Gelu
        | UnaryOp::Exp => Err(CodegenError::Llvm(format!(
            "{} is an activation of the elementwise kernels, not a math function",
            u.name()
        ))),
    }
}

/// `pow`, `max`, `min`; `max` and `min` return NaN when either operand is NaN, as the
/// reference does (`llvm.maximum` / `llvm.minimum`).
pub(crate) fn binary<'a, 'c>(
    k: &K<'a, 'c>,
    op: BinaryOp,
    a: FloatValue<'c>,
    b: FloatValue<'c>,
) -> R<FloatValue<'c>> {
    match op {
        BinaryOp::Pow => libm(k, "powf", &[a, b]),
        BinaryOp::Max | BinaryOp::Min => {
            // Compare-and-select rather than llvm.maximum, which not every backend lowers.
            let pred = if op == BinaryOp::Max {
                FloatPredicate::OGT
            } else {
                FloatPredicate::OLT
            };
            let pick = llvm(k.b.build_float_compare(pred, a, b, "pick"))?;
            let m = k.fsel(pick, a, b)?;
            // NaN in `a` (unordered with itself) wins; a NaN `b` is picked above already.
            let a_nan = llvm(k.b.build_float_compare(FloatPredicate::UNO, a, a, "nan"))?;
            k.fsel(a_nan, a, m)
        }
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => Err(CodegenError::Llvm(
            format!("{} is arithmetic of the elementwise kernels", op.name()),
        )),
    }
}

fn intrinsic<'a, 'c>(k: &K<'a, 'c>, name: &str, args: &[FloatValue<'c>]) -> R<FloatValue<'c>> {
    let f = k.intrinsic(name, &[args[0].get_type().into()])?;
    call(k, f, args)
}

/// A C library function of f32 arguments, declared on first use (scalar values only: the
/// strided kernels call these per element).
fn libm<'a, 'c>(k: &K<'a, 'c>, name: &str, args: &[FloatValue<'c>]) -> R<FloatValue<'c>> {
    let f = match k.module.get_function(name) {
        Some(f) => f,
        None => {
            let params: Vec<_> = args.iter().map(|_| k.f32t.into()).collect();
            k.module
                .add_function(name, k.f32t.fn_type(&params, false), None)
        }
    };
    call(k, f, args)
}

fn call<'a, 'c>(
    k: &K<'a, 'c>,
    f: inkwell::values::FunctionValue<'c>,
    args: &[FloatValue<'c>],
) -> R<FloatValue<'c>> {
    let args: Vec<BasicMetadataValueEnum> = args.iter().map(|&a| a.into()).collect();
    llvm(k.b.build_call(f, &args, "m"))?
        .try_as_basic_value()
        .basic()
        .map(|v| v.into_float_value())
        .ok_or_else(|| CodegenError::Llvm("call returned no value".into()))
}
