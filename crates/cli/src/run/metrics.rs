//! `--metrics ADDR`: Prometheus' `/metrics` for a running tool. The listener is bound
//! before the tool opens its ports (an address in use refuses the start, nothing opened),
//! and answers once the tool has figures to show.

use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;
use wirespeed_metrics::{
    Exposition, MetricsListener, MetricsServer, Published, ThreadFigures, frame_figures,
    listen_address, port_figures, thread_figures,
};
use wirespeed_port::{FrameAudit, PortStats};

/// What `--metrics` says in every tool's `--help`.
pub const HELP: &str = "Serve Prometheus metrics at http://ADDR/metrics while running: PORT \
                        (loopback), HOST:PORT or [IPv6]:PORT (0.0.0.0:PORT for every address)";

/// Binds `--metrics`' address, if given.
pub fn bind(flag: Option<&str>) -> anyhow::Result<Option<MetricsListener>> {
    let Some(text) = flag else {
        return Ok(None);
    };
    let addr = listen_address(text).with_context(|| format!("--metrics {text}"))?;
    let listener = MetricsListener::bind(addr).with_context(|| format!("--metrics {text}"))?;
    Ok(Some(listener))
}

/// Starts answering scrapes with `render`, and says where on stderr.
pub fn serve(
    tool: &str,
    listener: Option<MetricsListener>,
    render: impl Fn() -> String + Send + Sync + 'static,
) -> anyhow::Result<Option<MetricsServer>> {
    let Some(listener) = listener else {
        return Ok(None);
    };
    let addr = listener.local_addr();
    let server = listener.serve(render).context("--metrics")?;
    eprintln!("wirespeed {tool}: metrics at http://{addr}/metrics");
    Ok(Some(server))
}

/// What one meter publishes for a scrape: the live line's counts, and for a meter over a
/// port (`Meter::tick_port`) the port's counters and frames and the thread's time.
#[derive(Debug, Clone, Default)]
pub struct MeterFigures {
    /// The live line's word for what it counts: rx, tx, fwd, drop.
    pub counted: &'static str,
    pub packets: u64,
    pub bytes: u64,
    pub port: Option<PortFigures>,
    pub time: Option<ThreadFigures>,
}

#[derive(Debug, Clone, Default)]
pub struct PortFigures {
    pub device: String,
    pub queue: String,
    pub stats: PortStats,
    pub audit: Option<FrameAudit>,
}

/// A tool's own figures beyond its meters' (capture's files and writer).
type Extra = Box<dyn Fn(&mut Exposition) + Send + Sync>;

/// The process's meters and extras, once `--metrics` is on: the meters register as they
/// are made, deep in each tool, so the registry is the process's.
#[derive(Default)]
struct Registry {
    meters: Mutex<Vec<Published<MeterFigures>>>,
    extras: Mutex<Vec<Extra>>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// True when `--metrics` is on (bench, gen, recv, capture).
pub fn enabled() -> bool {
    REGISTRY.get().is_some()
}

/// A slot for a new meter, numbered in the order meters were made; none without
/// `--metrics`.
pub fn register_meter() -> Option<(usize, Published<MeterFigures>)> {
    let registry = REGISTRY.get()?;
    let mut meters = registry.meters.lock().unwrap_or_else(|e| e.into_inner());
    let slot = Published::new();
    meters.push(slot.clone());
    Some((meters.len() - 1, slot))
}

/// Adds a tool's own figures to every scrape (nothing without `--metrics`).
pub fn add_extra(extra: impl Fn(&mut Exposition) + Send + Sync + 'static) {
    if let Some(registry) = REGISTRY.get() {
        let mut extras = registry.extras.lock().unwrap_or_else(|e| e.into_inner());
        extras.push(Box::new(extra));
    }
}

/// A tool's own slots (`cell`), made at the first call, with `render` added to every
/// scrape to read them: where its threads publish figures beyond their meters'.
pub fn tool_slots<S: Default + Send + Sync + 'static>(
    cell: &'static OnceLock<Arc<S>>,
    render: fn(&mut Exposition, &S),
) -> Arc<S> {
    cell.get_or_init(|| {
        let slots = Arc::new(S::default());
        let read = slots.clone();
        add_extra(move |e| render(e, &read));
        slots
    })
    .clone()
}

/// Binds `--metrics` and turns the meters' registry on.
fn bind_for_meters(flag: Option<&str>) -> anyhow::Result<Option<MetricsListener>> {
    let listener = bind(flag)?;
    if listener.is_some() {
        REGISTRY.get_or_init(Registry::default);
    }
    Ok(listener)
}

/// `--metrics` for bench, gen, recv and capture: listens now, and each scrape shows every
/// meter made since and every extra added.
pub fn start_for_meters(tool: &str, flag: Option<&str>) -> anyhow::Result<Option<MetricsServer>> {
    let listener = bind_for_meters(flag)?;
    serve(tool, listener, render_meters)
}

fn render_meters() -> String {
    let mut e = Exposition::new();
    let Some(registry) = REGISTRY.get() else {
        return String::new();
    };
    let meters: Vec<Published<MeterFigures>> = registry
        .meters
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for (t, slot) in meters.iter().enumerate() {
        let Some(f) = slot.latest() else {
            continue;
        };
        let thread = t.to_string();
        let labels = [("thread", thread.as_str()), ("counted", f.counted)];
        e.counter(
            "wirespeed_run_packets_total",
            "Packets the run counted, as its live line does: received (rx), sent (tx), \
             forwarded (fwd), dropped by xdpdrop (drop).",
            &labels,
            f.packets,
        );
        e.counter(
            "wirespeed_run_bytes_total",
            "Bytes of those packets.",
            &labels,
            f.bytes,
        );
        if let Some(p) = &f.port {
            let labels = [
                ("device", p.device.as_str()),
                ("queue", p.queue.as_str()),
                ("thread", thread.as_str()),
            ];
            port_figures(&mut e, &labels, &p.stats);
            if let Some(audit) = &p.audit {
                frame_figures(&mut e, &labels, audit);
            }
        }
        if let Some(time) = &f.time {
            thread_figures(&mut e, &[("thread", thread.as_str())], time);
        }
    }
    for extra in registry
        .extras
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        extra(&mut e);
    }
    e.render()
}
