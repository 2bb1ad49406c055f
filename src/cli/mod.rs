//! Subcommands. Each reports its own diagnostics on stderr and returns how it ended.

mod check;
mod fmt;
pub mod input;

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
}

/// How a failed command ended.
#[derive(Debug)]
pub enum Failure {
    /// Diagnostics were printed; exit 1.
    Reported,
    /// The command line makes no sense; exit 2.
    #[allow(dead_code)]
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
    }
}
