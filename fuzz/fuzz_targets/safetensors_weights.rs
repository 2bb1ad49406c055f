//! safetensors bytes → `Weights::from_safetensors` against two small fixed modules, as
//! `tirc run MODEL.tir --weights FILE.safetensors` loads weights (`src/cli/run.rs`):
//! `modules/safetensors_run.tir` (f32 weights of a conv, batch norm, PReLU, layer norm and
//! gemm, one name used twice), which then runs on the reference interpreter with the weights
//! read, and `modules/safetensors_dtypes.tir` (one `const` of every dtype, an empty and a
//! scalar tensor), which is only loaded. Weights that load must pass `Weights::check` and come
//! back the same through `to_safetensors`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tir_interp::{weights, Tensor, Weights};
use tir_ir::Module;

struct Fixture {
    run: Module,
    dtypes: Module,
    inputs: Vec<Tensor>,
}

fn module(text: &str) -> Module {
    tir_ir::parse_and_verify(text).unwrap_or_else(|d| panic!("a fixed module is invalid: {d:?}"))
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let run = module(include_str!("../modules/safetensors_run.tir"));
        let dtypes = module(include_str!("../modules/safetensors_dtypes.tir"));
        let func = run.entry().expect("the fixed module has an entry function");
        let inputs = func
            .params
            .iter()
            .map(|&p| {
                let ty = func.ty(p).expect("a typed parameter");
                weights::random_input(&func.values[p].name, ty, 0).expect("a small input")
            })
            .collect();
        Fixture {
            run,
            dtypes,
            inputs,
        }
    })
}

/// Loads `bytes` against `module`; what loads must check and survive a write + read.
fn load(module: &Module, bytes: &[u8]) -> Option<Weights> {
    let w = match Weights::from_safetensors(module, bytes) {
        Ok(w) => w,
        Err(e) => {
            let _ = format!("fuzz.safetensors: error: {e}");
            return None;
        }
    };
    if let Err(e) = w.check(module) {
        panic!("weights that loaded fail the check: {e}");
    }
    let written = match w.to_safetensors() {
        Ok(b) => b,
        Err(e) => panic!("loaded weights cannot be written: {e}"),
    };
    let back = match Weights::from_safetensors(module, &written) {
        Ok(b) => b,
        Err(e) => panic!("written weights do not load: {e}"),
    };
    assert_eq!(
        back.len(),
        w.len(),
        "a different number of weights read back"
    );
    for (name, t) in w.iter() {
        let Some(b) = back.get(name) else {
            panic!("weight `{name}` lost through write + read");
        };
        assert_eq!(
            b.ty, t.ty,
            "weight `{name}` changed type through write + read"
        );
        assert!(
            b.data.to_le_bytes() == t.data.to_le_bytes(),
            "weight `{name}` changed through write + read"
        );
    }
    Some(w)
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    if let Some(w) = load(&f.run, data) {
        // Any values, NaN and infinities included: an answer, never a panic.
        if let Err(e) = tir_interp::run(&f.run, &w, &f.inputs) {
            panic!("the fixed module does not run with weights that loaded: {e}");
        }
    }
    load(&f.dtypes, data);
});
