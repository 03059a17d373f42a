//! SIGUSR1: the counts so far on standard error, and the capture goes on, as tcpdump prints
//! its counts on SIGUSR1 (SIGINFO where there is one).

use anyhow::Context;
use signal_hook::consts::SIGUSR1;

use super::metrics::{SoFar, so_far};

/// Answers each SIGUSR1 from now on, on a thread of its own (the signal's default would end
/// the process). `filtered`: the capture has a filter (the lines say what matched means).
pub(super) fn answer_sigusr1(filtered: bool) -> anyhow::Result<()> {
    let mut signals =
        signal_hook::iterator::Signals::new([SIGUSR1]).context("install signal handler")?;
    std::thread::Builder::new()
        .name("sigusr1".to_string())
        .spawn(move || {
            for _ in signals.forever() {
                eprint!("{}", lines(&so_far(), filtered));
            }
        })
        .context("start the SIGUSR1 thread")?;
    Ok(())
}

/// The lines, worded as the summary at exit words them.
fn lines(c: &SoFar, filtered: bool) -> String {
    let matched = match filtered {
        true => "matched by filter",
        false => "matched (no filter)",
    };
    let mut text = format!(
        "{} packets received\n{} packets {matched}\n{} packets written\n\
         {} packets dropped by kernel or ring\n{} packets dropped by writer\n",
        c.received, c.matched, c.written, c.dropped_by_kernel, c.dropped_by_writer
    );
    if c.spilled > 0 {
        text += &format!(
            "{} packets received late, through the spill ring\n",
            c.spilled
        );
    }
    text
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
            lines(&c, true),
            "10 packets received\n7 packets matched by filter\n6 packets written\n\
             2 packets dropped by kernel or ring\n1 packets dropped by writer\n"
        );
        let late = SoFar { spilled: 3, ..c };
        assert!(lines(&late, false).contains("7 packets matched (no filter)\n"));
        assert!(lines(&late, false).ends_with("3 packets received late, through the spill ring\n"));
    }
}
