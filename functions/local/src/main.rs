//! `kuuki`: every function in one process. `kuuki replay` runs a transcript through the
//! whole pipeline on a virtual clock and prints the decision log.

mod aws;
mod bench;
mod cli;
mod discord;
mod eval;
mod serve;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("KUUKI_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let mut runtime = if args.wants_threads() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = runtime.enable_all().build().expect("a tokio runtime");
    match runtime.block_on(cli::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kuuki: {error:#}");
            ExitCode::FAILURE
        }
    }
}
