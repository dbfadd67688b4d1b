//! `kuuki`: every function in one process. `kuuki replay` runs a transcript through the
//! whole pipeline on a virtual clock and prints the decision log.

mod aws;
mod bench;
mod bench_socket_mode;
mod bench_sqlite;
mod cli;
mod discord;
mod discord_gateway;
mod eval;
mod eval_irc;
mod operations;
mod serve;
mod socket_mode;
mod train;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;

/// mimalloc (v3) option `mi_option_purge_delay`: its place in `mi_option_e`, which
/// libmimalloc-sys does not name (a test checks it still reads the v3 default).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// How long freed memory stays with the process before it goes back to the OS.
/// mimalloc's 1 s default hands back what a replay frees (a grown table's old
/// buffer, a finished job's allocations) while the replay goes on, and the next
/// allocation takes fresh pages, which the kernel must zero: on this project's VMs that
/// was a fifth of a 200,000-message replay. Ten seconds spans a replay's reuse and still
/// returns what a spike left behind; `MIMALLOC_PURGE_DELAY` overrides it.
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

/// Whether the environment sets the purge delay itself (mimalloc reads its variables in
/// any case, and the older name too).
fn purge_delay_set_by_environment() -> bool {
    std::env::vars_os().any(|(name, _)| {
        let name = name.to_string_lossy().to_ascii_uppercase();
        name == "MIMALLOC_PURGE_DELAY" || name == "MIMALLOC_RESET_DELAY"
    })
}

fn keep_freed_memory_a_while() {
    if !purge_delay_set_by_environment() {
        // SAFETY: sets a plain option value, which mimalloc reads on later purges.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

fn main() -> ExitCode {
    keep_freed_memory_a_while();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // Read before anything sets it: mimalloc v3's default for purge_delay is 1000 ms
        // and no neighbouring option defaults to it, so a renumbered enum fails here.
        if !purge_delay_set_by_environment() {
            // SAFETY: reads an option value.
            assert_eq!(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }, 1000);
            keep_freed_memory_a_while();
            // SAFETY: as above.
            assert_eq!(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }, PURGE_DELAY_MS);
        }
    }
}
