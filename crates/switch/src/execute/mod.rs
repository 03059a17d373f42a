//! Action execution on one frame: rewrites in place, and the ports it leaves by, in a
//! fixed-capacity list (nothing allocated per packet).
//!
//! OpenFlow outputs the packet as it is when `output` runs, so `output:1,mod_vlan_vid:5,output:2`
//! sends two different frames. The frame is rewritten in place, so before the first rewrite
//! that follows an output, the outputs so far are handed to `emit` with the frame as it is then
//! (the caller sends a copy); the [`Verdict`] lists the ports that get the final frame. The
//! caller owns the verdict and reuses it packet after packet (it is ~280 bytes: returning it by
//! value cost a quarter of a cached packet's time).

pub mod rewrite;

use core::time::Duration;

use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::{VLAN_PRESENT, VLAN_VID_MASK};

use crate::action::Action;
use crate::field::{Field, FlowBits, TunnelOut, mac_from_value};
use crate::frame::Frame;
use crate::mac_learning::MacTable;
use crate::meter::{METER_CONTROLLER, MeterRef};
use crate::rule::PacketInOrigin;
use rewrite::PacketHeaders;

/// Most ports one packet can leave by; a flood to a bridge with more ports is cut short.
pub const MAX_OUTPUTS: usize = 64;

/// Outputs with this bit are packet-ins, not ports (port numbers end at 65279): `controller`
/// is an output like the others, so the controller gets the packet as it is when the action
/// runs, once per action, and a later drop (`dec_ttl` at 1) does not take it back, as in
/// OpenFlow. The low 16 bits are the action's byte limit.
pub const TO_CONTROLLER: u32 = 1 << 31;

/// The byte limit of a packet-in output, or none for a port.
#[inline]
pub fn controller_limit(output: u32) -> Option<u16> {
    (output & TO_CONTROLLER != 0).then_some(output as u16)
}

/// The ports a frame leaves by, in action order (duplicates kept, as OpenFlow does).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Outputs {
    ports: [u32; MAX_OUTPUTS],
    len: usize,
    /// Ports left out because the list was full.
    pub overflowed: usize,
}

impl Default for Outputs {
    fn default() -> Self {
        Outputs {
            ports: [0; MAX_OUTPUTS],
            len: 0,
            overflowed: 0,
        }
    }
}

impl Outputs {
    pub fn push(&mut self, port: u32) {
        match self.ports.get_mut(self.len) {
            Some(slot) => {
                *slot = port;
                self.len += 1;
            }
            None => self.overflowed += 1,
        }
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.ports[..self.len]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// Why a packet went nowhere; per-port drop counters are kept by reason.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DropReason {
    /// No rule matched in some table on the way.
    TableMiss,
    /// The rules' actions output nowhere (`drop`, or `normal` back to the input port).
    NoOutput,
    /// `dec_ttl` met a TTL or hop limit of 0 or 1.
    TtlExpired,
    /// A VLAN push found no head- or tailroom in the buffer.
    NoRoom,
    /// The resubmit limits were hit while translating.
    ResubmitLimit,
    /// The rule's meter found the flow over its rate (its band drops).
    Metered,
}

impl DropReason {
    pub const ALL: [DropReason; 6] = [
        DropReason::TableMiss,
        DropReason::NoOutput,
        DropReason::TtlExpired,
        DropReason::NoRoom,
        DropReason::ResubmitLimit,
        DropReason::Metered,
    ];

    /// A short name for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::TableMiss => "table_miss",
            DropReason::NoOutput => "no_output",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoRoom => "no_room",
            DropReason::ResubmitLimit => "resubmit_limit",
            DropReason::Metered => "metered",
        }
    }
}

/// Drops counted by reason (a port's receive side keeps one).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct DropCounters([u64; DropReason::ALL.len()]);

impl DropCounters {
    pub fn count(&mut self, reason: DropReason) {
        self.0[reason as usize] += 1;
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason as usize]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds another set of counters (several poll-mode threads' into one).
    pub fn add(&mut self, other: &DropCounters) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += theirs;
        }
    }
}

/// What became of the packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Verdict {
    /// The ports that get the frame in its final form, and its packet-ins
    /// ([`TO_CONTROLLER`]).
    pub outputs: Outputs,
    pub dropped: Option<DropReason>,
    /// Where the packet-ins among `outputs` come from (set when there are any).
    pub packet_in: PacketInOrigin,
    /// The flow's `tun_id` and `tun_dst` when the outputs ran: what an output to a tunnel
    /// port with `key=flow` or `remote_ip=flow` sends with.
    pub tunnel: TunnelOut,
}

impl Verdict {
    /// Back to "no outputs, not dropped", for the next packet.
    pub fn reset(&mut self) {
        self.outputs.clear();
        self.outputs.overflowed = 0;
        self.dropped = None;
    }

    /// The packet goes nowhere, for `reason`.
    pub fn drop_for(&mut self, reason: DropReason) {
        self.reset();
        self.dropped = Some(reason);
    }
}

/// Where `normal` learns and looks up addresses: the learning table itself, or a thread's way
/// to it (see [`crate::dpif::process::BurstLock`]).
pub trait Learning {
    /// `mac` on `vlan` was seen on `port` (see [`MacTable::learn`]).
    fn learn(&mut self, vlan: u16, mac: MacAddr, port: u32, now: Duration);
    /// The port `mac` on `vlan` lives behind (see [`MacTable::lookup`]).
    fn lookup(&mut self, vlan: u16, mac: MacAddr, now: Duration) -> Option<u32>;
}

impl Learning for MacTable {
    fn learn(&mut self, vlan: u16, mac: MacAddr, port: u32, now: Duration) {
        MacTable::learn(self, vlan, mac, port, now);
    }

    fn lookup(&mut self, vlan: u16, mac: MacAddr, now: Duration) -> Option<u32> {
        MacTable::lookup(self, vlan, mac, now)
    }
}

/// The state of the bridge the actions need.
pub struct ActionContext<'a> {
    /// Every port of the bridge, for `flood` and `all`.
    pub ports: &'a [u32],
    /// Used by `normal` only.
    pub learning: &'a mut dyn Learning,
    /// The caller's clock, for MAC learning and ageing, and the meters' buckets.
    pub now: Duration,
    /// The meters the actions name (the decision's).
    pub meters: &'a [MeterRef],
}

/// One packet being executed: its frame, where its headers are, and its flow as the actions
/// so far changed it (what `normal` learns and looks up from).
pub struct Packet<'f, 'b> {
    pub frame: &'f mut Frame<'b>,
    pub headers: PacketHeaders,
    pub flow: FlowBits,
    pub in_port: u32,
}

fn rewrites_frame(action: &Action) -> bool {
    matches!(
        action,
        Action::ModVlanVid(_)
            | Action::ModVlanPcp(_)
            | Action::StripVlan
            | Action::SetField(..)
            | Action::DecTtl
    )
}

/// Runs datapath `actions` (no table jumps) on `packet`, writing what became of it into
/// `verdict`; see the module docs for `emit`.
pub fn execute(
    actions: &[Action],
    packet: &mut Packet<'_, '_>,
    bridge: &mut ActionContext<'_>,
    verdict: &mut Verdict,
    emit: &mut impl FnMut(&[u8], &[u32], TunnelOut),
) {
    verdict.reset();
    let mut unused_wildcards = FlowBits::ZERO;
    // A packet-in the controller's meter held back: a packet that goes nowhere else was
    // dropped by it.
    let mut metered = false;
    for action in actions {
        if rewrites_frame(action) && !verdict.outputs.is_empty() {
            // The flow's tun_id and tun_dst as these outputs saw them (a tunnel port with
            // key=flow or remote_ip=flow sends with them); set_field to them is a
            // boundary too.
            let tunnel = TunnelOut::of(&packet.flow);
            emit(packet.frame.data(), verdict.outputs.as_slice(), tunnel);
            verdict.outputs.clear();
        }
        let in_port = packet.in_port;
        match *action {
            Action::Output(port) if port != in_port => verdict.outputs.push(port),
            // OpenFlow: only `in_port` sends a packet back where it came from.
            Action::Output(_) => {}
            Action::InPort => verdict.outputs.push(in_port),
            Action::Flood | Action::All => flood(bridge.ports, in_port, &mut verdict.outputs),
            Action::Normal => normal(&packet.flow, in_port, bridge, &mut verdict.outputs),
            Action::Controller(max_len) => {
                // The controller's meter, if it has one, decides whether a packet-in goes.
                let limit = bridge
                    .meters
                    .iter()
                    .find(|m| m.0.config.id == METER_CONTROLLER);
                let len = packet.frame.packet_len() as u32;
                match limit.is_none_or(|m| m.0.admit(len, bridge.now)) {
                    true => verdict.outputs.push(TO_CONTROLLER | u32::from(max_len)),
                    false => metered = true,
                }
            }
            Action::ModVlanVid(vid) => {
                if !rewrite::set_vlan(packet.frame, &mut packet.headers, Some(vid), None) {
                    return verdict.drop_for(DropReason::NoRoom);
                }
            }
            Action::ModVlanPcp(pcp) => {
                if !rewrite::set_vlan(packet.frame, &mut packet.headers, None, Some(pcp)) {
                    return verdict.drop_for(DropReason::NoRoom);
                }
            }
            Action::StripVlan => rewrite::strip_vlan(packet.frame, &mut packet.headers),
            Action::SetField(field, value) => {
                rewrite::set_field(packet.frame, &packet.headers, field, value)
            }
            Action::DecTtl => {
                if !rewrite::dec_ttl(packet.frame, &packet.headers) {
                    return verdict.drop_for(DropReason::TtlExpired);
                }
            }
            Action::Meter(id) => {
                let meter = bridge.meters.iter().find(|m| m.0.config.id == id);
                let len = packet.frame.packet_len() as u32;
                if meter.is_some_and(|m| !m.0.admit(len, bridge.now)) {
                    return verdict.drop_for(DropReason::Metered);
                }
            }
            // The translation's alone: a `load` or `move` into a packet's field reaches here
            // as the `set_field` it makes, an output from a register as the `output` to its
            // port; what a `learn` learned goes to the bridge with the decision; a
            // `set_queue` changes nothing here (one queue a port).
            Action::SetQueue(_)
            | Action::Resubmit(_)
            | Action::GotoTable(_)
            | Action::Group(_)
            | Action::ClearActions
            | Action::WriteActions(_)
            | Action::WriteMetadata(..)
            | Action::Load(..)
            | Action::Move(..)
            | Action::OutputReg(_)
            | Action::Learn(_) => {}
        }
        action.apply_to_flow(&mut packet.flow, &mut unused_wildcards);
    }
    verdict.tunnel = TunnelOut::of(&packet.flow);
    if verdict.outputs.is_empty() {
        verdict.dropped = Some(match metered {
            true => DropReason::Metered,
            false => DropReason::NoOutput,
        });
    }
}

fn flood(ports: &[u32], in_port: u32, outputs: &mut Outputs) {
    for &port in ports.iter().filter(|&&port| port != in_port) {
        outputs.push(port);
    }
}

/// The `normal` action: learn where the source lives, forward to where the destination does,
/// flood when unknown or a group address, drop when it lives on the input port.
fn normal(flow: &FlowBits, in_port: u32, bridge: &mut ActionContext<'_>, outputs: &mut Outputs) {
    let tci = Field::VlanTci.get(flow) as u16;
    let vlan = if tci & VLAN_PRESENT != 0 {
        tci & VLAN_VID_MASK
    } else {
        0
    };
    let src = mac_from_value(Field::DlSrc.get(flow));
    let dst = mac_from_value(Field::DlDst.get(flow));
    bridge.learning.learn(vlan, src, in_port, bridge.now);
    if dst.is_multicast() {
        return flood(bridge.ports, in_port, outputs);
    }
    match bridge.learning.lookup(vlan, dst, bridge.now) {
        Some(port) if port != in_port => outputs.push(port),
        Some(_) => {}
        None => flood(bridge.ports, in_port, outputs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirespeed_packet::flow_key::FlowKey;

    /// Ethernet 02:..:01 -> 02:..:02, IPv4 ttl 2 / UDP.
    const FRAME: [u8; 42] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, // Ethernet
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x02, 0x11, 0x00, 0x00, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // UDP, no checksum
    ];

    struct Run {
        verdict: Verdict,
        emitted: Vec<(Vec<u8>, Vec<u32>)>,
        frame: Vec<u8>,
    }

    fn run(actions: &[Action], frame: &[u8], in_port: u32, mac_table: &mut MacTable) -> Run {
        run_metered(actions, frame, in_port, mac_table, &[])
    }

    fn run_metered(
        actions: &[Action],
        frame: &[u8],
        in_port: u32,
        mac_table: &mut MacTable,
        meters: &[MeterRef],
    ) -> Run {
        let mut buffer = vec![0u8; 8 + frame.len()];
        buffer[8..].copy_from_slice(frame);
        let mut frame_view = Frame::new(&mut buffer, 8, frame.len()).unwrap();
        let (key, offsets) = FlowKey::parse_with_offsets(frame_view.data(), in_port);
        let mut packet = Packet {
            frame: &mut frame_view,
            headers: PacketHeaders::new(&key, offsets),
            flow: FlowBits::from_key(&key),
            in_port,
        };
        let mut bridge = ActionContext {
            ports: &[1, 2, 3],
            learning: mac_table,
            now: Duration::from_secs(1),
            meters,
        };
        let mut emitted = Vec::new();
        let mut verdict = Verdict::default();
        verdict.drop_for(DropReason::TableMiss); // stale state the run must clear
        execute(
            actions,
            &mut packet,
            &mut bridge,
            &mut verdict,
            &mut |data: &[u8], ports: &[u32], _: TunnelOut| {
                emitted.push((data.to_vec(), ports.to_vec()))
            },
        );
        Run {
            verdict,
            emitted,
            frame: frame_view.data().to_vec(),
        }
    }

    #[test]
    fn meters_drop_over_their_rate_and_the_controllers_holds_back_packet_ins() {
        use crate::meter::{Band, Meter, MeterConfig, Unit};
        let meter = |id, burst_size| {
            let config = MeterConfig {
                id,
                unit: Unit::Packets,
                band: Some(Band {
                    rate: 1,
                    burst_size,
                }),
                burst: true,
                stats: false,
            };
            MeterRef(std::sync::Arc::new(Meter::new(config, Duration::ZERO)))
        };
        let meters = [meter(1, 2), meter(METER_CONTROLLER, 1)];
        let mut macs = MacTable::default();
        let mut run = |actions: &[Action]| {
            let run = run_metered(actions, &FRAME, 1, &mut macs, &meters);
            (run.verdict.outputs.as_slice().to_vec(), run.verdict.dropped)
        };
        let metered = [Action::Meter(1), Action::Output(2)];
        assert_eq!(run(&metered), (vec![2], None));
        assert_eq!(run(&metered), (vec![2], None));
        assert_eq!(run(&metered), (vec![], Some(DropReason::Metered)));
        let to_controller = TO_CONTROLLER | 64;
        assert_eq!(run(&[Action::Controller(64)]), (vec![to_controller], None));
        assert_eq!(
            run(&[Action::Controller(64)]),
            (vec![], Some(DropReason::Metered))
        );
        // The packet-in held back, the packet still goes where else it was sent.
        let both = [Action::Controller(64), Action::Output(2)];
        assert_eq!(run(&both), (vec![2], None));
        assert_eq!(meters[0].0.counts().band_packets, 1);
        assert_eq!(meters[1].0.counts().band_packets, 2);
    }

    #[test]
    fn outputs_flood_and_in_port() {
        let mut macs = MacTable::default();
        let run = run(
            &[
                Action::Output(1),
                Action::Output(2),
                Action::Flood,
                Action::InPort,
            ],
            &FRAME,
            1,
            &mut macs,
        );
        assert_eq!(run.verdict.outputs.as_slice(), &[2, 2, 3, 1]);
        assert_eq!(run.verdict.dropped, None);
        let run = self::run(&[], &FRAME, 1, &mut macs);
        assert_eq!(run.verdict.dropped, Some(DropReason::NoOutput));
        let run = self::run(&[Action::Controller(64)], &FRAME, 1, &mut macs);
        let limits: Vec<_> = run
            .verdict
            .outputs
            .as_slice()
            .iter()
            .map(|&o| controller_limit(o))
            .collect();
        assert_eq!(limits, [Some(64)]);
        assert!(run.verdict.dropped.is_none());
        // One packet-in per action, each with its own limit.
        let both = [Action::Controller(64), Action::Controller(u16::MAX)];
        let run = self::run(&both, &FRAME, 1, &mut macs);
        let limits: Vec<_> = run
            .verdict
            .outputs
            .as_slice()
            .iter()
            .map(|&o| controller_limit(o))
            .collect();
        assert_eq!(limits, [Some(64), Some(u16::MAX)]);
        assert_eq!(controller_limit(2), None);
    }

    #[test]
    fn the_controller_gets_the_packet_as_it_is_when_the_action_runs() {
        let mut macs = MacTable::default();
        let run = run(
            &[
                Action::Controller(u16::MAX),
                Action::ModVlanVid(5),
                Action::Output(3),
            ],
            &FRAME,
            1,
            &mut macs,
        );
        assert_eq!(run.emitted.len(), 1);
        assert_eq!(run.emitted[0].0, FRAME.to_vec(), "before the rewrite");
        assert_eq!(run.emitted[0].1, vec![TO_CONTROLLER | 0xffff]);
        assert_eq!(run.verdict.outputs.as_slice(), &[3]);
        // A drop later (ttl 2 -> 1, then expired) does not take the packet-in back.
        let run = self::run(
            &[
                Action::DecTtl,
                Action::Controller(64),
                Action::DecTtl,
                Action::Output(3),
            ],
            &FRAME,
            1,
            &mut macs,
        );
        assert_eq!(run.emitted.len(), 1);
        assert_eq!(run.emitted[0].0[22], 1, "the packet-in has ttl 1");
        assert_eq!(run.emitted[0].1, vec![TO_CONTROLLER | 64]);
        assert_eq!(run.verdict.dropped, Some(DropReason::TtlExpired));
    }

    #[test]
    fn rewrite_after_output_emits_the_earlier_version() {
        let mut macs = MacTable::default();
        let run = run(
            &[Action::Output(2), Action::ModVlanVid(5), Action::Output(3)],
            &FRAME,
            1,
            &mut macs,
        );
        assert_eq!(run.emitted.len(), 1);
        assert_eq!(run.emitted[0].0, FRAME.to_vec());
        assert_eq!(run.emitted[0].1, vec![2]);
        assert_eq!(run.verdict.outputs.as_slice(), &[3]);
        assert_eq!(FlowKey::parse(&run.frame, 1).dl_vlan(), Some(5));
    }

    #[test]
    fn dec_ttl_at_one_drops_everything_after() {
        let mut macs = MacTable::default();
        let run = run(
            &[
                Action::DecTtl,
                Action::Output(2),
                Action::DecTtl,
                Action::Output(3),
            ],
            &FRAME,
            1,
            &mut macs,
        );
        // ttl 2 -> 1 goes out on 2 (emitted before the second dec_ttl), then 1 drops.
        assert_eq!(run.emitted.len(), 1);
        assert_eq!(run.emitted[0].0[22], 1);
        assert_eq!(run.verdict.dropped, Some(DropReason::TtlExpired));
        assert!(run.verdict.outputs.is_empty());
    }

    #[test]
    fn normal_learns_then_forwards() {
        let mut macs = MacTable::default();
        // Unknown destination: flood; the source is learned on port 1.
        let run = run(&[Action::Normal], &FRAME, 1, &mut macs);
        assert_eq!(run.verdict.outputs.as_slice(), &[2, 3]);
        // The reply from 02:..:02 on port 2 goes straight to port 1.
        let mut reply = FRAME;
        reply[..6].copy_from_slice(&FRAME[6..12]);
        reply[6..12].copy_from_slice(&FRAME[..6]);
        let run = self::run(&[Action::Normal], &reply, 2, &mut macs);
        assert_eq!(run.verdict.outputs.as_slice(), &[1]);
        // And now 02:..:02 is known on port 2.
        let run = self::run(&[Action::Normal], &FRAME, 1, &mut macs);
        assert_eq!(run.verdict.outputs.as_slice(), &[2]);
        // A frame for a host on its own input port goes nowhere.
        let run = self::run(&[Action::Normal], &FRAME, 2, &mut macs);
        assert_eq!(run.verdict.dropped, Some(DropReason::NoOutput));
    }

    #[test]
    fn normal_uses_the_rewritten_vlan() {
        let mut macs = MacTable::default();
        self::run(
            &[Action::ModVlanVid(7), Action::Normal],
            &FRAME,
            1,
            &mut macs,
        );
        let src = wirespeed_packet::MacAddr([2, 0, 0, 0, 0, 1]);
        assert_eq!(macs.lookup(7, src, Duration::from_secs(1)), Some(1));
        assert_eq!(macs.lookup(0, src, Duration::from_secs(1)), None);
    }

    #[test]
    fn drop_counters_by_reason() {
        let mut counters = DropCounters::default();
        counters.count(DropReason::TtlExpired);
        counters.count(DropReason::TtlExpired);
        counters.count(DropReason::TableMiss);
        assert_eq!(counters.get(DropReason::TtlExpired), 2);
        assert_eq!(counters.total(), 3);
        assert_eq!(DropReason::ALL.map(DropReason::name)[4], "resubmit_limit");
    }

    #[test]
    fn output_list_is_bounded() {
        let mut outputs = Outputs::default();
        for port in 0..MAX_OUTPUTS as u32 + 3 {
            outputs.push(port);
        }
        assert_eq!((outputs.len(), outputs.overflowed), (MAX_OUTPUTS, 3));
    }
}
