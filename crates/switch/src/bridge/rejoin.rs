//! A port whose interface was deleted comes back when an interface is made again under its
//! name, as Open vSwitch re-adds it: a container restarted deletes its veth and makes a new
//! one, and its port should not stay out until the switch restarts. Each poll-mode thread
//! in turn binds its socket of the port to the new interface ([`PmdRequest::Rejoin`]; one at
//! a time, so one attaches the redirect program and the others join it), then the port
//! takes the new interface's state and `announce_links` tells the log and the controllers
//! (PORT_STATUS ADD). A failure is said once per interface and tried again a second later:
//! a thread bound already answers at once.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use wirespeed_port::{Backend, LinkState, PortError, PortSpec};

use super::{Bridge, SNAPSHOT_TIMEOUT, Threads};
use crate::dpif::pmd::PmdRequest;

/// How long a port that failed to bind waits before it tries again.
const RETRY: Duration = Duration::from_secs(1);

/// A gone port's last try to bind again: when, and the interface whose failure was said.
#[derive(Default, Clone, Copy)]
pub(super) struct Rejoining {
    tried: Option<Instant>,
    said: Option<u32>,
}

impl Bridge {
    /// Binds each port whose interface is gone to the interface made since under its name,
    /// if there is one (and a failed try is a second old).
    pub(super) fn rejoin_ports(&mut self) {
        for port in 0..self.specs.len() {
            if self.links.get(port) != LinkState::Gone {
                continue;
            }
            let Ok(spec) = self.specs[port].parse::<PortSpec>() else {
                continue;
            };
            let Some(ifindex) = wirespeed_port::xdp::if_index(&spec.iface) else {
                continue;
            };
            if self.rejoining[port]
                .tried
                .is_some_and(|t| t.elapsed() < RETRY)
            {
                continue;
            }
            // The port's going is told before its coming back, however fast that was (and
            // the threads' answers for another port may have taken a while).
            self.announce_links(self.now());
            self.rejoining[port].tried = Some(Instant::now());
            match self.rejoin(port, &spec, ifindex) {
                Ok(()) => {
                    self.links.rebound(port, ifindex);
                    self.rejoining[port] = Rejoining::default();
                }
                Err(e) if self.rejoining[port].said != Some(ifindex) => {
                    self.rejoining[port].said = Some(ifindex);
                    eprintln!(
                        "wirespeed switch: port {} ({spec}): interface {} made again (index \
                         {ifindex}), but the port stays out: {e}",
                        self.numbers[port], spec.iface
                    );
                }
                Err(_) => {}
            }
        }
    }

    /// Asks each thread in turn to bind `port` to interface `ifindex`; the first failure.
    fn rejoin(&mut self, port: usize, spec: &PortSpec, ifindex: u32) -> Result<(), PortError> {
        if !matches!(spec.backend, Backend::Xdp | Backend::Packet) {
            return Err(PortError::Unsupported(format!(
                "a {} port is not bound again (AF_XDP and AF_PACKET ports are): restart the \
                 switch to use it",
                spec.backend.name()
            )));
        }
        if self.offload && spec.backend == Backend::Xdp {
            return Err(PortError::Unsupported(
                "with --offload the fast path does not take a port back: restart the switch \
                 to use it"
                    .to_string(),
            ));
        }
        // N threads bind queues 0..N of an AF_XDP port, one after the other: an interface
        // made again with fewer is refused before any binds, else the first threads would
        // take their queues (and the interface's traffic with them) for a port that stays
        // out.
        let threads = match &self.threads {
            Threads::Parked(pmds) => pmds.len(),
            Threads::Running(running) => running.len(),
        };
        let queues = wirespeed_port::xdp::queue_count(&spec.iface);
        if spec.backend == Backend::Xdp && threads > 1 && (queues as usize) < threads {
            return Err(PortError::NoQueue {
                iface: spec.iface.clone(),
                queue: threads as u32 - 1,
                count: queues,
            });
        }
        match &mut self.threads {
            Threads::Parked(pmds) => pmds.iter_mut().try_for_each(|p| p.rejoin(port, ifindex)),
            Threads::Running(running) => running.iter().try_for_each(|r| {
                let (done, answer) = mpsc::channel();
                let asked = PmdRequest::Rejoin {
                    member: port,
                    ifindex,
                    done,
                };
                let _ = r.ask(asked);
                answer.recv_timeout(SNAPSHOT_TIMEOUT).unwrap_or_else(|_| {
                    Err(PortError::Unsupported(
                        "a poll-mode thread did not answer".to_string(),
                    ))
                })
            }),
        }
    }
}
