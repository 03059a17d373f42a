//! Prometheus' own tools as judges: `promtool check metrics` on a scrape, and a real
//! Prometheus server scraping a running tool, asked through its query API.

use super::*;

/// `GET http://ADDR/metrics` from inside `ns` (curl): the body; panics on a failed request.
pub fn scrape(ns: &str, addr: &str) -> String {
    let url = format!("http://{addr}/metrics");
    let out = sh(&["ip", "netns", "exec", ns, "curl", "-sS", "--fail", &url]);
    assert!(
        out.status.success(),
        "scrape {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the metrics are text")
}

/// Scrapes until the sample of `name` with `labels` reads `want` (tools publish their
/// figures every 100 ms, a switch's threads when they look up from their ports); the text
/// then. Panics after 10 s with the last scrape.
pub fn scrape_until(
    ns: &str,
    addr: &str,
    name: &str,
    labels: &[(&str, &str)],
    want: f64,
) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let text = scrape(ns, addr);
        let found = text.lines().any(|l| {
            l.starts_with(name)
                && labels
                    .iter()
                    .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        });
        if found && sample(&text, name, labels) == want {
            return text;
        }
        assert!(
            Instant::now() < until,
            "{name} {labels:?} never {want}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `promtool check metrics` accepts `text` (no lint problem at all).
pub fn assert_promtool_accepts(text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value of the sample of `name` whose labels include every one of `labels`, from a
/// scrape's text; panics when there is none.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{text}"))
}

/// A Prometheus server in `ns` scraping `target` (HOST:PORT) every second, its data in a
/// directory of its own; stopped and removed when dropped.
pub struct Prometheus {
    ns: String,
    web: String,
    child: Option<Child>,
    dir: String,
}

impl Prometheus {
    pub fn start(ns: &str, target: &str, web: &str) -> Prometheus {
        let dir = format!(
            "{}/wirespeed-prometheus-{}-{}",
            std::env::temp_dir().display(),
            std::process::id(),
            unique_id("pr")
        );
        std::fs::create_dir_all(format!("{dir}/data")).unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  \
             - job_name: wirespeed\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(format!("{dir}/prometheus.yml"), config).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "prometheus"])
            .arg(format!("--config.file={dir}/prometheus.yml"))
            .arg(format!("--storage.tsdb.path={dir}/data"))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian's prometheus package)");
        Prometheus {
            ns: ns.to_string(),
            web: web.to_string(),
            child: Some(child),
            dir,
        }
    }

    /// An instant query's values (each series' value), empty while it has none; None while
    /// the server does not answer yet.
    pub fn query(&self, expr: &str) -> Option<Vec<f64>> {
        let url = format!("http://{}/api/v1/query", self.web);
        let query = format!("query={expr}");
        let out = sh(&[
            "ip",
            "netns",
            "exec",
            &self.ns,
            "curl",
            "-sS",
            "--fail",
            "--data-urlencode",
            &query,
            &url,
        ]);
        if !out.status.success() {
            return None;
        }
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        assert_eq!(j["status"], "success", "{j}");
        let values = j["data"]["result"]
            .as_array()?
            .iter()
            .filter_map(|r| r["value"][1].as_str()?.parse().ok())
            .collect();
        Some(values)
    }

    /// Waits (up to 30 s) until `expr` has exactly one series, with value `want`; its
    /// value then. Panics with the last answer if it never does.
    pub fn wait_for_value(&self, expr: &str, want: f64) -> f64 {
        let until = Instant::now() + Duration::from_secs(30);
        let mut last = None;
        while Instant::now() < until {
            last = self.query(expr);
            if let Some(v) = &last
                && v.len() == 1
                && v[0] == want
            {
                return v[0];
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("prometheus never gave {expr} = {want}: last {last:?}");
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
