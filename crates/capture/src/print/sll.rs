//! Linux cooked captures as tcpdump -n prints them (its print-sll.c): what `tcpdump -i any`
//! writes, SLL, and SLL2 with the interface. Without -e a cooked line starts with what
//! tcpdump shows of the header anyway (SLL2: the interface and the direction); with -e, the
//! whole header.

use std::collections::HashMap;
use std::fmt::Write as _;

use wirespeed_packet::EtherType;

use super::ether::{print_ethertype, write_ethertype};
use super::tcp::TcpLines;

pub const LINKTYPE_LINUX_SLL: u16 = 113;
pub const LINKTYPE_LINUX_SLL2: u16 = 276;

const SLL_HEADER: usize = 16;
const SLL2_HEADER: usize = 20;
/// The address field of both cooked headers.
const ADDRESS_MAX: usize = 8;

/// Interface names by index, looked up on this machine as tcpdump does (so a file from
/// another machine or namespace can show other names), each once.
#[derive(Default)]
pub struct InterfaceNames(HashMap<u32, String>);

impl InterfaceNames {
    fn get(&mut self, index: u32) -> &str {
        self.0.entry(index).or_insert_with(|| {
            nix::net::if_::if_indextoname(index)
                .ok()
                .and_then(|n| n.into_string().ok())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "?".to_string())
        })
    }
}

/// A cooked header's packet type, as tcpdump names it.
fn packet_type(t: u16) -> &'static str {
    match t {
        0 => "In",
        1 => "B",
        2 => "M",
        3 => "P",
        4 => "Out",
        _ => "?",
    }
}

/// A link address, its bytes in hex separated by colons, and a space; nothing when empty.
fn write_address(line: &mut String, address: &[u8]) {
    for (i, b) in address.iter().enumerate() {
        let sep = if i == 0 { "" } else { ":" };
        let _ = write!(line, "{sep}{b:02x}");
    }
    if !address.is_empty() {
        line.push(' ');
    }
}

fn be16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

/// LINUX_SLL: packet type, link address and protocol, 16 bytes.
pub fn print_sll(data: &[u8], orig_len: u32, link: bool, tcp: &mut TcpLines, line: &mut String) {
    if data.len() < SLL_HEADER {
        line.push_str(" [|sll]");
        return;
    }
    let protocol = EtherType(be16(data, 14));
    let address = &data[6..6 + usize::from(be16(data, 4)).min(ADDRESS_MAX)];
    let header = |line: &mut String| {
        let _ = write!(line, "{:>3} ", packet_type(be16(data, 0)));
        write_address(line, address);
        write_ethertype(line, protocol);
        let _ = write!(line, ", length {orig_len}: ");
    };
    if link {
        header(line);
    }
    // A protocol not decoded: its header says what it is, as with -e.
    if print_ethertype(protocol, &data[SLL_HEADER..], link, tcp, line).is_some() {
        header(line);
    }
}

/// LINUX_SLL2: protocol, interface index, packet type and link address, 20 bytes.
pub fn print_sll2(
    data: &[u8],
    orig_len: u32,
    link: bool,
    names: &mut InterfaceNames,
    tcp: &mut TcpLines,
    line: &mut String,
) {
    if data.len() < SLL2_HEADER {
        line.push_str(" [|sll2]");
        return;
    }
    let protocol = EtherType(be16(data, 0));
    let index = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
    let address = &data[12..12 + usize::from(data[11]).min(ADDRESS_MAX)];
    let _ = write!(
        line,
        "{:<5} {:<3} ",
        names.get(index),
        packet_type(u16::from(data[10]))
    );
    let header = |line: &mut String| {
        let _ = write!(line, "ifindex {index} ");
        write_address(line, address);
        write_ethertype(line, protocol);
        let _ = write!(line, ", length {orig_len}: ");
    };
    if link {
        header(line);
    }
    if print_ethertype(protocol, &data[SLL2_HEADER..], link, tcp, line).is_some() {
        header(line);
    }
}

#[cfg(test)]
mod tests {
    use crate::print::line_of;
    use crate::print::sll;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const SLL_UDP: [u8; 48] = [
        0x00, 0x04, 0x00, 0x01, 0x00, 0x06, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x08,
        0x00, 0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0xca, 0x0a, 0x00,
        0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0c, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00,
    ];
    // Interface 999999, which no machine here has: its name is `?`.
    const SLL2_UDP: [u8; 52] = [
        0x08, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x42, 0x3f, 0x00, 0x01, 0x00, 0x06, 0x02, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11,
        0x66, 0xca, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x04, 0xd2, 0x16, 0x2e, 0x00,
        0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn sll_without_e_shows_the_packet() {
        assert_eq!(
            line_of(sll::LINKTYPE_LINUX_SLL, false, &SLL_UDP),
            "IP 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 4"
        );
    }

    #[test]
    fn sll_with_e_shows_type_address_and_protocol() {
        assert_eq!(
            line_of(sll::LINKTYPE_LINUX_SLL, true, &SLL_UDP),
            "Out 02:00:00:00:00:01 ethertype IPv4 (0x0800), length 48: 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 4"
        );
    }

    #[test]
    fn sll2_starts_with_interface_and_direction() {
        assert_eq!(
            line_of(sll::LINKTYPE_LINUX_SLL2, false, &SLL2_UDP),
            "?     In  IP 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 4"
        );
    }

    #[test]
    fn sll2_with_e_shows_the_index() {
        assert_eq!(
            line_of(sll::LINKTYPE_LINUX_SLL2, true, &SLL2_UDP),
            "?     In  ifindex 999999 02:00:00:00:00:01 ethertype IPv4 (0x0800), length 52: 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 4"
        );
    }
}
