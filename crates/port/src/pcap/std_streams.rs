//! Standard input and output as a pcap port's files (`-`). Each stream can serve one port of
//! the process: two replays of one stdin, or two recordings into one stdout, would interleave.

use std::sync::atomic::{AtomicBool, Ordering};

static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);
static STDOUT_TAKEN: AtomicBool = AtomicBool::new(false);

/// A port's hold on standard input or output, given up when dropped.
pub(crate) struct StreamClaim(&'static AtomicBool);

impl StreamClaim {
    pub fn stdin() -> Result<StreamClaim, String> {
        StreamClaim::take(&STDIN_TAKEN, "standard input")
    }

    pub fn stdout() -> Result<StreamClaim, String> {
        StreamClaim::take(&STDOUT_TAKEN, "standard output")
    }

    fn take(flag: &'static AtomicBool, name: &str) -> Result<StreamClaim, String> {
        match flag.swap(true, Ordering::AcqRel) {
            true => Err(format!("{name} is already a file of another pcap port")),
            false => Ok(StreamClaim(flag)),
        }
    }
}

impl Drop for StreamClaim {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_serves_one_port_at_a_time() {
        let first = StreamClaim::stdin().unwrap();
        let e = StreamClaim::stdin().err().unwrap();
        assert!(e.contains("standard input is already"), "{e}");
        drop(first);
        assert!(StreamClaim::stdin().is_ok());
    }
}
