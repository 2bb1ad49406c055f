//! The tir model zoo: real network architectures written as code, and the generator of the
//! `.tir` files in `examples/`.
//!
//! Every model is built through [`nn::Net`] (a thin layer over `tir_ir::builder`), so each
//! generated file verifies by construction. [`generate`] prints a model with a header comment
//! giving its architecture, source paper, input size and memory figures; the figures are
//! computed from the module itself (liveness + the planner's lower bounds at alignment 1), so
//! they can never drift from the graph. The six networks of the seed paper's evaluation
//! (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net Inference", §6) also
//! carry the paper's figures and whether they are matched.
//!
//! Weights are not stored: a `const` names a tensor, and without a weights file tir generates
//! it deterministically from a seed, so every model compiles and runs with no download.

pub mod models;
pub mod nn;

use tir_ir::{Module, Op};
use tir_passes::liveness;
use tir_passes::planner;

pub use nn::{NetError, NetResult};

/// One mebibyte, the unit of the paper's tables.
pub const MIB: f64 = (1u64 << 20) as f64;

/// The seed paper's figures for one network, in MiB at three decimals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperFigures {
    pub naive: f64,
    pub offsets: f64,
    pub shared_objects: f64,
}

/// A model of the zoo.
#[derive(Clone, Copy, Debug)]
pub struct ModelSpec {
    /// Name used on the command line and as the module name.
    pub name: &'static str,
    /// File written under `examples/`.
    pub file: &'static str,
    /// One-line description of the architecture.
    pub architecture: &'static str,
    /// Source paper: authors, title, year.
    pub paper: &'static str,
    /// Input size, as described in the header.
    pub input: &'static str,
    /// Further header lines (configuration choices, remaining differences from the paper).
    pub notes: &'static [&'static str],
    /// The seed paper's figures, for the six networks of its evaluation.
    pub reference: Option<PaperFigures>,
    /// The published input size, the one `examples/` holds: the side of the square input
    /// image (H = W) for vision models, the sequence length for BERT.
    pub size: u64,
    /// The smallest size at which every op of the architecture stays meaningful (no pool or
    /// strided conv reduced to a single position, every kernel tap reading real data): the
    /// size the end-to-end tests run at. Each model's spec says why.
    pub test_size: u64,
    /// Builds the module at an input size.
    pub build: fn(u64) -> NetResult<Module>,
}

/// The memory figures of a model, all over float32 unaligned sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figures {
    /// Operators (non-`const` ops) in the execution order.
    pub operators: usize,
    /// Weight `const`s.
    pub weights: usize,
    /// Intermediate tensors (non-`const` op results that are not returned).
    pub intermediates: usize,
    /// Sum of the intermediate sizes: the naive (no sharing) total, in bytes.
    pub naive: u64,
    /// Offsets lower bound (max operator breadth), in bytes.
    pub offsets: u64,
    /// Shared-objects lower bound (sum of positional maxima), in bytes.
    pub shared_objects: u64,
}

impl Figures {
    pub fn mib(bytes: u64) -> f64 {
        bytes as f64 / MIB
    }
}

/// Why a model could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum ZooError {
    #[error("unknown model `{name}`; the models are: {}", known.join(", "))]
    UnknownModel {
        name: String,
        known: Vec<&'static str>,
    },
    #[error("building `{model}`: {source}")]
    Build {
        model: &'static str,
        source: NetError,
    },
    #[error("analysing `{model}`: {message}")]
    Analysis {
        model: &'static str,
        message: String,
    },
}

/// Every model of the zoo, the seed paper's six first.
pub fn models() -> Vec<ModelSpec> {
    models::all()
}

/// The model called `name`.
pub fn find(name: &str) -> Result<ModelSpec, ZooError> {
    let all = models();
    all.iter()
        .find(|m| m.name == name)
        .copied()
        .ok_or_else(|| ZooError::UnknownModel {
            name: name.to_string(),
            known: all.iter().map(|m| m.name).collect(),
        })
}

/// Builds a model's module (without the header) at its published size.
pub fn build(spec: &ModelSpec) -> Result<Module, ZooError> {
    build_at(spec, spec.size)
}

/// Builds a model's module at input size `size` (see [`ModelSpec::size`]); a size the
/// architecture cannot take (a map shrinking to nothing, skips that do not line up) is an
/// error naming the op.
pub fn build_at(spec: &ModelSpec, size: u64) -> Result<Module, ZooError> {
    (spec.build)(size).map_err(|source| ZooError::Build {
        model: spec.name,
        source,
    })
}

/// The figures of a module's first function, at alignment 1.
pub fn figures(spec: &ModelSpec, module: &Module) -> Result<Figures, ZooError> {
    let analysis = |message: String| ZooError::Analysis {
        model: spec.name,
        message,
    };
    let func = module
        .funcs
        .first()
        .ok_or_else(|| analysis("the module has no function".into()))?;
    let live = liveness::analyze(func).map_err(|e| analysis(e.to_string()))?;
    let bounds = planner::lower_bounds(&live.records, 1).map_err(|e| analysis(e.to_string()))?;
    let weights = func
        .layout
        .iter()
        .filter(|&&id| matches!(func.ops[id].op, Op::Const { .. }))
        .count();
    Ok(Figures {
        operators: live.num_operators,
        weights,
        intermediates: live.records.len(),
        naive: live.records.iter().map(|r| r.size).sum(),
        offsets: bounds.offsets,
        shared_objects: bounds.shared_objects,
    })
}

/// Whether a figure in bytes shows as the paper's value at three decimals of MiB.
pub fn matches_paper(bytes: u64, paper_mib: f64) -> bool {
    format!("{:.3}", Figures::mib(bytes)) == format!("{paper_mib:.3}")
}

fn figure_line(label: &str, bytes: u64) -> String {
    format!(
        "  {label:<28}{bytes:>10} bytes = {:.3} MiB",
        Figures::mib(bytes)
    )
}

/// The header comment lines of a model.
pub fn header(spec: &ModelSpec, f: &Figures) -> Vec<String> {
    let mut h = vec![
        format!("{} — tir model zoo", spec.architecture),
        String::new(),
        format!("Source: {}", spec.paper),
        format!("Input: {} (float32, batch 1, NCHW)", spec.input),
    ];
    h.extend(spec.notes.iter().map(|s| s.to_string()));
    h.push(String::new());
    h.push("Generated by `tirc zoo` (zoo/src/models); do not edit. Weights are not stored:".into());
    h.push("every `const` is generated deterministically from a seed.".into());
    h.push(String::new());
    h.push(
        "Memory figures, as `tirc plan --align 1` reports them (float32, unaligned sizes,".into(),
    );
    h.push("MiB = 2^20 bytes; intermediates exclude graph inputs, weights and outputs):".into());
    h.push(format!("  {:<28}{:>10}", "operators:", f.operators));
    h.push(format!("  {:<28}{:>10}", "weight consts:", f.weights));
    h.push(format!(
        "  {:<28}{:>10}",
        "intermediate tensors:", f.intermediates
    ));
    h.push(figure_line("naive total:", f.naive));
    h.push(figure_line("offsets lower bound:", f.offsets));
    h.push(figure_line("shared-objects lower bound:", f.shared_objects));
    if let Some(p) = spec.reference {
        let mark = |bytes: u64, paper: f64| {
            if matches_paper(bytes, paper) {
                "matched".to_string()
            } else {
                format!("differs by {:+.3}", Figures::mib(bytes) - paper)
            }
        };
        h.push(String::new());
        h.push("Seed paper (Pisarchyk & Lee 2020, §6), MiB:".into());
        h.push(format!(
            "  naive {:.3} ({}), offsets bound {:.3} ({}), shared-objects bound {:.3} ({})",
            p.naive,
            mark(f.naive, p.naive),
            p.offsets,
            mark(f.offsets, p.offsets),
            p.shared_objects,
            mark(f.shared_objects, p.shared_objects)
        ));
    }
    h
}

/// The `.tir` text of the model called `name`: header comment + canonical print.
pub fn generate(name: &str) -> Result<String, ZooError> {
    let spec = find(name)?;
    generate_spec(&spec)
}

/// The `.tir` text of a model.
pub fn generate_spec(spec: &ModelSpec) -> Result<String, ZooError> {
    generate_spec_at(spec, spec.size)
}

/// The `.tir` text of a model built at input size `size`. Away from the published size the
/// header says so and leaves out the seed paper's figures (they are for the published size).
pub fn generate_spec_at(spec: &ModelSpec, size: u64) -> Result<String, ZooError> {
    let mut module = build_at(spec, size)?;
    let f = figures(spec, &module)?;
    let mut h = header(spec, &f);
    if size != spec.size {
        if let Some(line) = h.iter_mut().find(|l| l.starts_with("Input: ")) {
            *line = format!(
                "Input: size {size}, reduced from the published {} (float32, batch 1, NCHW)",
                spec.input
            );
        }
        if let Some(k) = h.iter().position(|l| l.starts_with("Seed paper")) {
            // The blank line before the paper's figures, and the figures.
            h.truncate(k.saturating_sub(1));
        }
    }
    module.doc = h;
    Ok(tir_ir::print(&module))
}
