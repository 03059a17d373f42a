//! The templates the switch exports under (RFC 7011 section 3.4): one for IPv4 flows, one
//! for IPv6 flows, and an options template saying how flows were sampled. Information
//! elements and their numbers are IANA's (RFC 7012, the IPFIX registry).

use crate::ipfix::message::{Message, OPTIONS_TEMPLATE_SET, TEMPLATE_SET};

/// Template ids (any above 255).
pub const IPV4_TEMPLATE: u16 = 256;
pub const IPV6_TEMPLATE: u16 = 257;
pub const SAMPLING_TEMPLATE: u16 = 258;

/// An information element and its length in a record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Field {
    pub id: u16,
    pub len: u16,
}

const fn field(id: u16, len: u16) -> Field {
    Field { id, len }
}

pub const OCTET_DELTA_COUNT: Field = field(1, 8);
pub const PACKET_DELTA_COUNT: Field = field(2, 8);
pub const PROTOCOL_IDENTIFIER: Field = field(4, 1);
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

/// The template of an IPv4 flow record: addresses, then [`FLOW_FIELDS`], then the end reason.
pub fn ipv4_fields() -> Vec<Field> {
    flow_fields(SOURCE_IPV4_ADDRESS, DESTINATION_IPV4_ADDRESS)
}

pub fn ipv6_fields() -> Vec<Field> {
    flow_fields(SOURCE_IPV6_ADDRESS, DESTINATION_IPV6_ADDRESS)
}

fn flow_fields(src: Field, dst: Field) -> Vec<Field> {
    let mut fields = vec![src, dst];
    fields.extend_from_slice(&FLOW_FIELDS);
    fields.push(FLOW_END_REASON);
    fields
}

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

/// A template record: id, field count, then each field's (id, length).
fn template_record(id: u16, fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 4 * fields.len());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&(fields.len() as u16).to_be_bytes());
    for f in fields {
        out.extend_from_slice(&f.id.to_be_bytes());
        out.extend_from_slice(&f.len.to_be_bytes());
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
    message.push(
        TEMPLATE_SET,
        &template_record(IPV4_TEMPLATE, &ipv4_fields()),
        false,
    );
    message.push(
        TEMPLATE_SET,
        &template_record(IPV6_TEMPLATE, &ipv6_fields()),
        false,
    );
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
    fn record_lengths() {
        assert_eq!(
            record_len(&ipv4_fields()),
            4 + 4 + 2 + 2 + 1 + 2 + 4 + 4 + 3 * 8 + 4 * 8 + 1
        );
        assert_eq!(record_len(&ipv6_fields()), record_len(&ipv4_fields()) + 24);
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
        // Template set: 4 + (4 + 16 * 4) * 2; options template set: 4 + 6 + 4 * 4;
        // options data set: 4 + 14.
        let template_set = 4 + 2 * (4 + 16 * 4);
        assert_eq!(bytes.len(), 16 + template_set + 26 + 18);
        assert_eq!(&bytes[16..20], &[0, 2, 0, template_set as u8]);
        assert_eq!(&bytes[20..24], &[1, 0, 0, 16]);
        let options = 16 + template_set;
        assert_eq!(&bytes[options..options + 4], &[0, 3, 0, 26]);
        assert_eq!(&bytes[options + 26..options + 30], &[1, 2, 0, 18]);
    }
}
