//! Ports the kernel fails to send the fast path's packets out of (`--offload`). The program
//! redirects a flow's packets to its output port, and the kernel may then fail to send them,
//! telling only its tracepoints; on a veth whose peer has no NAPI (no XDP program, GRO off)
//! it fails for every packet. The program blocks such a port at its first failed batch, and
//! the port's flows go up to user space, which sends them like any other. This counts the
//! frames lost, tells the user once, and now and then lets the kernel try again: a retry
//! costs at most one batch, and the wait doubles while the port keeps failing.

use std::time::Duration;

use wirespeed_xdp::XdpError;
use wirespeed_xdp::fast_path::FastPath;

/// The first wait before the kernel tries a blocked port again, and the longest.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
pub const LAST_RETRY: Duration = Duration::from_secs(64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Sending,
    Blocked {
        retry_at: Duration,
    },
    /// Unblocked; `sent` is what the fast path had sent to the port then: once it has
    /// sent more without the port being blocked again, the port works.
    Retrying {
        sent: u64,
    },
}

struct PortWatch {
    port: u32,
    slot: u32,
    /// Frames failed, as of the last look.
    seen: u64,
    state: State,
    wait: Duration,
    /// The user was told the port is blocked (and is told when it sends again).
    told: bool,
}

/// What one look found.
#[derive(Debug, Default)]
pub struct Findings {
    /// (port, frames that failed since the last look), for ports with any.
    pub failed: Vec<(u32, u64)>,
    /// Lines for the log.
    pub messages: Vec<String>,
}

/// The transmit state of every port the fast path sends to.
pub struct TransmitWatch {
    ports: Vec<PortWatch>,
}

impl TransmitWatch {
    /// Watches `ports` (port number, fast-path slot).
    pub fn new(ports: &[(u32, u32)]) -> TransmitWatch {
        TransmitWatch {
            ports: ports
                .iter()
                .map(|&(port, slot)| PortWatch {
                    port,
                    slot,
                    seen: 0,
                    state: State::Sending,
                    wait: FIRST_RETRY,
                    told: false,
                })
                .collect(),
        }
    }

    /// Whether the program sends port `port`'s flows to user space now.
    pub fn blocked(&self, port: u32) -> bool {
        self.ports
            .iter()
            .any(|p| p.port == port && matches!(p.state, State::Blocked { .. }))
    }

    /// Housekeeping: reads what the kernel failed to send, moves each port on (blocked,
    /// tried again, sending again), and says what changed. `sent(port)`: what the fast path
    /// has sent to the port so far, as credited.
    pub fn check(
        &mut self,
        fast_path: &mut FastPath,
        now: Duration,
        sent: impl Fn(u32) -> u64,
    ) -> Result<Findings, XdpError> {
        let mut found = Findings::default();
        for p in &mut self.ports {
            let tx = fast_path.tx_failures(p.slot)?;
            if tx.frames > p.seen {
                found.failed.push((p.port, tx.frames - p.seen));
                p.seen = tx.frames;
            }
            match p.state {
                State::Sending | State::Retrying { .. } if tx.blocked => {
                    let retrying = matches!(p.state, State::Retrying { .. });
                    p.wait = if retrying {
                        (p.wait * 2).min(LAST_RETRY)
                    } else {
                        FIRST_RETRY
                    };
                    p.state = State::Blocked {
                        retry_at: now + p.wait,
                    };
                    if !p.told {
                        p.told = true;
                        found.messages.push(format!(
                            "port {}: the kernel could not send what the fast path forwarded \
                             there ({}): its flows go through user space, and the kernel \
                             tries again after {} s, then less and less often. A veth's peer \
                             takes them only with an XDP program or GRO on (ethtool -K PEER \
                             gro on)",
                            p.port,
                            std::io::Error::from_raw_os_error(-tx.err),
                            p.wait.as_secs()
                        ));
                    }
                }
                State::Blocked { retry_at } if now >= retry_at => {
                    fast_path.unblock(p.slot)?;
                    p.state = State::Retrying { sent: sent(p.port) };
                }
                State::Retrying { sent: then } if sent(p.port) > then => {
                    p.state = State::Sending;
                    p.wait = FIRST_RETRY;
                    if p.told {
                        p.told = false;
                        found.messages.push(format!(
                            "port {}: the kernel sends what the fast path forwards there again",
                            p.port
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(found)
    }
}
