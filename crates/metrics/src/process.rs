//! The serving process's own figures, under the names Prometheus' client libraries give
//! them (`process_*`), so a dashboard made for any exporter reads them: CPU time, memory,
//! open descriptors and when the process started. Read from /proc at each scrape.

use crate::Exposition;

/// The figures as one exposition (appended to every `/metrics` answer). Those /proc does
/// not give are left out.
pub fn process_figures() -> String {
    let mut e = Exposition::new();
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&t| t > 0)
        .map(|t| t as f64);
    // The fields after the command's closing parenthesis (which may hold spaces): state is
    // field 3, utime 14, stime 15, starttime 22, vsize 23 (proc(5)).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    if let (Some(user), Some(system), Some(ticks)) = (field(14), field(15), ticks) {
        e.seconds(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            &[],
            (user + system) as f64 / ticks,
        );
    }
    if let (Some(start), Some(ticks), Some(boot)) = (field(22), ticks, boot_time()) {
        e.gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            &[],
            boot as f64 + start as f64 / ticks,
        );
    }
    if let Some(vsize) = field(23) {
        e.gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            &[],
            vsize as f64,
        );
    }
    if let Some(rss) = status_kib("VmRSS:") {
        e.gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            &[],
            (rss * 1024) as f64,
        );
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        e.gauge(
            "process_open_fds",
            "Number of open file descriptors.",
            &[],
            fds.count() as f64,
        );
    }
    e.render()
}

/// When the host booted, seconds since the epoch (/proc/stat's `btime`).
fn boot_time() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A `/proc/self/status` line's value in KiB (`VmRSS:   1234 kB`).
fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_its_figures() {
        let text = process_figures();
        for name in [
            "process_cpu_seconds_total",
            "process_start_time_seconds",
            "process_virtual_memory_bytes",
            "process_resident_memory_bytes",
            "process_open_fds",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}: {text}");
        }
        let started = text
            .lines()
            .find_map(|l| l.strip_prefix("process_start_time_seconds "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // The test binary started within the last hour, and not in the future.
        assert!(
            started <= now + 1.0 && now - started < 3600.0,
            "{started} {now}"
        );
    }
}
