//! ONNX bytes → `tir_onnx::import_bytes`, as `tirc import` and `tirc compile MODEL.onnx` read a
//! model (`src/cli/import.rs`), then what they do with it: print the module and encode the
//! weights as safetensors. The printed module must parse and verify again (the importer only
//! returns verified modules, and `tirc import` writes this text for `tirc check`), and
//! `tirc run MODEL.tir --weights OUT.safetensors` must accept the weights it wrote.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;
use tir_onnx::ImportOptions;

/// External data is read relative to the model's directory: a directory of the fuzzer's own
/// holding one small file, so `location = "data.bin"` can succeed and nothing else is read.
fn base_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tir-fuzz-onnx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("cannot create the external-data directory");
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1024).collect();
        std::fs::write(dir.join("data.bin"), bytes).expect("cannot write the external data");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let opts = ImportOptions {
        base_dir: Some(base_dir().clone()),
        name: Some("fuzz".into()),
        ..ImportOptions::default()
    };
    let imported = match tir_onnx::import_bytes(data, &opts) {
        Ok(imported) => imported,
        Err(e) => {
            let _ = format!("fuzz.onnx: error: {e}");
            return;
        }
    };
    let text = tir_ir::print(&imported.module);
    let module = match tir_ir::parse_and_verify(&text) {
        Ok(m) => m,
        Err(d) => panic!("the imported module does not verify once printed: {d:?}\n{text}"),
    };
    if imported.weights.is_empty() {
        return;
    }
    let bytes = match imported.weights.to_safetensors() {
        Ok(b) => b,
        Err(e) => panic!("the imported weights cannot be encoded: {e}"),
    };
    if let Err(e) = tir_interp::Weights::from_safetensors(&module, &bytes) {
        panic!("the imported weights do not load against the imported module: {e}\n{text}");
    }
});
