//! IPv4 as tcpdump -n prints it (its print-ip.c): a fragment's protocol number, else the
//! transport the protocol names (the demultiplexing IPv6 shares), handed the addresses.

use std::fmt::Write as _;
use std::net::IpAddr;

use wirespeed_packet::{IpProtocol, Ipv4Packet};

use super::tcp::TcpLines;
use super::{icmp, icmp6, udp};

const HEADER_LEN: usize = 20;

/// Whether an IPv4 header was captured whole. The rest of the packet may be cut short by a
/// snap length: lines show what the headers say, as tcpdump's do.
pub(super) fn header_captured(payload: &[u8]) -> bool {
    if payload.len() < HEADER_LEN {
        return false;
    }
    let ip = Ipv4Packet::new_unchecked(payload);
    ip.version() == 4 && (HEADER_LEN..=payload.len()).contains(&ip.header_len())
}

/// The transport bytes captured of an IP `packet` whose header is `header_len` bytes and
/// whose payload the header says is `length` bytes (Ethernet padding left out), and that
/// length.
pub(super) fn transport(packet: &[u8], header_len: usize, length: usize) -> (&[u8], usize) {
    let end = (header_len + length).min(packet.len());
    (&packet[header_len.min(end)..end], length)
}

/// An IPv4 packet whose header [`header_captured`] vouched for.
pub(super) fn print(packet: &[u8], tcp: &mut TcpLines, line: &mut String) {
    let ip = Ipv4Packet::new_unchecked(packet);
    let (src, dst) = (IpAddr::V4(ip.src_addr()), IpAddr::V4(ip.dst_addr()));
    if ip.frag_offset() != 0 {
        let _ = write!(
            line,
            "{src} > {dst}: ip-proto-{} (fragment)",
            ip.protocol().0
        );
        return;
    }
    let header_len = ip.header_len();
    let length = usize::from(ip.total_len()).saturating_sub(header_len);
    let l4 = transport(packet, header_len, length);
    print_transport(ip.protocol(), Addresses::Shown(src, dst), l4, tcp, line);
}

/// The packet's addresses: for the transport to show with its ports, or already on the line
/// (after IPv6 extension headers), so that its ports stand alone.
#[derive(Clone, Copy)]
pub(super) enum Addresses {
    Shown(IpAddr, IpAddr),
    Printed(IpAddr, IpAddr),
}

impl Addresses {
    pub(super) fn pair(self) -> (IpAddr, IpAddr) {
        match self {
            Addresses::Shown(s, d) | Addresses::Printed(s, d) => (s, d),
        }
    }

    /// `src.sport > dst.dport: `, or the ports alone.
    pub(super) fn write_ports(self, sport: u16, dport: u16, line: &mut String) {
        let _ = match self {
            Addresses::Shown(s, d) => write!(line, "{s}.{sport} > {d}.{dport}: "),
            Addresses::Printed(..) => write!(line, "{sport} > {dport}: "),
        };
    }

    /// `src > dst: `, unless already printed.
    pub(super) fn write_hosts(self, line: &mut String) {
        if let Addresses::Shown(s, d) = self {
            let _ = write!(line, "{s} > {d}: ");
        }
    }
}

/// The transport `proto` names (tcpdump's ip_demux_print). `l4`: the transport bytes
/// captured, and the transport length the IP header gives.
pub(super) fn print_transport(
    proto: IpProtocol,
    addresses: Addresses,
    (l4, length): (&[u8], usize),
    tcp: &mut TcpLines,
    line: &mut String,
) {
    match proto {
        IpProtocol::UDP => udp::print(l4, addresses, line),
        IpProtocol::TCP => tcp.print(l4, length, addresses, line),
        IpProtocol::ICMP => {
            addresses.write_hosts(line);
            icmp::print(l4, length, line);
        }
        IpProtocol::ICMPV6 => {
            addresses.write_hosts(line);
            icmp6::print(l4, length, line);
        }
        IpProtocol(p) => {
            addresses.write_hosts(line);
            let _ = write!(line, "ip-proto-{p} {length}");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::line_of;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const IP_CUT: [u8; 24] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn a_cut_header_keeps_the_word() {
        assert_eq!(line_of(LINKTYPE_ETHERNET, false, &IP_CUT), "IP  [|ip]");
    }

    #[test]
    fn a_cut_header_with_the_link_header() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, true, &IP_CUT),
            "02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype IPv4 (0x0800), length 24:  [|ip]"
        );
    }
}
