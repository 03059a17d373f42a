//! The exporter's flows: what the datapath's counters said of each flow since its last
//! report, and when reports are due (RFC 7011's active and idle timeouts). Pure: the times
//! are the bridge's clock, handed in.

use core::time::Duration;
use std::collections::HashMap;

use crate::ipfix::record::{EndReason, FlowKey, FlowRecord, UnixNanos};

/// Packets and bytes of one flow counted by one place in the datapath (a megaflow, a fast
/// path entry) since they were last taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Observation {
    pub key: FlowKey,
    /// The output port (0: not one port).
    pub egress: u32,
    pub packets: u64,
    /// Frame bytes (the datapath counts frames).
    pub frame_bytes: u64,
    /// Bytes in front of the IP header in each of its frames (Ethernet, VLAN tag).
    pub l2_header: u64,
    /// TCP's flags of those packets, ORed (0 when not TCP).
    pub tcp_flags: u16,
    /// When the counting place was made (its first packet) and when its last packet came.
    pub first: Duration,
    pub last: Duration,
}

/// When flows are reported.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Timeouts {
    /// A flow with packets is reported at least this often...
    pub active: Duration,
    /// ...and once more, and forgotten, when none came for this long.
    pub idle: Duration,
}

/// What a flow has counted since its last report.
#[derive(Debug)]
struct FlowState {
    egress: u32,
    packets: u64,
    octets: u64,
    frame_bytes: u64,
    tcp_flags: u16,
    /// The first and last packet of what is to be reported.
    start: Duration,
    last: Duration,
    /// When it was last reported.
    reported: Option<Duration>,
}

pub struct FlowTable {
    flows: HashMap<FlowKey, FlowState>,
    timeouts: Timeouts,
    /// One flow in this many is reported.
    sampling: u32,
    /// The bridge's clock's zero, in Unix time.
    epoch: UnixNanos,
    /// Packets of flows sampling left out.
    pub sampled_out_packets: u64,
}

impl FlowTable {
    pub fn new(timeouts: Timeouts, sampling: u32, epoch: UnixNanos) -> FlowTable {
        FlowTable {
            flows: HashMap::new(),
            timeouts,
            sampling: sampling.max(1),
            epoch,
            sampled_out_packets: 0,
        }
    }

    /// Whether flow `key` is one sampling reports: 1 in N flows, by a hash of the key, so
    /// every count of a chosen flow is reported and nothing of the others.
    pub fn samples(&self, key: &FlowKey) -> bool {
        self.sampling == 1 || key.stable_hash().is_multiple_of(u64::from(self.sampling))
    }

    /// Flows known (reported or not yet).
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Adds what one place in the datapath counted for a flow.
    pub fn observe(&mut self, seen: Observation) {
        if seen.packets == 0 && seen.frame_bytes == 0 {
            // The kernel ORs a packet's flags in after counting it: a read between the two
            // brings them later, alone.
            if let Some(flow) = self.flows.get_mut(&seen.key) {
                flow.tcp_flags |= seen.tcp_flags;
            }
            return;
        }
        if !self.samples(&seen.key) {
            self.sampled_out_packets += seen.packets;
            return;
        }
        let octets = seen
            .frame_bytes
            .saturating_sub(seen.packets * seen.l2_header);
        let flow = self.flows.entry(seen.key).or_insert(FlowState {
            egress: seen.egress,
            packets: 0,
            octets: 0,
            frame_bytes: 0,
            tcp_flags: 0,
            start: seen.first,
            last: seen.last,
            reported: None,
        });
        // Packets since the last report came after it; a place made later, after that.
        let start = flow.reported.unwrap_or(Duration::ZERO).max(seen.first);
        if flow.packets == 0 {
            flow.start = start;
            flow.last = seen.last;
            flow.egress = seen.egress;
        } else {
            flow.start = flow.start.min(start);
            flow.last = flow.last.max(seen.last);
            if flow.egress != seen.egress {
                flow.egress = 0;
            }
        }
        flow.packets += seen.packets;
        flow.octets += octets;
        flow.frame_bytes += seen.frame_bytes;
        flow.tcp_flags |= seen.tcp_flags;
    }

    /// The reports due at `now`: flows idle for the idle timeout (then forgotten), and
    /// flows with packets whose report began the active timeout ago.
    pub fn expire(&mut self, now: Duration, records: &mut Vec<FlowRecord>) {
        let (timeouts, epoch) = (self.timeouts, self.epoch);
        self.flows.retain(|key, flow| {
            let idle = now.saturating_sub(flow.last) >= timeouts.idle;
            let active = now.saturating_sub(flow.start) >= timeouts.active;
            if flow.packets > 0 && (idle || active) {
                let reason = match idle {
                    true => EndReason::IdleTimeout,
                    false => EndReason::ActiveTimeout,
                };
                records.push(report(key, flow, reason, now, epoch));
            }
            !idle
        });
    }

    /// Every flow with packets not yet reported, as the switch stops; the table is emptied.
    pub fn drain(&mut self, now: Duration, records: &mut Vec<FlowRecord>) {
        for (key, mut flow) in self.flows.drain() {
            if flow.packets > 0 {
                records.push(report(
                    &key,
                    &mut flow,
                    EndReason::ForcedEnd,
                    now,
                    self.epoch,
                ));
            }
        }
    }
}

/// The report of `flow`'s counts since its last one; they start again from zero.
fn report(
    key: &FlowKey,
    flow: &mut FlowState,
    reason: EndReason,
    now: Duration,
    epoch: UnixNanos,
) -> FlowRecord {
    let at = |d: Duration| epoch + d.as_nanos() as u64;
    let record = FlowRecord {
        key: *key,
        egress: flow.egress,
        packets: flow.packets,
        octets: flow.octets,
        layer2_octets: flow.frame_bytes,
        start: at(flow.start.min(flow.last)),
        end: at(flow.last),
        reason,
        tcp_flags: flow.tcp_flags,
    };
    flow.packets = 0;
    flow.octets = 0;
    flow.frame_bytes = 0;
    flow.tcp_flags = 0;
    flow.reported = Some(now);
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipfix::record::Addresses;
    use std::net::Ipv4Addr;

    const S: Duration = Duration::from_secs(1);

    fn key(src_port: u16) -> FlowKey {
        FlowKey {
            addresses: Addresses::V4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
            protocol: 17,
            src_port,
            dst_port: 9,
            vlan: 0,
            ingress: 1,
            tunnel: None,
        }
    }

    fn seen(src_port: u16, packets: u64, first: Duration, last: Duration) -> Observation {
        Observation {
            key: key(src_port),
            egress: 2,
            packets,
            frame_bytes: packets * 100,
            l2_header: 14,
            tcp_flags: 0,
            first,
            last,
        }
    }

    fn table() -> FlowTable {
        let timeouts = Timeouts {
            active: 60 * S,
            idle: 15 * S,
        };
        FlowTable::new(timeouts, 1, 1_000_000_000_000_000_000)
    }

    #[test]
    fn idle_flows_are_reported_once_and_forgotten() {
        let mut table = table();
        table.observe(seen(1, 3, S, 2 * S));
        // A second place (another thread's megaflow, the fast path) adds to the same flow.
        table.observe(Observation {
            l2_header: 14,
            ..seen(1, 2, 3 * S, 4 * S)
        });
        let mut records = Vec::new();
        table.expire(18 * S, &mut records);
        assert!(records.is_empty(), "idle for 14 s only");
        table.expire(19 * S, &mut records);
        assert_eq!(records.len(), 1);
        let r = records[0];
        assert_eq!(
            (r.packets, r.layer2_octets, r.octets),
            (5, 500, 500 - 5 * 14)
        );
        assert_eq!((r.egress, r.reason), (2, EndReason::IdleTimeout));
        assert_eq!(r.start, 1_000_000_001_000_000_000);
        assert_eq!(r.end, 1_000_000_004_000_000_000);
        assert!(table.is_empty());
    }

    #[test]
    fn long_flows_are_reported_every_active_timeout_with_their_deltas() {
        let mut table = table();
        let mut records = Vec::new();
        for second in 1..=130u32 {
            let now = second * S;
            table.observe(seen(1, 10, S, now));
            table.expire(now, &mut records);
        }
        // Begun at 1 s: reported at 61 s and 121 s.
        assert_eq!(records.len(), 2, "{records:?}");
        assert!(records.iter().all(|r| r.reason == EndReason::ActiveTimeout));
        assert_eq!(records[0].packets, 610);
        assert_eq!(records[1].packets, 600);
        // The second report starts where the first was made.
        assert_eq!(records[1].start, 1_000_000_061_000_000_000);
        table.drain(130 * S, &mut records);
        assert_eq!(records[2].packets, 90);
        assert_eq!(records[2].reason, EndReason::ForcedEnd);
        let total: u64 = records.iter().map(|r| r.packets).sum::<u64>();
        assert_eq!(total, 1300);
    }

    /// A report has the flags of the packets since the last one, from every place that
    /// counted them; flags the kernel brought alone join a flow already there.
    #[test]
    fn tcp_flags_are_ored_per_report() {
        let mut table = table();
        let with_flags = |packets, tcp_flags| Observation {
            tcp_flags,
            ..seen(1, packets, S, S)
        };
        table.observe(with_flags(1, 0x002));
        table.observe(with_flags(2, 0x010));
        table.observe(with_flags(0, 0x001));
        table.observe(Observation {
            key: key(2),
            ..with_flags(0, 0x004)
        });
        let mut records = Vec::new();
        table.expire(61 * S, &mut records);
        table.observe(with_flags(1, 0x018));
        table.drain(62 * S, &mut records);
        let flags: Vec<(u16, u64, u16)> = records
            .iter()
            .map(|r| (r.key.src_port, r.packets, r.tcp_flags))
            .collect();
        assert_eq!(flags, [(1, 3, 0x013), (1, 1, 0x018)]);
    }

    #[test]
    fn different_outputs_in_one_report_say_none() {
        let mut table = table();
        table.observe(seen(1, 1, S, S));
        table.observe(Observation {
            egress: 3,
            ..seen(1, 1, S, S)
        });
        let mut records = Vec::new();
        table.drain(2 * S, &mut records);
        assert_eq!((records[0].egress, records[0].packets), (0, 2));
    }

    #[test]
    fn sampling_reports_whole_flows_one_in_n() {
        let timeouts = Timeouts {
            active: 60 * S,
            idle: 15 * S,
        };
        let mut table = FlowTable::new(timeouts, 4, 0);
        for port in 0..400 {
            table.observe(seen(port, 5, S, S));
            table.observe(seen(port, 5, S, S));
        }
        let mut records = Vec::new();
        table.drain(2 * S, &mut records);
        // About a quarter of the flows, each with all ten packets.
        assert!((60..140).contains(&records.len()), "{}", records.len());
        assert!(records.iter().all(|r| r.packets == 10));
        assert!(records.iter().all(|r| table.samples(&r.key)));
        assert_eq!(table.sampled_out_packets, (400 - records.len() as u64) * 10);
    }
}
