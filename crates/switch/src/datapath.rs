//! One bridge's packet path, without I/O: parse once, find the decision through the caches,
//! credit the rules, execute the actions. The poll-mode threads call [`Datapath::process`] per
//! received frame; the control server edits [`Datapath::tables`] between batches.

use core::time::Duration;

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::partial_checksum;
use wirespeed_xdp::XdpError;

use crate::action::Action;
use crate::classifier::RuleId;
use crate::execute::{self, Bridge, DropReason, Packet, Verdict};
use crate::field::FlowBits;
use crate::flow_cache::FlowCache;
use crate::flow_parse::{FlowError, parse_rule};
use crate::frame::Frame;
use crate::mac_learning::MacTable;
use crate::offload::Offload;
use crate::rewrite::PacketHeaders;
use crate::rule::Rule;
use crate::rule_table::RuleTables;

pub struct Datapath {
    pub tables: RuleTables,
    pub cache: FlowCache,
    pub mac_table: MacTable,
    /// The kernel's fast path, when the bridge offloads flows there.
    pub offload: Option<Offload>,
    ports: Vec<u32>,
}

impl Default for Datapath {
    fn default() -> Self {
        Datapath::new()
    }
}

impl Datapath {
    /// A bridge that behaves as a learning switch until told otherwise: its one rule is
    /// `priority=0,actions=normal`, as an Open vSwitch bridge's.
    pub fn new() -> Datapath {
        let mut datapath = Datapath::without_rules();
        let rule = parse_rule("priority=0,actions=normal").expect("the default rule parses");
        datapath.tables.add(rule, Duration::ZERO);
        datapath
    }

    /// A bridge with empty tables (every packet misses and is dropped).
    pub fn without_rules() -> Datapath {
        Datapath {
            tables: RuleTables::new(),
            cache: FlowCache::default(),
            mac_table: MacTable::default(),
            offload: None,
            ports: Vec::new(),
        }
    }

    pub fn ports(&self) -> &[u32] {
        &self.ports
    }

    pub fn add_port(&mut self, port: u32) {
        if !self.ports.contains(&port) {
            self.ports.push(port);
            self.ports.sort_unstable();
        }
    }

    pub fn remove_port(&mut self, port: u32) {
        self.ports.retain(|&p| p != port);
        self.mac_table.flush_port(port);
    }

    /// `add-flow`, refusing outputs to ports the bridge does not have.
    pub fn add_rule(&mut self, rule: Rule, now: Duration) -> Result<RuleId, FlowError> {
        self.check_output_ports(&rule.actions)?;
        Ok(self.tables.add(rule, now))
    }

    /// An error naming the first `output:N` whose port the bridge does not have (for `add-flow`
    /// and `mod-flows`).
    pub fn check_output_ports(&self, actions: &[Action]) -> Result<(), FlowError> {
        let missing = actions.iter().find_map(|action| match action {
            Action::Output(port) if !self.ports.contains(port) => Some(*port),
            _ => None,
        });
        let Some(port) = missing else {
            return Ok(());
        };
        let known = if self.ports.is_empty() {
            "no ports".to_string()
        } else {
            let ports: Vec<String> = self.ports.iter().map(u32::to_string).collect();
            format!("ports {}", ports.join(", "))
        };
        Err(FlowError(format!(
            "output:{port}: no such port (the bridge has {known})"
        )))
    }

    /// Credits what the kernel's fast path forwarded since the last call to the rules and
    /// ports (before counters are shown).
    pub fn harvest_offload(&mut self, now: Duration) -> Result<(), XdpError> {
        match &mut self.offload {
            Some(offload) => offload.harvest(&mut self.tables, &mut self.mac_table, now),
            None => Ok(()),
        }
    }

    /// Housekeeping of the kernel's fast path: credits and removes idle entries.
    pub fn age_offload(&mut self, now: Duration) -> Result<(), XdpError> {
        match &mut self.offload {
            Some(offload) => offload.age(&mut self.tables, &mut self.mac_table, now),
            None => Ok(()),
        }
    }

    /// Empties the kernel's fast path, its counts credited: call before changing the rules.
    pub fn flush_offload(&mut self, now: Duration) -> Result<(), XdpError> {
        match &mut self.offload {
            Some(offload) => offload.flush(&mut self.tables, &mut self.mac_table, now),
            None => Ok(()),
        }
    }

    /// Parses, classifies and executes one received frame, writing what became of it into
    /// `verdict` (kept by the caller across packets); see [`execute::execute`] for `emit`.
    pub fn process(
        &mut self,
        frame: &mut Frame<'_>,
        in_port: u32,
        now: Duration,
        verdict: &mut Verdict,
        emit: &mut impl FnMut(&[u8], &[u32]),
    ) {
        let (key, offsets) = FlowKey::parse_with_offsets(frame.data(), in_port);
        let flow = FlowBits::from_key(&key);
        let bytes = frame.len();
        let megaflow = self.cache.lookup(&self.tables, &flow, bytes);
        let decision = &megaflow.decision;
        for &id in &decision.rules {
            self.tables.credit(id, bytes, now);
        }
        if decision.too_deep {
            return verdict.drop_for(DropReason::ResubmitLimit);
        }
        if decision.actions.is_empty() {
            let reason = if decision.rules.is_empty() {
                DropReason::TableMiss
            } else {
                DropReason::NoOutput
            };
            return verdict.drop_for(reason);
        }
        // A host that offloads transmit checksums (veth's default) leaves TCP and UDP
        // checksums partial; its receiver would drop the frame as it is.
        let completed = match (offsets.l3, offsets.l4, key.nw_proto) {
            (Some(l3), Some(l4), 6 | 17) => {
                partial_checksum::complete_in_frame(frame.data_mut(), l3, l4)
            }
            _ => false,
        };
        let mut packet = Packet {
            frame,
            headers: PacketHeaders::new(&key, offsets),
            flow,
            in_port,
        };
        let mut bridge = Bridge {
            ports: &self.ports,
            mac_table: &mut self.mac_table,
            now,
        };
        execute::execute(&decision.actions, &mut packet, &mut bridge, verdict, emit);
        let Some(offload) = &mut self.offload else {
            return;
        };
        // After execution: a `normal` decision reads the learning table as it now is. The
        // decisions the fast path takes never rewrite the frame; a completed checksum did,
        // and that flow's next packets will come partial too, which the kernel leaves to us:
        // an entry for them would never be used.
        if !completed {
            offload.consider(
                frame.data(),
                in_port,
                decision,
                &self.tables,
                &self.mac_table,
                now,
            );
        }
        if !offload.flush_failed()
            && offload.macs_changed(&self.mac_table)
            && offload
                .flush(&mut self.tables, &mut self.mac_table, now)
                .is_err()
        {
            offload.count_error();
        }
    }

    /// Housekeeping's side of the learning table: after ageing, the fast path's entries go
    /// if an address a `normal` entry depends on has gone; and a flush that failed is tried
    /// again.
    pub fn sync_offload_macs(&mut self, now: Duration) -> Result<(), XdpError> {
        if let Some(offload) = &mut self.offload
            && (offload.macs_changed(&self.mac_table) || offload.flush_failed())
        {
            return offload.flush(&mut self.tables, &mut self.mac_table, now);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule_table::RuleSelector;

    const FRAME: [u8; 42] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // UDP
    ];

    fn send(datapath: &mut Datapath, in_port: u32) -> Verdict {
        let mut buffer = [0u8; 4 + 42];
        buffer[4..].copy_from_slice(&FRAME);
        let mut frame = Frame::new(&mut buffer, 4, 42).unwrap();
        let mut verdict = Verdict::default();
        datapath.process(
            &mut frame,
            in_port,
            Duration::from_secs(1),
            &mut verdict,
            &mut |_: &[u8], _: &[u32]| {},
        );
        verdict
    }

    #[test]
    fn learning_switch_by_default() {
        let mut datapath = Datapath::new();
        for port in [1, 2, 3] {
            datapath.add_port(port);
        }
        assert_eq!(send(&mut datapath, 1).outputs.as_slice(), &[2, 3]);
        let (_, rule) = datapath.tables.iter().next().unwrap();
        assert_eq!((rule.stats.n_packets, rule.stats.n_bytes), (1, 42));
    }

    #[test]
    fn drop_rule_then_removed() {
        let mut datapath = Datapath::new();
        datapath.add_port(1);
        datapath.add_port(2);
        let drop = parse_rule("priority=10,udp,actions=drop").unwrap();
        datapath.add_rule(drop, Duration::ZERO).unwrap();
        assert_eq!(send(&mut datapath, 1).dropped, Some(DropReason::NoOutput));
        assert_eq!(send(&mut datapath, 1).dropped, Some(DropReason::NoOutput));
        let selector = RuleSelector {
            flow_match: crate::flow_parse::parse_match("udp").unwrap().flow_match,
            ..RuleSelector::default()
        };
        assert_eq!(datapath.tables.delete(&selector), 1);
        assert_eq!(send(&mut datapath, 1).outputs.as_slice(), &[2]);
        assert_eq!(datapath.cache.stats.emc_hits, 1);
    }

    #[test]
    fn unknown_output_port_is_refused() {
        let mut datapath = Datapath::without_rules();
        datapath.add_port(1);
        datapath.add_port(2);
        let error = datapath
            .add_rule(parse_rule("actions=output:7").unwrap(), Duration::ZERO)
            .unwrap_err();
        assert_eq!(
            error.0,
            "output:7: no such port (the bridge has ports 1, 2)"
        );
        assert!(datapath.tables.is_empty());
        assert_eq!(send(&mut datapath, 1).dropped, Some(DropReason::TableMiss));
    }
}
