//! The `wirespeed` command. Thin: argument parsing and output; the work is in the library.
// The arguments' doc comments are their --help text (clap), where `xdp:IFACE[@QUEUE]` means
// an optional part, not a link.
#![allow(rustdoc::broken_intra_doc_links)]

mod args;
mod bench;
mod capture;
mod ctl;
mod r#gen;
mod pcap_run;
mod recv;
mod run;
mod switch;
mod top;
mod zcopy;

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
    /// Capture packets to pcap / pcapng files (or print them), with tcpdump filters.
    Capture(capture::CaptureArgs),
    /// Generate traffic: rates, sizes, flows, protocols, or replay a capture file.
    Gen(r#gen::GenArgs),
    /// Receive generated traffic: loss, duplicates, reordering and latency per generator.
    Recv(recv::RecvArgs),
    /// Run a switch over AF_XDP ports (OpenFlow-style rules, learning by default).
    Switch(switch::SwitchArgs),
    /// Run a libpcap program (tcpdump, tshark...) with xdp:IFACE devices on AF_XDP.
    #[command(name = "pcap-run")]
    PcapRun(pcap_run::PcapRunArgs),
    /// Watch a running switch or any tool with --metrics: rates, drops, load, busiest flows.
    Top(top::TopArgs),
    /// Talk to a running switch: add-flow, del-flows, dump-flows, dump-ports...
    Ctl(ctl::CtlArgs),
    /// The kernel's zero-copy TCP features: MSG_ZEROCOPY send, TCP zero-copy receive.
    Zcopy(zcopy::ZcopyArgs),
    /// (Internal) pcap-run's broker: attaches XDP programs for the program it runs.
    #[command(name = "pcap-broker", hide = true)]
    PcapBroker(pcap_run::broker::BrokerArgs),
    /// (Internal) compiles a capture filter in a child process, for `capture`.
    #[command(name = "compile-filter", hide = true)]
    CompileFilter(capture::filter_child::ChildArgs),
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| usage_error(e));
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Capture(args) => capture::run(args),
        Command::Gen(args) => r#gen::run(args),
        Command::Recv(args) => recv::run(args),
        Command::Switch(args) => switch::run(args),
        Command::Ctl(args) => ctl::run(args),
        Command::Top(args) => top::run(args),
        Command::PcapRun(args) => pcap_run::run(args),
        Command::PcapBroker(args) => pcap_run::broker::run(args),
        Command::Zcopy(args) => zcopy::run(args),
        Command::CompileFilter(args) => capture::filter_child::child_main(args),
    };
    if let Err(e) = result {
        eprintln!("wirespeed: error: {}", run::error_text::error_text(&e));
        // A run a signal cut short (in its set-up: the loops finish normally) ends as the
        // signal would have ended it.
        std::process::exit(run::signals::exit_status(&e).unwrap_or(1));
    }
}

/// A command line clap refused: its message, and status 2 as for any tool; but 1 for
/// `ctl`, as ovs-ofctl's, whose `diff-flows` says 2 for "the flows differ" (a script would
/// read a typo as a difference). ovs-ofctl's first word is a bridge; ctl has none to take.
fn usage_error(e: clap::Error) -> ! {
    let ctl = std::env::args_os().nth(1).is_some_and(|a| a == "ctl");
    if !ctl || !e.use_stderr() {
        e.exit();
    }
    let _ = e.print();
    if e.kind() == clap::error::ErrorKind::UnknownArgument {
        eprintln!(
            "note: ctl talks to one switch through its control socket (--ctl PATH): it \
             takes no bridge name, as ovs-ofctl does"
        );
    }
    std::process::exit(1);
}
