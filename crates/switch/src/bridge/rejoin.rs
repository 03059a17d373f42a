//! A port whose interface was deleted comes back when an interface is made again under its
//! name, as Open vSwitch re-adds it: a container restarted deletes its veth and makes a new
//! one, and its port should not stay out until the switch restarts. Every poll-mode thread
//! binds its socket of the port to the new interface ([`PmdRequest::Rejoin`]), then the
//! port takes the new interface's state and `announce_links` tells the log and the
//! controllers (PORT_STATUS ADD). Each new interface is tried once; a failure is said and
//! the port stays gone.

use std::sync::mpsc;

use wirespeed_port::{Backend, LinkState, PortError, PortSpec};

use super::{Bridge, SNAPSHOT_TIMEOUT, Threads};
use crate::dpif::pmd::PmdRequest;

impl Bridge {
    /// Binds each port whose interface is gone to the interface made since under its name,
    /// if there is one it has not tried.
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
            if self.links.ifindex(port) == Some(ifindex) {
                // Bound to it already, and marked gone by a reader that asked about the
                // interface before (whose index is gone for good): it is not.
                self.links.rebound(port, ifindex);
                continue;
            }
            if self.rejoin_tried[port] == Some(ifindex) {
                continue;
            }
            self.rejoin_tried[port] = Some(ifindex);
            let n = self.numbers[port];
            match self.rejoin(port, &spec) {
                Ok(()) => self.links.rebound(port, ifindex),
                Err(e) => eprintln!(
                    "wirespeed switch: port {n} ({spec}): interface {} made again (index \
                     {ifindex}), but the port stays out: {e}",
                    spec.iface
                ),
            }
        }
    }

    /// Asks every thread to bind `port` again; the first failure.
    fn rejoin(&mut self, port: usize, spec: &PortSpec) -> Result<(), PortError> {
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
        match &mut self.threads {
            Threads::Parked(pmds) => pmds.iter_mut().try_for_each(|p| p.rejoin(port)),
            Threads::Running(running) => {
                let answers: Vec<_> = running
                    .iter()
                    .map(|r| {
                        let (done, answer) = mpsc::channel();
                        let _ = r.requests.send(PmdRequest::Rejoin { member: port, done });
                        answer
                    })
                    .collect();
                answers.iter().try_for_each(|a| {
                    a.recv_timeout(SNAPSHOT_TIMEOUT).unwrap_or_else(|_| {
                        Err(PortError::Unsupported(
                            "a poll-mode thread did not answer".to_string(),
                        ))
                    })
                })
            }
        }
    }
}
