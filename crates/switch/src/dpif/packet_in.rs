//! Where the packets the rules send to the controller (`actions=controller`) go: a
//! [`PacketInSink`]. The switch has three: a line on stderr a packet ([`PacketInLog`], the
//! default), a pcap file (the CLI's `--controller-pcap`), and PACKET_IN messages to the
//! OpenFlow controllers (`openflow::session`).

use std::time::{Duration, Instant};

use crate::rule::PacketInOrigin;

/// Where packets sent to the controller go (`actions=controller`).
pub trait PacketInSink: Send {
    /// A packet as it was when the action list ended (`data`: at most the bytes the action
    /// asked for, of `len`), the port it came in on, and the rule that sent it.
    fn packet_in(&mut self, in_port: u32, origin: PacketInOrigin, data: &[u8], len: usize);

    /// Called by the control side every 50 ms or so: a controller writing a file hands it
    /// what it holds, so packet-ins show up while the switch runs.
    fn tick(&mut self) {}

    /// Finishes (flushes a file); the line says what was done, or what went wrong.
    fn close(&mut self) -> Result<String, String> {
        Ok(String::new())
    }
}

/// Lines a second the log controller writes at most.
pub const LOG_LINES_PER_SECOND: u32 = 20;

/// The default controller: a line on stderr a packet, at most [`LOG_LINES_PER_SECOND`] a
/// second, so a flood sent to the controller does not hold a poll-mode thread on the
/// terminal. Each second with more ends with how many were not shown, and so does the log.
#[derive(Default)]
pub struct PacketInLog {
    /// When the current second began, and how many lines it has shown.
    second: Option<(Instant, u32)>,
    /// Packet-ins of the current second not shown.
    unshown: u64,
}

impl PacketInLog {
    fn report_unshown(&mut self) {
        if self.unshown > 0 {
            eprintln!(
                "wirespeed switch: controller: {} more packet-ins not shown (at most {} lines \
                 a second)",
                self.unshown, LOG_LINES_PER_SECOND
            );
            self.unshown = 0;
        }
    }
}

impl PacketInSink for PacketInLog {
    fn packet_in(&mut self, in_port: u32, _origin: PacketInOrigin, _data: &[u8], len: usize) {
        let now = Instant::now();
        let shown = match self.second {
            Some((start, shown)) if now.duration_since(start) < Duration::from_secs(1) => shown,
            _ => {
                self.report_unshown();
                self.second = Some((now, 0));
                0
            }
        };
        if shown < LOG_LINES_PER_SECOND {
            eprintln!("wirespeed switch: controller: in_port={in_port} len={len}");
            self.second = self.second.map(|(start, n)| (start, n + 1));
        } else {
            self.unshown += 1;
        }
    }

    /// A second that ended with packet-ins not shown says so now, not at the next one.
    fn tick(&mut self) {
        if self
            .second
            .is_some_and(|(start, _)| start.elapsed() >= Duration::from_secs(1))
        {
            self.report_unshown();
        }
    }

    fn close(&mut self) -> Result<String, String> {
        self.report_unshown();
        Ok(String::new())
    }
}
