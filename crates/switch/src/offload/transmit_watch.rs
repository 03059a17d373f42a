//! Ports the kernel fails to send the fast path's packets out of (`--offload`). The program
//! redirects a flow's packets to its output port, and the kernel may then fail to send them,
//! telling only its tracepoints; on a veth whose peer has no NAPI (no XDP program, GRO off)
//! it fails for every packet. The program blocks such a port at its first failed batch, and
//! the port's flows go up to user space, which sends them like any other ([`crate::offload`]
//! shows the frames lost). This tells the user once, and now and then lets the kernel try
//! again: a retry costs at most one batch, and the wait doubles while the port keeps failing.

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
    /// Unblocked when the fast path had sent `sent` to the port and the kernel had failed
    /// `failed` frames there. The port works once more was sent with no new failure, seen at
    /// two rounds in a row (`more`: at the first), since the kernel counts a redirect before
    /// it tries to send it.
    Retrying {
        sent: u64,
        failed: u64,
        more: bool,
    },
}

struct PortWatch {
    port: u32,
    slot: u32,
    state: State,
    wait: Duration,
    /// The user was told the port is blocked (and is told when it sends again).
    told: bool,
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
                    state: State::Sending,
                    wait: FIRST_RETRY,
                    told: false,
                })
                .collect(),
        }
    }

    /// Housekeeping: moves each port on (blocked, tried again, sending again) from what the
    /// kernel failed to send; lines for the log when a port's state changes. `sent(port)`:
    /// what the fast path has sent to the port so far, as credited.
    pub fn check(
        &mut self,
        fast_path: &mut FastPath,
        now: Duration,
        sent: impl Fn(u32) -> u64,
    ) -> Result<Vec<String>, XdpError> {
        let mut messages = Vec::new();
        for p in &mut self.ports {
            let tx = fast_path.tx_failures(p.slot)?;
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
                        messages.push(blocked_message(p.port, tx.err, p.wait));
                    }
                }
                State::Blocked { retry_at } if now >= retry_at => {
                    fast_path.unblock(p.slot)?;
                    p.state = State::Retrying {
                        sent: sent(p.port),
                        failed: tx.frames,
                        more: false,
                    };
                }
                State::Retrying {
                    sent: then,
                    failed,
                    more,
                } if sent(p.port) > then && tx.frames == failed => {
                    if !more {
                        p.state = State::Retrying {
                            sent: then,
                            failed,
                            more: true,
                        };
                        continue;
                    }
                    p.state = State::Sending;
                    p.wait = FIRST_RETRY;
                    if p.told {
                        p.told = false;
                        messages.push(format!(
                            "port {}: the kernel sends what the fast path forwards there again",
                            p.port
                        ));
                    }
                }
                // A frame too big for the port failed without blocking it: count from here.
                State::Retrying { .. } if tx.frames != failed_at(p.state) => {
                    p.state = State::Retrying {
                        sent: sent(p.port),
                        failed: tx.frames,
                        more: false,
                    };
                }
                _ => {}
            }
        }
        Ok(messages)
    }
}

/// The failures counted when a retry began (0 in other states).
fn failed_at(state: State) -> u64 {
    match state {
        State::Retrying { failed, .. } => failed,
        _ => 0,
    }
}

/// Why port `port` is blocked (`err`: the kernel's last error, negative) and what to do.
fn blocked_message(port: u32, err: i32, wait: Duration) -> String {
    let error = std::io::Error::from_raw_os_error(-err);
    let hint = if error.kind() == std::io::ErrorKind::NetworkDown {
        "The port is down"
    } else {
        "A veth's peer takes them only with an XDP program or GRO on (ethtool -K PEER gro on)"
    };
    format!(
        "port {port}: the kernel could not send what the fast path forwarded there ({error}): \
         its flows go through user space, and the kernel tries again after {} s, then less \
         and less often. {hint}",
        wait.as_secs()
    )
}
