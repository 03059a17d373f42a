//! Flows as the datapath already counts them: a megaflow (exact on a flow record's fields
//! while IPFIX is on, see [`crate::dpif::megaflow::flow_record_mask`]) or an entry of the
//! kernel's fast path (exact on every header field) is one flow, and its packet and byte
//! counters are that flow's. Nothing here runs per packet.

use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::{VLAN_PRESENT, VLAN_VID_MASK};
use wirespeed_xdp::fast_path::key_fields;

use crate::action::Action;
use crate::dpif::megaflow::{Megaflow, Unexported, flow_record_mask};
use crate::field::{Field, FlowBits, TunnelMeta, TunnelOut, mac_from_value};
use crate::ipfix::flow_table::Observation;
use crate::ipfix::record::{Addresses, FlowKey, TunnelEnds};
use crate::mac_learning::MacTable;
use crate::offload::FastFlowCounts;
use crate::tunnel::{Remote, TunnelPort};

const ETHERNET_HEADER: u64 = 14;
const VLAN_TAG: u64 = 4;

/// Where a megaflow's packets went, as far as its decision says.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Egress {
    /// `output:N` alone.
    Port(u32),
    /// `normal` alone: the port its destination is learned on, looked up when reported.
    Learned { vlan: u16, mac: MacAddr },
    /// Anything else (several outputs, a flood, a drop, the controller): not one port.
    None,
}

impl Egress {
    /// The port number for the record: 0 when not one port, or a destination not learned
    /// (then `normal` flooded it).
    pub fn resolve(self, macs: &MacTable) -> u32 {
        match self {
            Egress::Port(port) => port,
            Egress::Learned { vlan, mac } => macs.entry(vlan, mac).map_or(0, |e| e.port),
            Egress::None => 0,
        }
    }
}

/// A megaflow's counts as a flow's, before the bridge's tables say where its packets went
/// and so which tunnel, if any, they crossed ([`Seen::resolve`]).
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub flow: Observation,
    pub egress: Egress,
    /// What the tunnel the packets came out of said (zero: they did not).
    pub arrived: TunnelMeta,
    /// The `tun_id` and `tun_dst` they left with: the flow's own, or those its actions set.
    pub sent: TunnelOut,
}

impl Seen {
    /// The flow with its output port (a `normal` flow's from `macs`) and the tunnel it
    /// crossed among `tunnels`: the one it went out through, or else came in by, as Open
    /// vSwitch reports.
    pub fn resolve(self, macs: &MacTable, tunnels: &[TunnelPort]) -> Observation {
        let mut flow = self.flow;
        flow.egress = self.egress.resolve(macs);
        let port = |number: u32| tunnels.iter().find(|t| number != 0 && t.number == number);
        let sent = port(flow.egress).map(|t| TunnelEnds {
            kind: t.config.kind,
            src: t.local_ip,
            dst: match t.config.remote_ip {
                Remote::Ip(ip) => ip,
                Remote::Flow => self.sent.dst,
            },
            dst_port: t.config.dst_port,
            vni: t.config.vni(self.sent.id),
        });
        let arrived = port(flow.key.ingress).map(|t| TunnelEnds {
            kind: t.config.kind,
            src: Ipv4Addr::from(self.arrived.src),
            dst: Ipv4Addr::from(self.arrived.dst),
            dst_port: t.config.dst_port,
            vni: self.arrived.id as u32,
        });
        flow.key.tunnel = sent.or(arrived);
        flow
    }
}

/// A megaflow's counts (since they were last taken) as a flow's, and where its packets
/// went; `None` for a megaflow that is not one flow (not IP, or not exact on a record's
/// fields).
pub fn megaflow(megaflow: &Megaflow, counts: Unexported) -> Option<Seen> {
    let (flow, mask) = (megaflow.flow_match.value(), megaflow.flow_match.mask());
    if !flow_record_mask(flow).is_subset_of(mask) {
        return None;
    }
    let (key, l2_header) = flow_key(flow)?;
    let arrived = TunnelMeta::read(flow);
    // A VNI or far end set for a tunnel's output (`set_field:N->tun_id,output:T`) leaves it
    // one port.
    let mut sent = TunnelOut::of(flow);
    let mut actions = megaflow.decision.actions.as_slice();
    // A meter in front sends nowhere itself.
    if let [Action::Meter(_), rest @ ..] = actions {
        actions = rest;
    }
    while let [
        Action::SetField(field @ (Field::TunId | Field::TunDst), value),
        rest @ ..,
    ] = actions
    {
        match field {
            Field::TunId => sent.id = *value as u64,
            _ => sent.dst = Ipv4Addr::from(*value as u32),
        }
        actions = rest;
    }
    let egress = match actions {
        [Action::Output(port)] => Egress::Port(*port),
        [Action::Normal] => Egress::Learned {
            vlan: key.vlan,
            mac: mac_from_value(Field::DlDst.get(flow)),
        },
        _ => Egress::None,
    };
    let flow = Observation {
        key,
        egress: 0,
        packets: counts.packets,
        frame_bytes: counts.bytes,
        tcp_flags: counts.tcp_flags,
        l2_header,
        // One packet came at the megaflow's last use; more, after the counts were last taken
        // (a megaflow outlives a flow its records forgot).
        first: match counts.packets {
            1 => megaflow.used,
            _ => counts.since.max(megaflow.created),
        },
        last: megaflow.used,
    };
    Some(Seen {
        flow,
        egress,
        arrived,
        sent,
    })
}

/// The flow record key of an exact `flow`, and its frames' L2 header length.
fn flow_key(flow: &FlowBits) -> Option<(FlowKey, u64)> {
    let addresses = match Field::DlType.get(flow) as u16 {
        0x0800 => Addresses::V4(
            Ipv4Addr::from(Field::NwSrc.get(flow) as u32),
            Ipv4Addr::from(Field::NwDst.get(flow) as u32),
        ),
        0x86dd => Addresses::V6(
            Ipv6Addr::from(Field::Ipv6Src.get(flow)),
            Ipv6Addr::from(Field::Ipv6Dst.get(flow)),
        ),
        _ => return None,
    };
    let protocol = Field::NwProto.get(flow) as u8;
    let (src_port, dst_port) = match protocol {
        1 | 58 => (
            0,
            ((Field::IcmpType.get(flow) as u16) << 8) | Field::IcmpCode.get(flow) as u16,
        ),
        _ => (Field::TpSrc.get(flow) as u16, Field::TpDst.get(flow) as u16),
    };
    let tci = Field::VlanTci.get(flow) as u16;
    let tagged = tci & VLAN_PRESENT != 0;
    let key = FlowKey {
        addresses,
        protocol,
        src_port,
        dst_port,
        vlan: if tagged { tci & VLAN_VID_MASK } else { 0 },
        ingress: Field::InPort.get(flow) as u32,
        tunnel: None,
    };
    Some((key, ETHERNET_HEADER + if tagged { VLAN_TAG } else { 0 }))
}

/// A fast-path entry's counts as a flow's: its key holds every field a record needs.
pub fn fast_flow(counts: &FastFlowCounts<'_>) -> Observation {
    let fields = key_fields(counts.key);
    let (src_port, dst_port) = match fields.protocol {
        1 => (0, u16::from_be_bytes([fields.l4[0], fields.l4[1]])),
        _ => (
            u16::from_be_bytes([fields.l4[0], fields.l4[1]]),
            u16::from_be_bytes([fields.l4[2], fields.l4[3]]),
        ),
    };
    let key = FlowKey {
        addresses: Addresses::V4(Ipv4Addr::from(fields.src), Ipv4Addr::from(fields.dst)),
        protocol: fields.protocol,
        src_port,
        dst_port,
        vlan: fields.vlan.unwrap_or(0),
        ingress: counts.in_port,
        // The fast path never carries a tunnel's flows.
        tunnel: None,
    };
    Observation {
        key,
        egress: counts.out_port,
        packets: counts.packets,
        frame_bytes: counts.bytes,
        tcp_flags: counts.tcp_flags,
        l2_header: ETHERNET_HEADER + if fields.vlan.is_some() { VLAN_TAG } else { 0 },
        first: counts.since,
        last: counts.last_moved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpif::upcall::Decision;
    use crate::flow_match::Match;
    use core::time::Duration;

    fn udp_flow(tci: u16) -> FlowBits {
        let mut flow = FlowBits::ZERO;
        Field::InPort.set(&mut flow, 1);
        Field::DlType.set(&mut flow, 0x0800);
        Field::VlanTci.set(&mut flow, u128::from(tci));
        Field::DlDst.set(&mut flow, 0x0200_0000_0002);
        Field::NwSrc.set(&mut flow, 0x0a09_0001);
        Field::NwDst.set(&mut flow, 0x0a09_0002);
        Field::NwProto.set(&mut flow, 17);
        Field::TpSrc.set(&mut flow, 1024);
        Field::TpDst.set(&mut flow, 9);
        Field::NwTtl.set(&mut flow, 64);
        flow
    }

    fn counts(packets: u64, bytes: u64) -> Unexported {
        Unexported {
            packets,
            bytes,
            tcp_flags: 0,
            since: Duration::ZERO,
        }
    }

    fn megaflow_of(flow: FlowBits, mask: FlowBits, actions: Vec<Action>) -> Megaflow {
        Megaflow {
            flow_match: Match::new(flow, mask),
            decision: Decision {
                actions,
                ..Decision::default()
            },
            n_packets: 0,
            n_bytes: 0,
            used: Duration::from_secs(3),
            credited: (0, 0),
            created: Duration::from_secs(2),
            exported: (0, 0),
            exported_at: Duration::from_secs(2),
            tcp_flags: 0,
        }
    }

    #[test]
    fn an_exact_megaflow_is_one_flow() {
        let flow = udp_flow(VLAN_PRESENT | 0x2000 | 10);
        let m = megaflow_of(flow, flow_record_mask(&flow), vec![Action::Normal]);
        let Seen {
            flow: seen, egress, ..
        } = megaflow(&m, counts(4, 4 * 100)).unwrap();
        assert_eq!(
            seen.key,
            FlowKey {
                addresses: Addresses::V4(Ipv4Addr::new(10, 9, 0, 1), Ipv4Addr::new(10, 9, 0, 2)),
                protocol: 17,
                src_port: 1024,
                dst_port: 9,
                vlan: 10,
                ingress: 1,
                tunnel: None,
            }
        );
        assert_eq!(seen.l2_header, 18);
        assert_eq!(
            (seen.first, seen.last),
            (Duration::from_secs(2), Duration::from_secs(3))
        );
        // Counts taken after a flow record forgot the flow: they start after the last take,
        // not when the megaflow was made; one packet came at the megaflow's last use.
        let later = Unexported {
            since: Duration::from_millis(2500),
            ..counts(4, 400)
        };
        let Seen { flow: seen, .. } = megaflow(&m, later).unwrap();
        assert_eq!(seen.first, Duration::from_millis(2500));
        let Seen { flow: seen, .. } = megaflow(&m, counts(1, 100)).unwrap();
        assert_eq!(seen.first, Duration::from_secs(3));
        let mac = MacAddr([2, 0, 0, 0, 0, 2]);
        assert_eq!(egress, Egress::Learned { vlan: 10, mac });
        let mut macs = MacTable::default();
        assert_eq!(egress.resolve(&macs), 0, "not learned: flooded");
        macs.learn(10, mac, 7, Duration::ZERO);
        assert_eq!(egress.resolve(&macs), 7);
    }

    #[test]
    fn a_wildcarded_megaflow_is_not_reported() {
        let flow = udp_flow(0);
        let mut mask = flow_record_mask(&flow);
        Field::TpSrc.set(&mut mask, 0);
        let m = megaflow_of(flow, mask, vec![Action::Output(2)]);
        assert!(megaflow(&m, counts(1, 60)).is_none());
        let m = megaflow_of(flow, flow_record_mask(&flow), vec![Action::Output(2)]);
        let seen = megaflow(&m, counts(1, 60)).unwrap();
        assert_eq!((seen.egress, seen.flow.l2_header), (Egress::Port(2), 14));
        // A meter in front of the output leaves it the flow's one port.
        let actions = vec![Action::Meter(1), Action::Output(2)];
        let m = megaflow_of(flow, flow_record_mask(&flow), actions);
        assert_eq!(megaflow(&m, counts(1, 60)).unwrap().egress, Egress::Port(2));
    }

    #[test]
    fn icmp_type_and_code_are_the_destination_port() {
        let mut flow = udp_flow(0);
        Field::NwProto.set(&mut flow, 1);
        Field::IcmpType.set(&mut flow, 8);
        Field::IcmpCode.set(&mut flow, 0);
        let m = megaflow_of(flow, flow_record_mask(&flow), vec![Action::Output(2)]);
        let seen = megaflow(&m, counts(1, 98)).unwrap().flow;
        assert_eq!((seen.key.src_port, seen.key.dst_port), (0, 0x0800));
    }

    /// Tunnel port 10 (VXLAN, key=flow) from 192.168.77.1 to 192.168.77.2.
    fn vxlan_port() -> TunnelPort {
        TunnelPort {
            number: 10,
            config: "vxlan:remote_ip=192.168.77.2,key=flow".parse().unwrap(),
            underlay: 2,
            iface: "u0".to_string(),
            local_ip: Ipv4Addr::new(192, 168, 77, 1),
            local_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            mtu: crate::tunnel::Mtu::new(1500),
        }
    }

    #[test]
    fn a_flow_out_of_a_tunnel_carries_the_far_end_and_vni_it_came_with() {
        let mut flow = udp_flow(0);
        Field::InPort.set(&mut flow, 10);
        let arrived = TunnelMeta {
            id: 42,
            src: u32::from(Ipv4Addr::new(192, 168, 77, 2)),
            dst: u32::from(Ipv4Addr::new(192, 168, 77, 1)),
            opts: 0,
        };
        arrived.write(&mut flow);
        let mut loose = flow_record_mask(&flow);
        Field::TunSrc.set(&mut loose, 0);
        let m = megaflow_of(flow, loose, vec![Action::Output(1)]);
        assert!(
            megaflow(&m, counts(1, 60)).is_none(),
            "two far ends in one megaflow"
        );
        let m = megaflow_of(flow, flow_record_mask(&flow), vec![Action::Output(1)]);
        let seen = megaflow(&m, counts(1, 60)).unwrap();
        let resolved = seen.resolve(&MacTable::default(), &[vxlan_port()]);
        assert_eq!(resolved.egress, 1);
        assert_eq!(
            resolved.key.tunnel,
            Some(TunnelEnds {
                kind: crate::tunnel::TunnelKind::Vxlan,
                src: Ipv4Addr::new(192, 168, 77, 2),
                dst: Ipv4Addr::new(192, 168, 77, 1),
                dst_port: 4789,
                vni: 42,
            })
        );
    }

    #[test]
    fn a_flow_into_a_tunnel_carries_the_vni_its_actions_set() {
        let flow = udp_flow(0);
        let actions = vec![Action::SetField(Field::TunId, 7), Action::Output(10)];
        let m = megaflow_of(flow, flow_record_mask(&flow), actions);
        let seen = megaflow(&m, counts(1, 60)).unwrap();
        assert_eq!((seen.egress, seen.sent.id), (Egress::Port(10), 7));
        let resolved = seen.resolve(&MacTable::default(), &[vxlan_port()]);
        assert_eq!(resolved.egress, 10);
        let tunnel = resolved.key.tunnel.unwrap();
        assert_eq!(
            (tunnel.src, tunnel.dst, tunnel.vni),
            (
                Ipv4Addr::new(192, 168, 77, 1),
                Ipv4Addr::new(192, 168, 77, 2),
                7
            )
        );
        // Not a tunnel's flow at all: no tunnel.
        let m = megaflow_of(flow, flow_record_mask(&flow), vec![Action::Output(2)]);
        let resolved = megaflow(&m, counts(1, 60))
            .unwrap()
            .resolve(&MacTable::default(), &[vxlan_port()]);
        assert_eq!((resolved.egress, resolved.key.tunnel), (2, None));
    }

    #[test]
    fn a_flow_into_a_remote_ip_flow_port_carries_the_far_end_its_actions_set() {
        let port = TunnelPort {
            number: 11,
            config: "vxlan:remote_ip=flow,key=flow".parse().unwrap(),
            ..vxlan_port()
        };
        let flow = udp_flow(0);
        let far = Ipv4Addr::new(192, 168, 77, 3);
        let actions = vec![
            Action::SetField(Field::TunId, 7),
            Action::SetField(Field::TunDst, u128::from(u32::from(far))),
            Action::Output(11),
        ];
        let m = megaflow_of(flow, flow_record_mask(&flow), actions);
        let resolved = megaflow(&m, counts(1, 60))
            .unwrap()
            .resolve(&MacTable::default(), &[port]);
        assert_eq!(resolved.egress, 11);
        let tunnel = resolved.key.tunnel.unwrap();
        assert_eq!((tunnel.dst, tunnel.vni), (far, 7));
    }
}
