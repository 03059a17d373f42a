//! `--metrics ADDR`: Prometheus' `/metrics` for a running tool. The listener is bound
//! before the tool opens its ports (an address in use refuses the start, nothing opened),
//! and answers once the tool has figures to show.

use anyhow::Context;
use wirespeed_metrics::{MetricsListener, MetricsServer, listen_address};

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
    render: impl Fn() -> String + Send + 'static,
) -> anyhow::Result<Option<MetricsServer>> {
    let Some(listener) = listener else {
        return Ok(None);
    };
    let addr = listener.local_addr();
    let server = listener.serve(render).context("--metrics")?;
    eprintln!("wirespeed {tool}: metrics at http://{addr}/metrics");
    Ok(Some(server))
}
