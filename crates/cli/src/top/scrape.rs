//! Where `top` reads from, and one reading: a tool's `/metrics` page over HTTP, or a switch's
//! control socket (its `metrics` command answers the same text; `dump-flows` the rules).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use wirespeed_switch::Request;

use super::flows::{RuleCount, parse_dump_flows};
use super::http;
use super::prom_text::{Sample, parse};

/// What `top` watches.
#[derive(Debug, Clone)]
pub struct Source {
    /// A tool's `--metrics HOST:PORT`.
    pub metrics: Option<String>,
    /// A switch's control socket: its metrics when there is no `metrics` address, its rules.
    pub ctl: Option<PathBuf>,
    /// Ask the control socket for its rules (dump-flows) each interval.
    pub rules: bool,
}

/// One reading of the source, and when it was taken.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub at: Instant,
    pub samples: Vec<Sample>,
    /// The switch's rules (None without a control socket).
    pub rules: Option<Vec<RuleCount>>,
    /// Why there are no samples, when a switch's control socket has no `metrics` command.
    pub no_metrics: Option<String>,
}

impl Source {
    /// What the header names: the address, the socket, or both.
    pub fn describe(&self) -> String {
        match (&self.metrics, &self.ctl) {
            (Some(addr), Some(ctl)) => format!("{addr} + {}", ctl.display()),
            (Some(addr), None) => addr.clone(),
            (None, Some(ctl)) => ctl.display().to_string(),
            (None, None) => String::new(),
        }
    }

    /// Reads the source once; `timeout` bounds each connection's steps.
    pub fn scrape(&self, timeout: Duration) -> anyhow::Result<Scrape> {
        let mut no_metrics = None;
        let samples = match (&self.metrics, &self.ctl) {
            (Some(addr), _) => scrape_http(addr, timeout)?,
            (None, Some(ctl)) => match ctl_request(ctl, "metrics", timeout) {
                Ok(text) => parse(&text)
                    .with_context(|| format!("{}: metrics: not Prometheus text", ctl.display()))?,
                Err(CtlError::Refused(why)) => {
                    no_metrics = Some(format!("the switch has no metrics command ({why})"));
                    Vec::new()
                }
                Err(CtlError::Other(e)) => return Err(e),
            },
            (None, None) => bail!("nothing to watch: give --metrics HOST:PORT or --ctl PATH"),
        };
        let rules = match &self.ctl {
            Some(ctl) if self.rules => Some(parse_dump_flows(
                &ctl_request(ctl, "dump-flows", timeout).map_err(CtlError::into_anyhow)?,
            )),
            _ => None,
        };
        Ok(Scrape {
            at: Instant::now(),
            samples,
            rules,
            no_metrics,
        })
    }
}

fn scrape_http(addr: &str, timeout: Duration) -> anyhow::Result<Vec<Sample>> {
    let text = http::get(addr, "/metrics", timeout)?;
    parse(&text).with_context(|| format!("{addr}: /metrics is not Prometheus text"))
}

/// A control request that failed: refused by the switch (it answered, no), or not answered.
enum CtlError {
    Refused(String),
    Other(anyhow::Error),
}

impl CtlError {
    fn into_anyhow(self) -> anyhow::Error {
        match self {
            CtlError::Refused(why) => anyhow::anyhow!(why),
            CtlError::Other(e) => e,
        }
    }
}

/// How long top waits for a switch's answer at least.
const CTL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn ctl_request(
    ctl: &std::path::Path,
    command: &str,
    timeout: Duration,
) -> Result<String, CtlError> {
    let request = Request {
        command: command.to_string(),
        args: vec![String::new()],
    };
    // A view that waits on a stuck switch shows nothing: it says so instead.
    let answer =
        wirespeed_switch::bridge::control::request_within(ctl, &request, timeout.max(CTL_TIMEOUT))
            .map_err(|e| CtlError::Other(e.into()))?;
    if !answer.ok {
        return Err(CtlError::Refused(format!(
            "{}: {command}: {}",
            ctl.display(),
            answer.output
        )));
    }
    Ok(answer.output)
}
