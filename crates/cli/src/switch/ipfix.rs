//! `--ipfix` and its options: flow records to an IPFIX collector (see
//! `wirespeed_switch::ipfix`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::bail;
use clap::Args;

use wirespeed_switch::ipfix::{ExportConfig, ExportStats, Timeouts};

/// IPFIX options of `wirespeed switch`.
#[derive(Debug, Args)]
pub struct IpfixArgs {
    /// Export flow records over IPFIX (RFC 7011, UDP) to the collector at HOST:PORT
    /// (nfcapd, an Open vSwitch-fed collector; IANA's port is 4739). See below.
    #[arg(long, value_name = "HOST:PORT")]
    pub ipfix: Option<String>,
    /// A flow with packets is reported at least every SECS seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60, requires = "ipfix",
        value_parser = clap::value_parser!(u32).range(1..))]
    pub ipfix_active_timeout: u32,
    /// A flow is reported a last time, and forgotten, after SECS seconds without a packet.
    #[arg(long, value_name = "SECS", default_value_t = 15, requires = "ipfix",
        value_parser = clap::value_parser!(u32).range(1..))]
    pub ipfix_idle_timeout: u32,
    /// Report 1 flow in N, chosen by a hash of its key, with all its packets (see below).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "ipfix",
        value_parser = clap::value_parser!(u32).range(1..))]
    pub ipfix_sampling: u32,
    /// The observation domain id in every message.
    #[arg(long, value_name = "ID", default_value_t = 0, requires = "ipfix")]
    pub ipfix_domain: u32,
    /// Send the templates at start and again every SECS seconds, so a collector started
    /// later decodes records from the next sending on.
    #[arg(long, value_name = "SECS", default_value_t = 10, requires = "ipfix",
        value_parser = clap::value_parser!(u32).range(1..))]
    pub ipfix_template_interval: u32,
}

impl IpfixArgs {
    /// The export's settings, the collector's address resolved (before any port opens);
    /// `None` without `--ipfix`.
    pub fn config(&self) -> anyhow::Result<Option<ExportConfig>> {
        let Some(text) = &self.ipfix else {
            return Ok(None);
        };
        Ok(Some(ExportConfig {
            collector: collector(text)?,
            timeouts: Timeouts {
                active: Duration::from_secs(self.ipfix_active_timeout.into()),
                idle: Duration::from_secs(self.ipfix_idle_timeout.into()),
            },
            sampling: self.ipfix_sampling,
            domain: self.ipfix_domain,
            template_interval: Duration::from_secs(self.ipfix_template_interval.into()),
        }))
    }
}

/// `HOST:PORT` (`[ADDR]:PORT` for IPv6) as one address: the first the name resolves to.
fn collector(text: &str) -> anyhow::Result<SocketAddr> {
    let Some((host, port)) = text.rsplit_once(':') else {
        bail!("--ipfix {text}: give the collector as HOST:PORT (e.g. 127.0.0.1:4739)");
    };
    if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
        bail!(
            "--ipfix {text}: give the collector as HOST:PORT with a port from 1 to 65535 \
             (e.g. 127.0.0.1:4739)"
        );
    }
    let mut addresses = match text.to_socket_addrs() {
        Ok(addresses) => addresses,
        Err(e) => bail!("--ipfix {text}: cannot resolve {host}: {e}"),
    };
    match addresses.next() {
        Some(address) => Ok(address),
        None => bail!("--ipfix {text}: {host} resolves to no address"),
    }
}

/// The export's settings and counters for `--json`.
pub fn summary(config: &ExportConfig, stats: &ExportStats) -> serde_json::Value {
    serde_json::json!({
        "collector": config.collector.to_string(),
        "domain": config.domain,
        "sampling": config.sampling,
        "flows": stats.flows,
        "records": stats.records,
        "messages": stats.messages,
        "templates": stats.templates,
        "send_errors": stats.send_errors,
        "lost_records": stats.lost_records,
        "sampled_out_packets": stats.sampled_out_packets,
        "lost_megaflows": stats.lost_megaflows,
    })
}

#[cfg(test)]
mod tests {
    use super::collector;

    #[test]
    fn collectors() {
        assert_eq!(
            collector("127.0.0.1:4739").unwrap().to_string(),
            "127.0.0.1:4739"
        );
        assert_eq!(collector("[::1]:9995").unwrap().to_string(), "[::1]:9995");
        for (bad, says) in [
            ("127.0.0.1", "give the collector as HOST:PORT"),
            ("127.0.0.1:0", "a port from 1 to 65535"),
            (":4739", "a port from 1 to 65535"),
            ("127.0.0.1:http", "a port from 1 to 65535"),
            (
                "no-such-host.invalid:4739",
                "cannot resolve no-such-host.invalid",
            ),
        ] {
            let e = collector(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--ipfix {bad}: ")), "{e}");
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
