//! CPU lists on the command line (`0,2-3`), and `--cpus`, the CPUs the kernel engine sends
//! from (`bench txpush`, `gen`).

use anyhow::{Context, bail};
use clap::Args;

/// The kernel engine's option of `bench` and `gen`.
#[derive(Debug, Args, Clone, Default)]
pub struct LiveFlags {
    /// Kernel engine: send from each CPU of this list (like 0,1 or 0-3), with threads pinned
    /// to it; default: the one CPU the command starts on. On veth give the peer as many
    /// receive queues as CPUs (numrxqueues N), so each CPU's frames land on a queue of their
    /// own. bench rxdrop and l2fwd on a port of several queues (xdp:IF@all, xdp:IF@0-3): a
    /// thread pinned to each CPU of the list, the queues shared out between them in turn,
    /// each thread with its own sockets, rings and frames.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
}

impl LiveFlags {
    /// The CPUs asked for, checked before anything is sent; without `--cpus`, the kernel
    /// engine's is the one this thread runs on. Its two threads on one CPU take turns; left
    /// to the scheduler they would also send at once from two, into one queue of the peer,
    /// and overflow it.
    pub fn cpus(&self, kernel_engine: bool) -> anyhow::Result<Vec<usize>> {
        match &self.cpus {
            None if kernel_engine => Ok(vec![
                nix::sched::sched_getcpu().context("find the CPU this thread runs on")?,
            ]),
            None => Ok(Vec::new()),
            Some(list) if !kernel_engine => bail!(
                "--cpus {list} is for --engine kernel: the socket engine sends from one thread"
            ),
            Some(list) => parse("--cpus", list),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_only_for_the_kernel_engine() {
        let flags = LiveFlags {
            cpus: Some("0".to_string()),
        };
        assert!(flags.cpus(true).is_ok());
        let err = flags.cpus(false).unwrap_err().to_string();
        assert!(err.contains("is for --engine kernel"), "{err}");
        assert!(LiveFlags::default().cpus(false).unwrap().is_empty());
        assert_eq!(LiveFlags::default().cpus(true).unwrap().len(), 1);
    }
}
