//! The executable around a compiled model: a C `main` (generated per model, so the input and
//! output names and shapes are constants; its body is `exe_main.c`) linked with the model's
//! object file by the system `cc`.
//!
//! `./OUT [--input NAME=FILE.npy ...] [--output DIR|FILE.npy] [--bench N] [--profile N]`:
//! allocates exactly one 64-byte aligned slab of the planned size, reads `.npy` inputs or
//! generates them with `tir_interp`'s rule (SplitMix64 seeded by FNV-1a of `input:NAME`, so
//! the interpreter's default inputs are the same numbers), writes one `NAME.npy` per output,
//! prints the slab size and with `--bench N` the median and minimum latency. `--profile N`
//! runs the model N times through `<model>_run_profiled` (see [`crate::profile`]) and prints
//! one row per op: its median time over the runs, share of the total, kind, result, shape and
//! GFLOP/s, then the time per kind.
//!
//! Hostile use is refused, never crashed on: a flag without its value, given twice, unknown,
//! or a count of runs that is not a whole number from 1 to 10^8 is a message and exit 2. An
//! `.npy` input follows `tir_interp::npy::read_input`'s policy, the one of `tirc run`: the same
//! files accepted (v1/v2/v3 headers, float32 of either byte order, C order, exactly the data
//! the header's shape says, the model's shape) and the same message for a refused one, naming
//! the file, the input, what was found and what was expected, exit 1. An output file appears
//! whole or not at all, and a failed write leaves nothing behind (written unnamed with
//! `O_TMPFILE`, then linked in).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use tir_ir::Function;

/// The C source of `main` for `func`, calling `<name>_run`.
pub fn main_c(func: &Function, name: &str) -> String {
    main_c_batched(func, name, None)
}

/// [`main_c`] for a function compiled at batch 1 whose leading dim `batch` is symbolic in the
/// model it comes from, independent along it (`tir_ir::batch`): the program takes any batch
/// from its input files and runs the function once per sample.
pub fn main_c_batched(func: &Function, name: &str, batch: Option<&str>) -> String {
    main_c_with(func, name, batch, "")
}

/// [`main_c_batched`] with `extra` C text placed after the model's tables and before the
/// body (a dynamic model's tables and functions, `crate::dynamic::main_c`).
pub(crate) fn main_c_with(func: &Function, name: &str, batch: Option<&str>, extra: &str) -> String {
    let mut s = String::new();
    if let Some(b) = batch {
        let _ = writeln!(s, "#define BATCHED 1\n#define BATCH_NAME {b:?}");
    }
    let shapes = |tys: Vec<Vec<u64>>| -> (String, String) {
        let ranks: Vec<String> = tys.iter().map(|t| t.len().to_string()).collect();
        let dims: Vec<String> = tys
            .iter()
            .map(|t| {
                let d: Vec<String> = t.iter().map(|x| x.to_string()).collect();
                format!(
                    "{{{}}}",
                    if d.is_empty() {
                        "0".into()
                    } else {
                        d.join(",")
                    }
                )
            })
            .collect();
        (ranks.join(","), dims.join(","))
    };
    let in_names: Vec<String> = func
        .params
        .iter()
        .map(|&p| format!("{:?}", func.values[p].name))
        .collect();
    let out_names: Vec<String> = func
        .returns
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            let n = &func.values[v].name;
            // Two outputs of the same value get distinct files.
            if func.returns[..j].contains(&v) {
                format!("{:?}", format!("{n}_{j}"))
            } else {
                format!("{n:?}")
            }
        })
        .collect();
    let ity: Vec<Vec<u64>> = func
        .params
        .iter()
        .map(|&p| func.ty(p).map(|t| t.shape.clone()).unwrap_or_default())
        .collect();
    let oty: Vec<Vec<u64>> = func.result_types.iter().map(|t| t.shape.clone()).collect();
    // Element types as indices into `exe_main.c`'s table of `.npy` codes.
    let code = |d: tir_ir::DType| match d {
        tir_ir::DType::F32 => 0,
        tir_ir::DType::F16 => 1,
        tir_ir::DType::I8 => 2,
        tir_ir::DType::U8 => 3,
        tir_ir::DType::I32 => 4,
        tir_ir::DType::I64 => 5,
        tir_ir::DType::Bool => 6,
        // Refused by code generation before an executable is linked.
        tir_ir::DType::BF16 => 0,
    };
    let icode: Vec<String> = func
        .params
        .iter()
        .map(|&p| func.ty(p).map_or(0, |t| code(t.dtype)).to_string())
        .collect();
    let ocode: Vec<String> = func
        .result_types
        .iter()
        .map(|t| code(t.dtype).to_string())
        .collect();
    let (ir, id) = shapes(ity);
    let (or, od) = shapes(oty);
    let ni = func.params.len();
    let no = func.returns.len();
    let _ = writeln!(s, "#define NI {ni}\n#define NO {no}\n#define MAXR 8");
    let _ = writeln!(
        s,
        "static const char *in_names[] = {{{}}};",
        if ni == 0 {
            "0".into()
        } else {
            in_names.join(",")
        }
    );
    let _ = writeln!(
        s,
        "static const int in_rank[] = {{{}}};\nstatic const unsigned long long in_dims[][MAXR] = {{{}}};",
        if ni == 0 { "0".into() } else { ir },
        if ni == 0 { "{0}".into() } else { id }
    );
    let _ = writeln!(
        s,
        "static const char *out_names[] = {{{}}};",
        if no == 0 {
            "0".into()
        } else {
            out_names.join(",")
        }
    );
    let _ = writeln!(
        s,
        "static const int out_rank[] = {{{}}};\nstatic const unsigned long long out_dims[][MAXR] = {{{}}};",
        if no == 0 { "0".into() } else { or },
        if no == 0 { "{0}".into() } else { od }
    );
    let _ = writeln!(
        s,
        "static const int in_code[] = {{{}}};\nstatic const int out_code[] = {{{}}};",
        if ni == 0 { "0".into() } else { icode.join(",") },
        if no == 0 { "0".into() } else { ocode.join(",") }
    );
    let _ = writeln!(
        s,
        "void {name}_run(const void *const *inputs, void *const *outputs, void *slab);\n\
         unsigned long long {name}_slab_size(void);\n\
         typedef void (*tir_parallel_for)(void *pool, void (*body)(void *ctx, long long begin, long long end), void *ctx, long long tiles);\n\
         void {name}_run_parallel(const void *const *inputs, void *const *outputs, void *slab, tir_parallel_for parallel_for, void *pool);\n\
         void {name}_run_profiled(const void *const *inputs, void *const *outputs, void *slab, void (*tick)(int), tir_parallel_for parallel_for, void *pool);\n\
         extern const char {name}_profile_info[];\n\
         #define MODEL_RUN {name}_run\n#define MODEL_SLAB {name}_slab_size\n\
         #define MODEL_RUN_PROFILED {name}_run_profiled\n#define MODEL_RUN_PARALLEL {name}_run_parallel\n#define MODEL_PROFILE_INFO {name}_profile_info"
    );
    s.push_str(extra);
    s.push_str(MAIN_C);
    // The guard helpers (called only by modules compiled with a guard).
    s.push_str(crate::guard::GUARD_C);
    s
}

/// Compiles `main.c` and links it with `object` into `out` using `cc`, with no file named
/// anywhere but `out` itself (see [`crate::toolchain`]): a kill at any moment leaves nothing.
pub fn link(main_c: &str, object: &[u8], out: &Path) -> Result<(), String> {
    use crate::toolchain::{run, MemFile};
    let source = MemFile::new("main.c", main_c.as_bytes())?;
    let main_o = MemFile::new("main.o", &[])?;
    let model_o = MemFile::new("model.o", object)?;
    let exe = MemFile::new("a.out", &[])?;
    // `-pipe`: the compiler hands its assembly to the assembler through a pipe, not a file.
    run(
        Command::new("cc")
            .args(["-O2", "-pipe", "-x", "c", "-c", "-", "-o"])
            .arg(main_o.path())
            .stdin(source.stdin()?),
        "cc",
    )?;
    run(
        Command::new("cc")
            .arg(main_o.path())
            .arg(model_o.path())
            .arg("-o")
            .arg(exe.path())
            .arg("-lm")
            .arg("-pthread"),
        "cc",
    )?;
    crate::toolchain::publish(out, &exe.contents()?, 0o777)
        .map_err(|e| format!("{}: {e}", out.display()))
}

const MAIN_C: &str = include_str!("exe_main.c");
