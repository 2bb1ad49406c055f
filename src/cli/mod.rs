//! Subcommands. Each reports its own diagnostics on stderr and returns how it ended.

mod check;
mod compile;
mod dynamic;
mod egg;
mod fmt;
mod heapmap;
mod import;
pub mod input;
mod opt;
mod plan;
mod plan_json;
mod records;
mod reorder;
mod run;
mod textures;
mod zoo;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "tirc",
    version,
    about = "tir: a compiler for neural-network inference graphs built around static memory planning"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and verify .tir files, reporting every error.
    Check {
        /// Files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print a .tir file in canonical form (with every type inferred).
    Fmt {
        file: PathBuf,
        /// Rewrite the file instead of printing it (atomically: temp file + rename).
        #[arg(long, short = 'i', conflicts_with = "check")]
        in_place: bool,
        /// Exit 1 if the file is not already in canonical form; print nothing else.
        #[arg(long)]
        check: bool,
    },
    /// Plan memory: every strategy side by side against the paper's lower bounds.
    Plan {
        /// The model to plan (its `@main` function).
        #[arg(required_unless_present = "records", conflicts_with = "records")]
        model: Option<PathBuf>,
        /// Plan usage records from a CSV file `id,lower,upper,size` (half-open `[lower, upper)`),
        /// or `id,lower,upper,w,h[,d]`: 2D/3D textures, planned as shared objects only.
        #[arg(long, value_name = "FILE.csv")]
        records: Option<PathBuf>,
        /// The CSV's intervals are closed `[lower, upper]`.
        #[arg(long, requires = "records")]
        inclusive: bool,
        /// A strategy name, or `all`.
        #[arg(long, short = 's', default_value = "all")]
        strategy: String,
        /// Only the shared-objects approach.
        #[arg(long, conflicts_with = "offsets")]
        objects: bool,
        /// Only the offsets approach.
        #[arg(long)]
        offsets: bool,
        /// Alignment of every tensor's size and offset, in bytes.
        #[arg(long, default_value_t = tir_passes::planner::DEFAULT_ALIGNMENT)]
        align: u64,
        /// Print JSON (every record and its offset/object) instead of the table.
        #[arg(long)]
        json: bool,
        /// Write the records plus an `offset` column (the smallest offsets plan shown) to FILE.
        #[arg(long, value_name = "FILE.csv")]
        emit_csv: Option<PathBuf>,
        /// Print the model with each operator's profile and breadth as trailing comments.
        #[arg(long, conflicts_with_all = ["records", "json", "emit_csv"])]
        annotate: bool,
        /// Compare operator orders (issue 8) instead of strategies: peak breadth and slab per
        /// scheduler. `--reorder` (or `=all`) shows every scheduler, `=heuristic` the fast
        /// ones, `=exact` the exact search, `=egg` every scheduler plus egg rewriting.
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "all",
              conflicts_with_all = ["records", "emit_csv", "annotate"])]
        reorder: Option<reorder::Rows>,
        /// With --reorder: input, kahn, list, dfs, post_order, exact, or `all`.
        #[arg(long, requires = "reorder")]
        scheduler: Option<String>,
        /// Time budget in seconds. With --reorder (default 10) it covers the whole table: each
        /// order, the exact search and the planner judging every order (the egg row has a budget
        /// of its own); a budget that stopped the search or the judge is named in the row.
        /// Otherwise it is the `exact` offsets strategy's (default 5; 1 within `--strategy all`).
        #[arg(long)]
        time_limit: Option<f64>,
        /// With --reorder: DP states kept per layer before the exact search turns into a beam.
        #[arg(long, default_value_t = 20_000, requires = "reorder")]
        states: usize,
        /// A value for a symbolic dim of a dynamic model, `NAME=N` (repeatable): plans at it.
        #[arg(long = "dim", value_name = "NAME=N", conflicts_with = "records")]
        dims: Vec<String>,
        /// The slab (and lower bound) of a dynamic model over sizes of one dim, as a table:
        /// `NAME=A..B` or `NAME=A..B:STEP` (the other dims pinned with --dim).
        #[arg(long, value_name = "NAME=A..B[:STEP]",
              conflicts_with_all = ["records", "reorder", "annotate", "emit_csv", "dim_max"])]
        dim_range: Option<String>,
        /// A bounded plan: one static plan valid for every shape with NAME <= N (repeatable;
        /// refused unless every tensor size is proven non-decreasing in the dims).
        #[arg(long = "dim-max", value_name = "NAME=N", conflicts_with_all = ["records", "reorder"])]
        dim_max: Vec<String>,
    },
    /// Draw an offsets plan as an SVG heap map.
    Heapmap {
        #[arg(required_unless_present = "records", conflicts_with = "records")]
        model: Option<PathBuf>,
        #[arg(long, value_name = "FILE.csv")]
        records: Option<PathBuf>,
        #[arg(long, requires = "records")]
        inclusive: bool,
        /// Where to write the SVG.
        #[arg(long, short = 'o')]
        output: PathBuf,
        /// An offsets strategy (default: the best).
        #[arg(long, short = 's', default_value = "best")]
        strategy: String,
        #[arg(long, default_value_t = tir_passes::planner::DEFAULT_ALIGNMENT)]
        align: u64,
    },
    /// Run a pass pipeline and print the resulting IR, e.g. `--passes 'plan{strategy=greedy_by_size},bufferize'`.
    Opt {
        file: PathBuf,
        /// Comma-separated passes with `{key=value}` options: reorder{scheduler=NAME|heuristic,budget=TIME,states=N},
        /// rewrite{scheduler=NAME,budget=TIME,states=N}, plan{strategy=NAME,align=N,sharing=BOOL,guard=N}, bufferize,
        /// verify. `reorder` and `rewrite` judge orders by the policy of the `plan` that follows them.
        #[arg(long, short = 'p')]
        passes: String,
        /// Verify (and check buffers) after every pass (always on in debug builds).
        #[arg(long)]
        verify_each: bool,
        /// Print the IR after every pass (to stderr).
        #[arg(long)]
        print_after_all: bool,
        /// Print each pass's statistics and time (to stderr).
        #[arg(long)]
        stats: bool,
        /// Write the result to FILE instead of stdout (atomically).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// A value for a symbolic dim of a dynamic model, `NAME=N` (repeatable): the passes run
        /// on the model specialized at them. Dims left free stay symbolic: `reorder` and
        /// `rewrite` judge at sample shapes (or at `--dim-max`), see docs/reorder.md.
        #[arg(long = "dim", value_name = "NAME=N")]
        dims: Vec<String>,
        /// A bound for a symbolic dim, `NAME=N` (repeatable): `reorder` and `rewrite` judge at
        /// the bounds, and `plan` makes the bounded plan (one plan valid for every shape up to
        /// them; `bufferize` then allocates the slab at the bounds).
        #[arg(long = "dim-max", value_name = "NAME=N")]
        dim_max: Vec<String>,
    },
    /// Run a model (reference interpreter) and summarise or write its outputs as .npy files.
    Run {
        model: PathBuf,
        /// An input as NAME=FILE.npy (NAME with or without `%`); repeatable. Inputs not given
        /// are generated from the seed.
        #[arg(long = "input", value_name = "NAME=FILE.npy")]
        inputs: Vec<String>,
        /// A directory to write one NAME.npy per output into, or a .npy file for a model with
        /// one output (written atomically).
        #[arg(long, short = 'o', value_name = "DIR|FILE.npy")]
        output: Option<PathBuf>,
        /// Weights from a safetensors file (default: generated from the seed).
        #[arg(long, value_name = "FILE.safetensors")]
        weights: Option<PathBuf>,
        /// Seed of the generated weights and inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// What executes the model.
        #[arg(long, value_enum, default_value = "interp")]
        engine: run::Engine,
        /// A value for a symbolic dim of a dynamic model, `NAME=N` (repeatable). Dims not given
        /// take their values from the input files' shapes.
        #[arg(long = "dim", value_name = "NAME=N")]
        dims: Vec<String>,
    },
    /// Compile a model to a native executable (or object, LLVM IR, assembly): plans with
    /// buffer sharing, bufferizes, generates shape-specialised kernels with LLVM.
    Compile {
        model: PathBuf,
        #[arg(long, short = 'o')]
        output: PathBuf,
        #[arg(long, value_enum, default_value = "exe")]
        emit: compile::Emit,
        /// The offset strategy of the plan (default: the pipeline's).
        #[arg(long)]
        strategy: Option<String>,
        /// Plan without buffer sharing.
        #[arg(long)]
        no_sharing: bool,
        /// Weights from a safetensors file (default: generated from the seed).
        #[arg(long, value_name = "FILE.safetensors")]
        weights: Option<PathBuf>,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// `native` (host CPU features), `generic`, or an LLVM CPU name.
        #[arg(long, default_value = "native")]
        target_cpu: String,
        /// Guard mode: canary bytes after every slab buffer, checked after every op; an op
        /// writing out of bounds is reported by name and the executable exits with status 3.
        #[arg(long)]
        guard: bool,
        /// Test-only: make the op defining this value write past its result.
        #[arg(long, hide = true)]
        guard_fault_op: Option<String>,
        /// LLVM optimisation level (0-3): lower compiles faster, same results.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=3))]
        opt_level: u8,
        /// Reorder the operators before planning (issue 8): `heuristic` (the default) keeps the
        /// best heuristic order, `exact` runs the exact search, `egg` also rewrites the program
        /// (partitioning over concats, weights sliced); never a larger slab.
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "heuristic")]
        reorder: Option<compile::ReorderMode>,
        /// With --reorder: the time budget in seconds (default 10) of the reorder pass, search
        /// and judging included, or with --reorder=egg of the rewrite pass.
        #[arg(long, requires = "reorder")]
        time_limit: Option<f64>,
        /// A value for a symbolic dim, `NAME=N` (repeatable): a dynamic model compiles at these
        /// values (an ONNX model's symbolic input dims, as with `tirc import --dim`).
        #[arg(long = "dim", value_name = "NAME=N")]
        dims: Vec<String>,
    },
    /// Import an ONNX or TFLite model: a .tir file plus the safetensors file its `const` ops name.
    Import {
        /// The .onnx file (external data is read relative to it) or .tflite file.
        model: PathBuf,
        /// The .tir file to write.
        #[arg(long, short = 'o')]
        output: PathBuf,
        /// Where to write the weights (default: the output with extension .safetensors).
        #[arg(long, value_name = "OUT.safetensors")]
        weights: Option<PathBuf>,
        /// A value for a symbolic input dimension, `name=value`: its ONNX `dim_param`, or
        /// `INPUT.dAXIS` for an unnamed, `?` or `-1` one (repeatable). Dims without a value stay
        /// symbolic: the .tir is a dynamic model.
        #[arg(long = "dim", value_name = "NAME=VALUE")]
        dims: Vec<String>,
        /// Fix a graph input to the value in a .npy file, `name=FILE.npy` (repeatable): it is
        /// imported as a constant, so a shape, axes, pads or scales input folds (ONNX only).
        #[arg(long = "bind", value_name = "NAME=FILE.npy")]
        bind: Vec<String>,
        /// Keep the graph as imported: no activation fusion or BatchNormalization folding.
        #[arg(long)]
        no_cleanup: bool,
    },
    /// Write the model zoo's .tir files (every model, or the named ones).
    Zoo {
        /// Directory to write into.
        #[arg(long, default_value = "examples")]
        out: PathBuf,
        /// List the models instead of writing them.
        #[arg(long)]
        list: bool,
        /// Input size: `published` (default, what examples/ holds), `test` (each model's
        /// smallest meaningful size, the tests' size), or N (image side, BERT's sequence).
        #[arg(long, value_name = "N|test", default_value = "published", value_parser = zoo::parse_size)]
        size: zoo::Size,
        /// Models to write (default: all).
        names: Vec<String>,
    },
}

/// How a failed command ended.
#[derive(Debug)]
pub enum Failure {
    /// Diagnostics were printed; exit 1.
    Reported,
    /// The command line makes no sense; exit 2.
    Usage(String),
}

pub fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Check { files } => check::run(&files),
        Command::Fmt {
            file,
            in_place,
            check,
        } => fmt::run(&file, in_place, check),
        Command::Opt {
            file,
            passes,
            verify_each,
            print_after_all,
            stats,
            output,
            dims,
            dim_max,
        } => opt::run(opt::Options {
            dims,
            dim_max,
            file,
            passes,
            verify_each,
            print_after_all,
            stats,
            output,
        }),
        Command::Zoo {
            out,
            list,
            size,
            names,
        } => zoo::run(&out, &names, list, size),
        Command::Compile {
            model,
            output,
            emit,
            strategy,
            no_sharing,
            weights,
            seed,
            target_cpu,
            guard,
            guard_fault_op,
            opt_level,
            reorder,
            time_limit,
            dims,
        } => compile::run(compile::Options {
            dims,
            model,
            output,
            emit,
            strategy,
            no_sharing,
            weights,
            seed,
            target_cpu,
            guard,
            guard_fault_op,
            opt_level,
            reorder,
            time_limit: std::time::Duration::try_from_secs_f64(time_limit.unwrap_or(10.0))
                .map_err(|_| Failure::Usage("--time-limit must be a non-negative number".into()))?,
        }),
        Command::Import {
            model,
            output,
            weights,
            dims,
            bind,
            no_cleanup,
        } => import::run(import::Options {
            model,
            output,
            weights,
            dims,
            bind,
            no_cleanup,
        }),
        Command::Run {
            model,
            inputs,
            output,
            weights,
            seed,
            engine,
            dims,
        } => run::run(run::Options {
            dims,
            model,
            inputs,
            output,
            weights,
            seed,
            engine,
        }),
        Command::Plan {
            model,
            records,
            inclusive,
            strategy,
            objects,
            offsets,
            align,
            json,
            emit_csv,
            annotate,
            reorder,
            scheduler,
            time_limit,
            states,
            dims,
            dim_range,
            dim_max,
        } => {
            if let Some(mode) = reorder {
                if !dims.is_empty() {
                    return Err(Failure::Usage(
                        "--reorder takes static models only; --dim is not accepted with it yet"
                            .into(),
                    ));
                }
                let Some(model) = model else {
                    return Err(Failure::Usage("--reorder needs a model".into()));
                };
                let time = std::time::Duration::try_from_secs_f64(time_limit.unwrap_or(10.0))
                    .map_err(|_| {
                        Failure::Usage("--time-limit must be a non-negative number".into())
                    })?;
                return reorder::run(reorder::Options {
                    model,
                    rows: mode,
                    scheduler,
                    json,
                    align,
                    budget: tir_passes::reorder::Budget {
                        time,
                        states: states.max(1),
                    },
                });
            }
            let approach = match (objects, offsets) {
                (true, _) => plan::Approach::Objects,
                (_, true) => plan::Approach::Offsets,
                _ => plan::Approach::Both,
            };
            let time_limit = time_limit
                .map(std::time::Duration::try_from_secs_f64)
                .transpose()
                .map_err(|_| Failure::Usage("--time-limit must be a non-negative number".into()))?;
            plan::run_with_time_limit(
                plan::Options {
                    model,
                    records,
                    inclusive,
                    strategy,
                    approach,
                    align,
                    json,
                    emit_csv,
                    annotate,
                    dims,
                    dim_range,
                    dim_max,
                },
                time_limit,
            )
        }
        Command::Heapmap {
            model,
            records,
            inclusive,
            output,
            strategy,
            align,
        } => heapmap::run(heapmap::Options {
            model,
            records,
            inclusive,
            output,
            strategy,
            align,
        }),
    }
}
