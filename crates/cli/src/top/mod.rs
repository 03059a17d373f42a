//! `wirespeed top`: a live view of a running switch (its control socket) or of any tool run
//! with `--metrics`: ports' rates and drops, poll-mode threads' load, the switch's caches and
//! its busiest rules, every interval. Full screen on a terminal, plain lines otherwise.

mod flows;
mod http;
mod model;
mod plain;
mod prom_text;
mod scrape;
mod tables;
mod terminal;
mod view;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use wirespeed_switch::DEFAULT_CTL;

use scrape::{Scrape, Source};
use tables::Detail;

/// Options of `wirespeed top`.
#[derive(Debug, Args)]
#[command(
    after_help = "Keys: q (or Ctrl-C) quits, d shows drops by reason, s shows queues.\n\n\
Examples:\n  wirespeed top                       # the switch at the default control socket\n  \
wirespeed top --ctl /run/sw1.sock\n  wirespeed top --metrics 127.0.0.1:9100\n  \
wirespeed top --metrics 127.0.0.1:9100 --count 3 | cat"
)]
pub struct TopArgs {
    /// Watch a tool run with `--metrics` (its /metrics page); a PORT alone is on 127.0.0.1.
    #[arg(long, value_name = "[HOST:]PORT")]
    pub metrics: Option<String>,
    /// Watch a switch through its control socket (its metrics, and its busiest rules);
    /// with --metrics, only the rules come from it. Default, without --metrics: the
    /// switch's default socket.
    #[arg(long, value_name = "PATH")]
    pub ctl: Option<PathBuf>,
    /// No busiest flows: the switch's dump-flows, which each interval reads every rule's
    /// counters from the poll-mode threads' caches (between two of their bursts), is not
    /// asked for.
    #[arg(long)]
    pub no_flows: bool,
    /// Seconds between updates.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub interval: f64,
    /// Stop after this many updates.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// One JSON object per update, a line each, rather than the view or plain lines (a
    /// failure: an {"error": "..."} line, exit 1).
    #[arg(long)]
    pub json: bool,
    /// Plain lines even on a terminal (the default when standard output is not one).
    #[arg(long)]
    pub plain: bool,
    /// Start with drops by reason shown (key d).
    #[arg(long)]
    pub drop_reasons: bool,
    /// Start with a row per queue (key s).
    #[arg(long)]
    pub queues: bool,
}

/// The shortest interval: scrapes faster than this measure mostly themselves.
const SHORTEST_INTERVAL: f64 = 0.1;

/// Runs top; with `--json`, a failure is a JSON line on standard output too
/// (`{"error": "..."}`), so that a script reading the lines sees why they stopped.
pub fn run(args: TopArgs) -> anyhow::Result<()> {
    let json = args.json;
    let ran = watch(args);
    crate::run::error_text::say_json_error(json, &ran);
    ran
}

fn watch(args: TopArgs) -> anyhow::Result<()> {
    if !(SHORTEST_INTERVAL..=86400.0).contains(&args.interval) {
        bail!(
            "--interval {}: give seconds, at least {SHORTEST_INTERVAL} and at most a day",
            args.interval
        );
    }
    if args.count == Some(0) {
        bail!("--count 0: give at least one update");
    }
    let interval = Duration::from_secs_f64(args.interval);
    let source = Source {
        ctl: args
            .ctl
            .clone()
            .or_else(|| args.metrics.is_none().then(|| PathBuf::from(DEFAULT_CTL))),
        metrics: args.metrics.as_deref().map(loopback_if_port_alone),
        rules: !args.no_flows,
    };
    if let Some(addr) = &source.metrics {
        http::resolve(addr).context("--metrics")?;
    }
    // Each connection's steps: a slow page still arrives; a dead one is named soon enough.
    let timeout = interval.max(Duration::from_secs(2));
    // The first reading must work: a wrong address or socket ends here, before the screen
    // is taken.
    let first = source.scrape(timeout)?;
    let stop = stop_flag()?;
    let readings = start_scraper(source.clone(), first.at, interval, timeout)?;
    let watch = Watch {
        source: source.describe(),
        count: args.count,
        stop,
        readings,
        detail: Detail {
            drop_reasons: args.drop_reasons,
            queues: args.queues,
        },
    };
    if args.json || args.plain || !std::io::stdout().is_terminal() {
        plain::run(watch, first, args.json)
    } else {
        view::run(watch, first)
    }
}

/// `9464` as `127.0.0.1:9464`: a port alone is on loopback, as the tools' `--metrics` take it.
fn loopback_if_port_alone(addr: &str) -> String {
    match addr.parse::<u16>() {
        Ok(port) => format!("127.0.0.1:{port}"),
        Err(_) => addr.to_string(),
    }
}

/// What the view and the plain lines share: where readings come from and when to stop.
pub struct Watch {
    pub source: String,
    pub count: Option<u64>,
    /// Set by SIGINT, SIGTERM or SIGHUP.
    pub stop: Arc<AtomicBool>,
    /// A reading each interval, or why there is none.
    pub readings: Receiver<Result<Scrape, String>>,
    pub detail: Detail,
}

/// A thread that reads `source` every `interval` after `first_at` and sends each reading,
/// so that a source slow to answer never holds up the keys or the screen. It ends when the
/// receiver is gone.
fn start_scraper(
    source: Source,
    first_at: Instant,
    interval: Duration,
    timeout: Duration,
) -> anyhow::Result<Receiver<Result<Scrape, String>>> {
    let (tx, rx) = sync_channel(1);
    std::thread::Builder::new()
        .name("scrape".to_string())
        .spawn(move || {
            let mut next = first_at + interval;
            loop {
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                // A slow reading skips the ticks it overran rather than bunching up.
                next += interval;
                while next <= Instant::now() {
                    next += interval;
                }
                let reading = source
                    .scrape(timeout)
                    .map_err(|e| crate::run::error_text::error_text(&e));
                if tx.send(reading).is_err() {
                    return;
                }
            }
        })
        .context("start the scrape thread")?;
    Ok(rx)
}

/// A flag SIGINT, SIGTERM and SIGHUP set: the loops end and the terminal is restored.
fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, stop.clone()).context("install signal handler")?;
    }
    Ok(stop)
}
