//! The templates the switch exports under (RFC 7011 section 3.4): IPv4 flows and IPv6 flows,
//! each without a tunnel, with VXLAN's or Geneve's (a 3-byte key) and with GRE's (a 4-byte
//! key), and an options template saying how flows were sampled.
//! Information elements and their numbers are IANA's (RFC 7012, the IPFIX registry), but
//! for a tunnel's, which IANA has none of: those are the enterprise elements Open vSwitch
//! exports under VMware's enterprise number, so collectors that read its tunnel fields
//! read ours.

use crate::ipfix::message::{Message, OPTIONS_TEMPLATE_SET, TEMPLATE_SET};

/// Template ids (any above 255).
pub const IPV4_TEMPLATE: u16 = 256;
pub const IPV6_TEMPLATE: u16 = 257;
pub const SAMPLING_TEMPLATE: u16 = 258;
pub const IPV4_TUNNEL_TEMPLATE: u16 = 259;
pub const IPV6_TUNNEL_TEMPLATE: u16 = 260;
pub const IPV4_GRE_TEMPLATE: u16 = 261;
pub const IPV6_GRE_TEMPLATE: u16 = 262;

/// An information element and its length in a record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Field {
    pub id: u16,
    pub len: u16,
    /// The enterprise number of an element outside IANA's registry; 0 for IANA's.
    pub enterprise: u32,
}

const fn field(id: u16, len: u16) -> Field {
    Field {
        id,
        len,
        enterprise: 0,
    }
}

/// VMware's private enterprise number, under which Open vSwitch defines its tunnel elements.
pub const VMWARE: u32 = 6876;

const fn vmware(id: u16, len: u16) -> Field {
    Field {
        id,
        len,
        enterprise: VMWARE,
    }
}

pub const OCTET_DELTA_COUNT: Field = field(1, 8);
pub const PACKET_DELTA_COUNT: Field = field(2, 8);
pub const PROTOCOL_IDENTIFIER: Field = field(4, 1);
/// TCP's flags of the flow's packets, ORed (RFC 7125: the header's 12 flag bits, the top
/// four zero; 0 for a flow not TCP).
pub const TCP_CONTROL_BITS: Field = field(6, 2);
pub const SOURCE_TRANSPORT_PORT: Field = field(7, 2);
pub const SOURCE_IPV4_ADDRESS: Field = field(8, 4);
pub const INGRESS_INTERFACE: Field = field(10, 4);
pub const DESTINATION_TRANSPORT_PORT: Field = field(11, 2);
pub const DESTINATION_IPV4_ADDRESS: Field = field(12, 4);
pub const EGRESS_INTERFACE: Field = field(14, 4);
pub const SOURCE_IPV6_ADDRESS: Field = field(27, 16);
pub const DESTINATION_IPV6_ADDRESS: Field = field(28, 16);
pub const VLAN_ID: Field = field(58, 2);
pub const FLOW_END_REASON: Field = field(136, 1);
pub const OBSERVATION_DOMAIN_ID: Field = field(149, 4);
pub const FLOW_START_MILLISECONDS: Field = field(152, 8);
pub const FLOW_END_MILLISECONDS: Field = field(153, 8);
pub const FLOW_START_NANOSECONDS: Field = field(156, 8);
pub const FLOW_END_NANOSECONDS: Field = field(157, 8);
pub const SELECTOR_ALGORITHM: Field = field(304, 2);
pub const SAMPLING_SIZE: Field = field(309, 4);
pub const SAMPLING_POPULATION: Field = field(310, 4);
pub const LAYER2_OCTET_DELTA_COUNT: Field = field(352, 8);
/// Open vSwitch's tunnel elements. tunnelType: 1 VXLAN, 2 GRE, 7 Geneve
/// ([`TUNNEL_TYPE_VXLAN`]).
pub const TUNNEL_TYPE: Field = vmware(891, 1);
/// The VNI, three bytes (Open vSwitch sends VXLAN's and Geneve's as three too).
pub const TUNNEL_KEY: Field = vmware(892, 3);
/// GRE's key, four bytes (as Open vSwitch sends it).
pub const GRE_TUNNEL_KEY: Field = vmware(892, 4);
pub const TUNNEL_SOURCE_IPV4_ADDRESS: Field = vmware(893, 4);
pub const TUNNEL_DESTINATION_IPV4_ADDRESS: Field = vmware(894, 4);
pub const TUNNEL_PROTOCOL_IDENTIFIER: Field = vmware(895, 1);
pub const TUNNEL_DESTINATION_TRANSPORT_PORT: Field = vmware(897, 2);
pub const TUNNEL_TYPE_VXLAN: u8 = 1;
pub const TUNNEL_TYPE_GRE: u8 = 2;
pub const TUNNEL_TYPE_GENEVE: u8 = 7;

/// The fields every flow record has after its addresses, in order.
const FLOW_FIELDS: [Field; 13] = [
    SOURCE_TRANSPORT_PORT,
    DESTINATION_TRANSPORT_PORT,
    PROTOCOL_IDENTIFIER,
    VLAN_ID,
    INGRESS_INTERFACE,
    EGRESS_INTERFACE,
    PACKET_DELTA_COUNT,
    OCTET_DELTA_COUNT,
    LAYER2_OCTET_DELTA_COUNT,
    // Nanoseconds as asked; milliseconds too, for collectors that read no other (nfdump).
    FLOW_START_NANOSECONDS,
    FLOW_END_NANOSECONDS,
    FLOW_START_MILLISECONDS,
    FLOW_END_MILLISECONDS,
];

/// The template of an IPv4 flow record: addresses, then `FLOW_FIELDS`, then the end reason
/// and TCP's flags.
pub fn ipv4_fields() -> Vec<Field> {
    flow_fields(SOURCE_IPV4_ADDRESS, DESTINATION_IPV4_ADDRESS)
}

pub fn ipv6_fields() -> Vec<Field> {
    flow_fields(SOURCE_IPV6_ADDRESS, DESTINATION_IPV6_ADDRESS)
}

/// The fields a record of a flow that came in by a tunnel, or went out through one, has
/// after [`ipv4_fields`]'s (or [`ipv6_fields`]'s), in Open vSwitch's order. Not the outer
/// UDP source port (Open vSwitch's 896): a hash of the inner flow that the flow does not
/// keep.
const TUNNEL_FIELDS: [Field; 6] = [
    TUNNEL_SOURCE_IPV4_ADDRESS,
    TUNNEL_DESTINATION_IPV4_ADDRESS,
    TUNNEL_PROTOCOL_IDENTIFIER,
    TUNNEL_DESTINATION_TRANSPORT_PORT,
    TUNNEL_TYPE,
    TUNNEL_KEY,
];

pub fn ipv4_tunnel_fields() -> Vec<Field> {
    let mut fields = ipv4_fields();
    fields.extend_from_slice(&TUNNEL_FIELDS);
    fields
}

pub fn ipv6_tunnel_fields() -> Vec<Field> {
    let mut fields = ipv6_fields();
    fields.extend_from_slice(&TUNNEL_FIELDS);
    fields
}

/// [`ipv4_tunnel_fields`] with GRE's four-byte key.
pub fn ipv4_gre_fields() -> Vec<Field> {
    with_gre_key(ipv4_tunnel_fields())
}

pub fn ipv6_gre_fields() -> Vec<Field> {
    with_gre_key(ipv6_tunnel_fields())
}

fn with_gre_key(mut fields: Vec<Field>) -> Vec<Field> {
    *fields.last_mut().expect("the tunnel key is last") = GRE_TUNNEL_KEY;
    fields
}

fn flow_fields(src: Field, dst: Field) -> Vec<Field> {
    let mut fields = vec![src, dst];
    fields.extend_from_slice(&FLOW_FIELDS);
    fields.extend_from_slice(&[FLOW_END_REASON, TCP_CONTROL_BITS]);
    fields
}

/// A template's fields, listed by a function ([`ipv4_fields`] and the others).
pub type FieldsOf = fn() -> Vec<Field>;

/// Bytes of a record under `fields`.
pub fn record_len(fields: &[Field]) -> usize {
    fields.iter().map(|f| usize::from(f.len)).sum()
}

/// The options template's scope (the observation domain) and fields: flows are selected
/// `samplingSize` out of every `samplingPopulation` (RFC 5477), by the selector algorithm.
pub const SAMPLING_SCOPE: [Field; 1] = [OBSERVATION_DOMAIN_ID];
pub const SAMPLING_FIELDS: [Field; 3] = [SELECTOR_ALGORITHM, SAMPLING_SIZE, SAMPLING_POPULATION];
/// selectorAlgorithm 3, "Random n-out-of-N Sampling": a flow is picked by a hash of its key,
/// which spreads flows as a random choice would.
pub const RANDOM_N_OUT_OF_N: u16 = 3;

/// A template record: id, field count, then each field's (id, length), an enterprise
/// element's id with its top bit set and followed by the enterprise number.
fn template_record(id: u16, fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 8 * fields.len());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&(fields.len() as u16).to_be_bytes());
    for f in fields {
        match f.enterprise {
            0 => out.extend_from_slice(&f.id.to_be_bytes()),
            _ => out.extend_from_slice(&(f.id | 0x8000).to_be_bytes()),
        }
        out.extend_from_slice(&f.len.to_be_bytes());
        if f.enterprise != 0 {
            out.extend_from_slice(&f.enterprise.to_be_bytes());
        }
    }
    out
}

/// An options template record: id, field count, scope field count, scope fields, fields.
fn options_template_record(id: u16, scope: &[Field], fields: &[Field]) -> Vec<u8> {
    let all: Vec<Field> = scope.iter().chain(fields).copied().collect();
    let mut out = template_record(id, &all);
    out.splice(4..4, (scope.len() as u16).to_be_bytes());
    out
}

/// The options data record saying `1 out of every population` flows are exported, for
/// observation domain `domain`.
pub fn sampling_record(domain: u32, population: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(14);
    out.extend_from_slice(&domain.to_be_bytes());
    out.extend_from_slice(&RANDOM_N_OUT_OF_N.to_be_bytes());
    out.extend_from_slice(&1u32.to_be_bytes());
    out.extend_from_slice(&population.to_be_bytes());
    out
}

/// A message with every template, then the sampling options record (so a collector has
/// all it needs from one datagram): what goes out at start and every template interval.
pub fn template_message(domain: u32, population: u32) -> Message {
    let mut message = Message::new();
    let templates: [(u16, FieldsOf); 6] = [
        (IPV4_TEMPLATE, ipv4_fields),
        (IPV6_TEMPLATE, ipv6_fields),
        (IPV4_TUNNEL_TEMPLATE, ipv4_tunnel_fields),
        (IPV6_TUNNEL_TEMPLATE, ipv6_tunnel_fields),
        (IPV4_GRE_TEMPLATE, ipv4_gre_fields),
        (IPV6_GRE_TEMPLATE, ipv6_gre_fields),
    ];
    for (id, fields) in templates {
        message.push(TEMPLATE_SET, &template_record(id, &fields()), false);
    }
    let options = options_template_record(SAMPLING_TEMPLATE, &SAMPLING_SCOPE, &SAMPLING_FIELDS);
    message.push(OPTIONS_TEMPLATE_SET, &options, false);
    message.push(
        SAMPLING_TEMPLATE,
        &sampling_record(domain, population),
        true,
    );
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipfix::message::MessageHeader;

    #[test]
    fn template_record_bytes() {
        assert_eq!(
            template_record(256, &[SOURCE_IPV4_ADDRESS, PACKET_DELTA_COUNT]),
            [1, 0, 0, 2, 0, 8, 0, 4, 0, 2, 0, 8]
        );
        assert_eq!(
            options_template_record(258, &SAMPLING_SCOPE, &SAMPLING_FIELDS),
            [
                1, 2, 0, 4, 0, 1, // id 258, 4 fields, 1 of them scope
                0, 149, 0, 4, // observationDomainId
                1, 48, 0, 2, // selectorAlgorithm
                1, 53, 0, 4, // samplingSize
                1, 54, 0, 4, // samplingPopulation
            ]
        );
    }

    #[test]
    fn an_enterprise_element_carries_its_number() {
        assert_eq!(
            template_record(259, &[SOURCE_IPV4_ADDRESS, TUNNEL_KEY]),
            [
                1, 3, 0, 2, // id 259, 2 fields
                0, 8, 0, 4, // sourceIPv4Address
                0x83, 0x7c, 0, 3, 0, 0, 0x1a, 0xdc, // tunnelKey (892), VMware's 6876
            ]
        );
    }

    #[test]
    fn record_lengths() {
        assert_eq!(
            record_len(&ipv4_fields()),
            4 + 4 + 2 + 2 + 1 + 2 + 4 + 4 + 3 * 8 + 4 * 8 + 1 + 2
        );
        assert_eq!(record_len(&ipv6_fields()), record_len(&ipv4_fields()) + 24);
        assert_eq!(
            record_len(&ipv4_tunnel_fields()),
            record_len(&ipv4_fields()) + 4 + 4 + 1 + 2 + 1 + 3
        );
        assert_eq!(
            record_len(&ipv6_tunnel_fields()),
            record_len(&ipv6_fields()) + 15
        );
        assert_eq!(
            record_len(&ipv4_gre_fields()),
            record_len(&ipv4_tunnel_fields()) + 1
        );
        assert_eq!(ipv6_gre_fields().last(), Some(&GRE_TUNNEL_KEY));
        assert_eq!(
            sampling_record(7, 4),
            [0, 0, 0, 7, 0, 3, 0, 0, 0, 1, 0, 0, 0, 4]
        );
    }

    #[test]
    fn the_template_message_holds_every_template_and_one_data_record() {
        let message = template_message(9, 1);
        assert_eq!(message.data_records(), 1);
        let header = MessageHeader {
            export_time: 0,
            sequence: 0,
            domain: 9,
        };
        let bytes = message.finish(&header);
        // Template set: 4 + (4 + 17 * 4) * 2 without tunnels, + (4 + 17 * 4 + 6 * 8) * 4
        // with (VXLAN or Geneve, and GRE; an enterprise element takes 8 bytes); options
        // template set: 4 + 6 + 4 * 4; options data set: 4 + 14.
        let template_set: usize = 4 + 2 * (4 + 17 * 4) + 4 * (4 + 17 * 4 + 6 * 8);
        assert_eq!(bytes.len(), 16 + template_set + 26 + 18);
        assert_eq!(&bytes[16..18], &[0, 2]);
        assert_eq!(&bytes[18..20], &(template_set as u16).to_be_bytes());
        assert_eq!(&bytes[20..24], &[1, 0, 0, 17]);
        let ipv4_tunnel = 20 + 2 * (4 + 17 * 4);
        assert_eq!(&bytes[ipv4_tunnel..ipv4_tunnel + 4], &[1, 3, 0, 23]);
        let ipv4_gre = ipv4_tunnel + 2 * (4 + 17 * 4 + 6 * 8);
        assert_eq!(&bytes[ipv4_gre..ipv4_gre + 4], &[1, 5, 0, 23]);
        // The last field, GRE's key: 892 with the enterprise bit, four bytes.
        let key = ipv4_gre + 4 + 17 * 4 + 5 * 8;
        assert_eq!(&bytes[key..key + 4], &[0x83, 0x7c, 0, 4]);
        let options = 16 + template_set;
        assert_eq!(&bytes[options..options + 4], &[0, 3, 0, 26]);
        assert_eq!(&bytes[options + 26..options + 30], &[1, 2, 0, 18]);
    }
}
