//! `tirc`: the tir compiler driver.
//!
//! Exit codes: 0 success, 1 invalid input (diagnostics on stderr), 2 command-line misuse.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(cli::Failure::Reported) => ExitCode::from(1),
        Err(cli::Failure::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}
