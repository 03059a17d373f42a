//! What the kernel dropped on the interface a socket engine sends through, after the port
//! handed it the frames: the interface's own `tx_dropped` counter, read at the start and
//! the end of a run. AF_XDP completes a sent frame whether or not the device passed it on,
//! so a veth whose peer is down takes every frame and drops it while the port counts them
//! all as sent; the counter says what became of them. Whatever else went out through the
//! interface meanwhile (the host's own packets) is in it too, which the note says.

use std::collections::BTreeMap;

use wirespeed_port::{Backend, PortSpec};

/// The drop reason the summaries list it under.
pub const REASON: &str = "tx_dropped_by_interface";

pub struct InterfaceTxDrops {
    iface: String,
    at_start: u64,
}

impl InterfaceTxDrops {
    /// For an AF_XDP port's interface; None for other ports, or where the counter cannot be
    /// read.
    pub fn start(spec: &PortSpec) -> Option<InterfaceTxDrops> {
        if spec.backend != Backend::Xdp {
            return None;
        }
        let at_start = read(&spec.iface)?;
        Some(InterfaceTxDrops {
            iface: spec.iface.clone(),
            at_start,
        })
    }

    /// What the counter rose by since the start (0 once the interface is gone).
    pub fn since_start(&self) -> u64 {
        read(&self.iface).map_or(0, |now| now.saturating_sub(self.at_start))
    }

    /// Adds what the counter rose by to a summary's `drops` (under [`REASON`]) and
    /// `drops_total`, with a note (said now, and kept in `notes`); returns it.
    pub fn account(
        &self,
        drops: &mut BTreeMap<&'static str, u64>,
        drops_total: &mut u64,
        notes: &mut Vec<String>,
    ) -> u64 {
        let dropped = self.since_start();
        if dropped > 0 {
            *drops.entry(REASON).or_default() += dropped;
            *drops_total += dropped;
            let note = self.note(dropped);
            eprintln!("wirespeed: note: {note}");
            notes.push(note);
        }
        dropped
    }

    /// What the user should know of `dropped` of them.
    fn note(&self, dropped: u64) -> String {
        format!(
            "the kernel dropped {dropped} frames on {} after the port handed them over (its \
             tx_dropped counter, which also counts anything else sent there meanwhile): a \
             veth whose peer is down drops every frame",
            self.iface
        )
    }
}

fn read(iface: &str) -> Option<u64> {
    if iface.is_empty() || iface.contains('/') || iface.chars().all(|c| c == '.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{iface}/statistics/tx_dropped"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_xdp_ports_on_an_interface_are_watched() {
        let lo: PortSpec = "xdp:lo".parse().unwrap();
        let watch = InterfaceTxDrops::start(&lo).expect("lo has a tx_dropped counter");
        assert_eq!(watch.since_start(), 0);
        for other in ["packet:lo", "xdp:wsnosuch0", "pcap:x.pcap"] {
            let spec: PortSpec = other.parse().unwrap();
            assert!(InterfaceTxDrops::start(&spec).is_none(), "{other}");
        }
    }
}
