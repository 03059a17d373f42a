//! The `wirespeed` command. Thin: argument parsing and output; the work is in the library.

mod bench;
mod caps;
mod idle;
mod meter;
mod verify;

use clap::{Parser, Subcommand};

/// Zero-copy packet I/O over AF_XDP, and the tools built on it.
#[derive(Parser)]
#[command(name = "wirespeed", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure packet I/O: rxdrop, txpush, l2fwd, or the in-kernel xdpdrop ceiling.
    Bench(bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
    };
    if let Err(e) = result {
        eprintln!("wirespeed: error: {e:#}");
        std::process::exit(1);
    }
}
