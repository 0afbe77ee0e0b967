use std::process::ExitCode;

use clap::Parser;

/// Fewer cycles per allocation than glibc's malloc on hookd's many small, short-lived ones
/// (decisions 28).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = hookd::cli::Cli::parse();
    match hookd::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, the whole cause chain, no backtrace.
            eprintln!("hookd: error: {}", hookd::cli::error_chain(&*e));
            ExitCode::FAILURE
        }
    }
}
