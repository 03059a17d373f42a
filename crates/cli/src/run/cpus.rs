//! CPU lists on the command line (`0,2-3`).

use anyhow::{Context, bail};

/// The CPUs of a list like "1", "2-3" or "0,2-3", each one this process may run on; `flag`
/// names the option in the messages.
pub fn parse(flag: &str, list: &str) -> anyhow::Result<Vec<usize>> {
    let bad = || format!("{flag} {list}: expected a CPU list like 1, 0,1 or 2-3");
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.trim().parse(), part.trim().parse()),
        };
        let (first, last) = (first.ok().with_context(bad)?, last.ok().with_context(bad)?);
        if first > last || last - first >= 1024 {
            bail!(bad());
        }
        for cpu in first..=last {
            if cpus.contains(&cpu) {
                bail!("{flag} {list}: CPU {cpu} is listed twice");
            }
            cpus.push(cpu);
        }
    }
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .context("read this process's CPU affinity")?;
    if let Some(cpu) = cpus.iter().find(|&&c| !allowed.is_set(c).unwrap_or(false)) {
        bail!("{flag} {list}: CPU {cpu} is not one this process may run on");
    }
    Ok(cpus)
}
