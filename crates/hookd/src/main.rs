use std::process::ExitCode;

use clap::Parser;

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
