//! `tirc compile MODEL.tir|MODEL.onnx -o OUT [--emit exe|obj|llvm|asm]`: plan, bufferize,
//! generate code. An `.onnx` model is imported in memory with its own weights.

use super::{import, input, Failure};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tir_codegen::{Artifact, Bufferized, Options as CgOptions};
use tir_interp::Weights;
use tir_passes::pipeline::{parse_pipeline, run_pipeline};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    Exe,
    Obj,
    Llvm,
    Asm,
}

pub struct Options {
    pub model: PathBuf,
    pub output: PathBuf,
    pub emit: Emit,
    pub strategy: Option<String>,
    pub no_sharing: bool,
    pub weights: Option<PathBuf>,
    pub seed: u64,
    pub target_cpu: String,
}

pub fn run(o: Options) -> Result<(), Failure> {
    let start = Instant::now();
    // An `.onnx` model is imported in memory and brings its own weights.
    let (mut module, model_weights) = if import::is_onnx(&o.model) {
        import::load_onnx(&o.model)?
    } else {
        (input::load_module(&o.model)?.1, None)
    };
    let name = o.model.display().to_string();
    let err = |msg: String| {
        eprintln!("{name}: error: {msg}");
        Failure::Reported
    };
    let weights = match &o.weights {
        Some(p) => {
            let bytes = std::fs::read(p).map_err(|e| err(format!("{}: {e}", p.display())))?;
            Weights::from_safetensors(&module, &bytes).map_err(|e| err(e.to_string()))?
        }
        None => match &model_weights {
            Some(bytes) => {
                Weights::from_safetensors(&module, bytes).map_err(|e| err(e.to_string()))?
            }
            None => Weights::generate(&module, o.seed).map_err(|e| err(e.to_string()))?,
        },
    };
    let mut plan = format!("sharing={}", !o.no_sharing);
    if let Some(s) = &o.strategy {
        plan = format!("strategy={s},{plan}");
    }
    let passes = parse_pipeline(&format!("plan{{{plan}}},bufferize"))
        .map_err(|e| Failure::Usage(e.to_string()))?;
    run_pipeline(&mut module, &passes, false, |_, _| {}).map_err(|e| err(e.to_string()))?;
    let symbol = tir_codegen::symbol_name(
        o.model
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(&module.name),
    );
    let proof = Bufferized::new(&mut module).map_err(|e| err(e.to_string()))?;
    let slab = proof.slab_size();
    let cg = CgOptions {
        name: symbol.clone(),
        target_cpu: o.target_cpu.clone(),
    };
    let artifact = match o.emit {
        Emit::Exe | Emit::Obj => Artifact::Object,
        Emit::Llvm => Artifact::Llvm,
        Emit::Asm => Artifact::Asm,
    };
    let bytes =
        tir_codegen::emit(&proof, &weights, &cg, artifact).map_err(|e| err(e.to_string()))?;
    match o.emit {
        Emit::Exe => {
            let main = tir_codegen::exe::main_c(proof.func(), &symbol);
            tir_codegen::exe::link(&main, &bytes, Path::new(&o.output)).map_err(err)?;
        }
        _ => input::write_atomic(&o.output, &bytes)?,
    }
    eprintln!(
        "{}: slab {slab} bytes, compiled in {:.2} s",
        o.output.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
