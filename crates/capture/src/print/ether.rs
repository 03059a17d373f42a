//! Ethernet as tcpdump -n prints it (its print-ether.c): with -e the addresses and the
//! EtherType first; then the packet the EtherType names, after any VLAN tags.

use std::fmt::Write as _;

use wirespeed_packet::{ArpPacket, EtherType, EthernetFrame, VlanTag};

use super::tcp::TcpLines;
use super::{arp, ip, ip6, vlan};

/// tcpdump's name for an EtherType (its -e output), for the ones it names.
fn ethertype_name(ethertype: EtherType) -> &'static str {
    match ethertype.0 {
        0x0800 => "IPv4",
        0x0806 => "ARP",
        0x86dd => "IPv6",
        0x8100 => "802.1Q",
        0x88a8 => "802.1Q-QinQ",
        0x9100 => "802.1Q-9100",
        0x9200 => "802.1Q-9200",
        0x88cc => "LLDP",
        0x8035 => "Reverse ARP",
        0x8847 => "MPLS unicast",
        0x8848 => "MPLS multicast",
        _ => "Unknown",
    }
}

/// Writes `ethertype` as tcpdump -e does: `ethertype IPv4 (0x0800)`.
pub(super) fn write_ethertype(line: &mut String, ethertype: EtherType) {
    let _ = write!(
        line,
        "ethertype {} (0x{:04x})",
        ethertype_name(ethertype),
        ethertype.0
    );
}

/// An Ethernet frame as tcpdump -n prints it; with `link`, as tcpdump -n -e does: the
/// addresses, the EtherType and each VLAN tag first, and no protocol word after them. A
/// truncated header is ` [|proto]`, tcpdump's mark, which it prints without the word.
pub fn print(data: &[u8], orig_len: u32, link: bool, tcp: &mut TcpLines, line: &mut String) {
    let Ok(eth) = EthernetFrame::new_checked(data) else {
        let _ = write!(line, "[|ether], length {orig_len}");
        return;
    };
    let (ethertype, payload) = (eth.ethertype(), eth.payload());
    if link {
        let _ = write!(line, "{} > {}, ", eth.src_addr(), eth.dst_addr());
    }
    if vlan::is_tag(ethertype) && payload.len() < VlanTag::<&[u8]>::HEADER_LEN {
        line.push_str(" [|vlan]");
        return;
    }
    if link {
        write_ethertype(line, ethertype);
        let _ = write!(line, ", length {orig_len}: ");
    }
    if let Some(other) = print_ethertype(ethertype, payload, link, tcp, line) {
        let _ = write!(
            line,
            "{} > {}, ethertype Unknown ({other}), length {orig_len}",
            eth.src_addr(),
            eth.dst_addr()
        );
    }
}

/// The packet a link header carries, by its EtherType (VLAN tags first, shown with -e).
/// Returns the EtherType when it is not one decoded and the link header was not shown, for
/// the caller to say so.
pub(super) fn print_ethertype(
    ethertype: EtherType,
    payload: &[u8],
    link: bool,
    tcp: &mut TcpLines,
    line: &mut String,
) -> Option<EtherType> {
    let (ethertype, payload) = vlan::print_tags(ethertype, payload, link, line)?;
    // Without -e, a word for the protocol; with it, the EtherType already said it.
    let word = |line: &mut String, w: &str| {
        if !link {
            line.push_str(w);
        }
    };
    match ethertype {
        EtherType::IPV4 => {
            // tcpdump keeps the word for a truncated IPv4 header (and only for that one).
            word(line, "IP ");
            if ip::header_captured(payload) {
                ip::print(payload, tcp, line);
            } else {
                line.push_str(" [|ip]");
            }
        }
        EtherType::IPV6 if payload.len() >= ip6::HEADER_LEN => {
            word(line, "IP6 ");
            ip6::print(payload, tcp, line)
        }
        EtherType::IPV6 => line.push_str(" [|ip6]"),
        EtherType::ARP => match ArpPacket::new_checked(payload) {
            Ok(packet) => {
                word(line, "ARP, ");
                arp::print(&packet, line)
            }
            Err(_) => line.push_str(" [|arp]"),
        },
        // With -e the header is all we show of a protocol we do not decode.
        _ if link => {}
        other => return Some(other),
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::line_of;
    use crate::print::udp::tests::ETHER_UDP;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const ETHER_UNKNOWN: [u8; 60] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0xb5, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn ipv4_udp() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ETHER_UDP),
            "IP 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 12"
        );
    }

    #[test]
    fn ipv4_udp_with_the_link_header() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, true, &ETHER_UDP),
            "02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype IPv4 (0x0800), length 54: 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 12"
        );
    }

    /// tcpdump goes on with `: ` and a hex dump of the payload on lines of their own.
    #[test]
    fn an_ethertype_not_decoded_shows_the_link_header() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ETHER_UNKNOWN),
            "02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype Unknown (0x88b5), length 60"
        );
    }
}
