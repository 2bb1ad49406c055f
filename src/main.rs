//! `tirc`: the tir compiler driver.
//!
//! Exit codes: 0 success, 1 invalid input (diagnostics on stderr), 2 command-line misuse.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    reset_sigpipe();
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

/// Rust ignores SIGPIPE, so writing to a closed pipe (`tirc fmt big.tir | head`) makes `println!`
/// panic. A Unix filter should end quietly instead: restore the signal's default action.
#[cfg(unix)]
fn reset_sigpipe() {
    // SAFETY: called first thing in `main`, before any thread exists; `signal` with `SIG_DFL`
    // only changes this process's disposition of SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn reset_sigpipe() {}
