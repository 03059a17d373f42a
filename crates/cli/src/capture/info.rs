//! SIGUSR1: the counts so far on standard error, and the capture goes on, as tcpdump prints
//! its counts on SIGUSR1 (SIGINFO where there is one).

use anyhow::Context;
use signal_hook::consts::SIGUSR1;

use super::counts::Counts;
use super::metrics::{SoFar, so_far};

/// Answers each SIGUSR1 from now on, on a thread of its own (the signal's default would end
/// the process). `filtered`: the capture has a filter (the lines say what matched means);
/// `from_port`: it has a kernel and rings that can drop (a file, `-r`, has none).
pub(super) fn answer_sigusr1(filtered: bool, from_port: bool) -> anyhow::Result<()> {
    let mut signals =
        signal_hook::iterator::Signals::new([SIGUSR1]).context("install signal handler")?;
    std::thread::Builder::new()
        .name("sigusr1".to_string())
        .spawn(move || {
            for _ in signals.forever() {
                eprint!("{}", counts(&so_far(), filtered, from_port).lines());
            }
        })
        .context("start the SIGUSR1 thread")?;
    Ok(())
}

/// The counts so far as the summary at exit has them (from a port: its kernel's line too).
fn counts(c: &SoFar, filtered: bool, from_port: bool) -> Counts {
    Counts {
        backend: from_port.then(String::new),
        filter: filtered.then(String::new),
        received: c.received,
        matched: c.matched,
        written: c.written,
        dropped_by_kernel: c.dropped_by_kernel,
        dropped_by_writer: c.dropped_by_writer,
        spilled: c.spilled,
        ..Counts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_are_the_summarys() {
        let c = SoFar {
            received: 10,
            matched: 7,
            written: 6,
            dropped_by_kernel: 2,
            dropped_by_writer: 1,
            spilled: 0,
        };
        assert_eq!(
            counts(&c, true, true).lines(),
            "10 packets received\n7 packets matched by filter\n6 packets written\n\
             2 packets dropped by kernel or ring\n1 packets dropped by writer\n"
        );
        let late = SoFar { spilled: 3, ..c };
        let lines = counts(&late, false, true).lines();
        assert!(lines.contains("7 packets matched (no filter)\n"), "{lines}");
        assert!(
            lines.ends_with("3 packets received late, through the spill ring\n"),
            "{lines}"
        );
        let from_file = counts(&c, true, false).lines();
        assert!(!from_file.contains("kernel"), "{from_file}");
    }
}
