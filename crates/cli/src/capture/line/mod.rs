//! One line a packet, like `tcpdump -n` (or `-n -e`): time (local, microseconds), protocol,
//! addresses and ports, length. Runs on the writer thread, so printing never slows the
//! receive loop.

mod icmp;
mod link;
mod tcp;

use std::fmt::Write as _;
use std::io::{self, BufWriter, Stdout, Write};
use std::net::IpAddr;
use std::path::Path;

use wirespeed_capture::localtime::LocalOffset;
use wirespeed_capture::spool::{Chunk, Output, WriteError};
use wirespeed_packet::{
    ArpPacket, EtherType, EthernetFrame, IpProtocol, Ipv4Packet, Ipv6Packet, UdpPacket, VlanTag,
};

pub use link::lines_decode;
use link::{InterfaceNames, format_raw, format_sll, format_sll2};
use tcp::TcpLines;

/// Prints the records of each chunk (classic pcap records) as lines on standard output.
pub struct LineOutput {
    out: BufWriter<Stdout>,
    line: String,
    /// The records' link type (see [`lines_decode`]).
    link_type: u16,
    /// tcpdump's -e: the link-level header on each line.
    link: bool,
    /// The local zone's offset, for the time of day.
    zone: LocalOffset,
    tcp: TcpLines,
    names: InterfaceNames,
}

impl LineOutput {
    /// `absolute_seq`: TCP sequence numbers as they are, as tcpdump -S prints them.
    pub fn new(link_type: u16, link: bool, absolute_seq: bool) -> LineOutput {
        LineOutput {
            out: BufWriter::with_capacity(1 << 16, io::stdout()),
            line: String::with_capacity(256),
            link_type,
            link,
            zone: LocalOffset::default(),
            tcp: TcpLines::new(absolute_seq),
            names: InterfaceNames::default(),
        }
    }

    /// A classic pcap record (nanosecond header, then the bytes) as a line.
    fn format_record(&mut self, record: &[u8]) {
        let word = |i: usize| {
            record
                .get(i..i + 4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (sec, nsec, orig_len) = (word(0), word(4), word(12));
        let data = record.get(16..).unwrap_or(&[]);
        let local = i64::from(sec) + self.zone.at(i64::from(sec));
        let day = local.rem_euclid(86_400);
        let line = &mut self.line;
        let _ = write!(
            line,
            "{:02}:{:02}:{:02}.{:06} ",
            day / 3600,
            day / 60 % 60,
            day % 60,
            nsec / 1000
        );
        let (link, tcp) = (self.link, &mut self.tcp);
        match self.link_type {
            link::LINKTYPE_RAW => format_raw(data, link, tcp, line),
            link::LINKTYPE_LINUX_SLL => format_sll(data, orig_len, link, tcp, line),
            link::LINKTYPE_LINUX_SLL2 => {
                format_sll2(data, orig_len, link, &mut self.names, tcp, line)
            }
            _ => format_ethernet(data, orig_len, link, tcp, line),
        }
    }
}

impl Output for LineOutput {
    fn open(&mut self, _path: &Path, _header: &[u8]) -> io::Result<()> {
        Ok(())
    }

    fn write(&mut self, chunk: &Chunk) -> Result<(), WriteError> {
        let mut start = 0;
        for (i, &end) in chunk.packet_ends.iter().enumerate() {
            let record = &chunk.bytes[start..end];
            start = end;
            self.line.clear();
            self.format_record(record);
            if let Err(error) = writeln!(self.out, "{}", self.line) {
                return Err(WriteError {
                    written_packets: i as u64,
                    error,
                });
            }
        }
        // Lines appear as the chunks come (the loop passes chunks on when it goes idle).
        self.out.flush().map_err(|error| WriteError {
            written_packets: chunk.packets(),
            error,
        })
    }

    fn close(&mut self, _trailer: &[u8]) -> io::Result<()> {
        self.out.flush()
    }
}

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
fn write_ethertype(line: &mut String, ethertype: EtherType) {
    let _ = write!(
        line,
        "ethertype {} (0x{:04x})",
        ethertype_name(ethertype),
        ethertype.0
    );
}

/// tcpdump's VLAN tag types: 802.1Q, QinQ's 802.1ad, and the older QinQ 0x9100 and 0x9200.
fn is_tag(ethertype: EtherType) -> bool {
    ethertype.is_vlan() || matches!(ethertype.0, 0x9100 | 0x9200)
}

/// An Ethernet frame as tcpdump -n prints it; with `link`, as tcpdump -n -e does: the
/// addresses, the EtherType and each VLAN tag first, and no protocol word after them. A
/// truncated header is ` [|proto]`, tcpdump's mark, which it prints without the word.
fn format_ethernet(data: &[u8], orig_len: u32, link: bool, tcp: &mut TcpLines, line: &mut String) {
    let Ok(eth) = EthernetFrame::new_checked(data) else {
        let _ = write!(line, "[|ether], length {orig_len}");
        return;
    };
    let (ethertype, payload) = (eth.ethertype(), eth.payload());
    if link {
        let _ = write!(line, "{} > {}, ", eth.src_addr(), eth.dst_addr());
    }
    if is_tag(ethertype) && payload.len() < VlanTag::<&[u8]>::HEADER_LEN {
        line.push_str(" [|vlan]");
        return;
    }
    if link {
        write_ethertype(line, ethertype);
        let _ = write!(line, ", length {orig_len}: ");
    }
    if let Some(other) = format_protocol(ethertype, payload, link, tcp, line) {
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
fn format_protocol(
    mut ethertype: EtherType,
    mut payload: &[u8],
    link: bool,
    tcp: &mut TcpLines,
    line: &mut String,
) -> Option<EtherType> {
    while is_tag(ethertype) {
        let Ok(tag) = VlanTag::new_checked(payload) else {
            line.push_str(" [|vlan]");
            return None;
        };
        // Without -e the tag is not shown, as in tcpdump: the packet inside it is.
        if link {
            let dei = if tag.drop_eligible() { ", DEI" } else { "" };
            let _ = write!(line, "vlan {}, p {}{dei}, ", tag.vlan_id(), tag.priority());
            write_ethertype(line, tag.ethertype());
            line.push_str(", ");
        }
        // The tag is 4 bytes: TCI, then the next EtherType.
        (ethertype, payload) = (tag.ethertype(), payload.get(4..).unwrap_or(&[]));
    }
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
            if ipv4_header_captured(payload) {
                format_ipv4(payload, tcp, line);
            } else {
                line.push_str(" [|ip]");
            }
        }
        EtherType::IPV6 if payload.len() >= IPV6_HEADER => {
            word(line, "IP6 ");
            format_ipv6(payload, tcp, line)
        }
        EtherType::IPV6 => line.push_str(" [|ip6]"),
        EtherType::ARP => match ArpPacket::new_checked(payload) {
            Ok(arp) => {
                word(line, "ARP, ");
                format_arp(&arp, line)
            }
            Err(_) => line.push_str(" [|arp]"),
        },
        // With -e the header is all we show of a protocol we do not decode.
        _ if link => {}
        other => return Some(other),
    }
    None
}

const IPV4_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;

/// Whether an IPv4 header was captured whole. The rest of the packet may be cut short by a
/// snap length: lines show what the headers say, as tcpdump's do.
fn ipv4_header_captured(payload: &[u8]) -> bool {
    if payload.len() < IPV4_HEADER {
        return false;
    }
    let ip = Ipv4Packet::new_unchecked(payload);
    ip.version() == 4 && (IPV4_HEADER..=payload.len()).contains(&ip.header_len())
}

/// The transport bytes captured of an IP `packet` whose header is `header_len` bytes and
/// whose payload the header says is `length` bytes (Ethernet padding left out), and that
/// length.
fn transport(packet: &[u8], header_len: usize, length: usize) -> (&[u8], usize) {
    let end = (header_len + length).min(packet.len());
    (&packet[header_len.min(end)..end], length)
}

fn format_ipv4(packet: &[u8], tcp: &mut TcpLines, line: &mut String) {
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
    format_transport(ip.protocol(), Addresses::Shown(src, dst), l4, tcp, line);
}

fn format_ipv6(packet: &[u8], tcp: &mut TcpLines, line: &mut String) {
    let ip = Ipv6Packet::new_unchecked(packet);
    let (src, dst) = (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()));
    let (mut l4, mut length) = transport(packet, IPV6_HEADER, usize::from(ip.payload_len()));
    let mut next = ip.next_header();
    // Hop-by-hop and destination options (an MLD report's router alert): a word each,
    // then the transport, whose line then starts with its ports alone, as tcpdump's does.
    let mut words = String::new();
    while let Some((word, cut)) = match next.0 {
        0 => Some(("HBH ", "hbhopt")),
        60 => Some(("DSTOPT ", "dstopt")),
        _ => None,
    } {
        let header_len = l4.get(1).map(|&n| (usize::from(n) + 1) * 8);
        let Some(header_len) = header_len.filter(|&n| n <= l4.len()) else {
            let _ = write!(line, "{src} > {dst}: {words} [|{cut}]");
            return;
        };
        words.push_str(word);
        next = IpProtocol(l4[0]);
        l4 = &l4[header_len..];
        length = length.saturating_sub(header_len);
    }
    let addresses = if words.is_empty() {
        Addresses::Shown(src, dst)
    } else {
        let _ = write!(line, "{src} > {dst}: {words}");
        Addresses::Printed(src, dst)
    };
    format_transport(next, addresses, (l4, length), tcp, line);
}

/// The packet's addresses: for the transport to show with its ports, or already on the line
/// (after IPv6 extension headers), so that its ports stand alone.
#[derive(Clone, Copy)]
pub enum Addresses {
    Shown(IpAddr, IpAddr),
    Printed(IpAddr, IpAddr),
}

impl Addresses {
    pub fn pair(self) -> (IpAddr, IpAddr) {
        match self {
            Addresses::Shown(s, d) | Addresses::Printed(s, d) => (s, d),
        }
    }

    /// `src.sport > dst.dport: `, or the ports alone.
    pub fn write_ports(self, sport: u16, dport: u16, line: &mut String) {
        let _ = match self {
            Addresses::Shown(s, d) => write!(line, "{s}.{sport} > {d}.{dport}: "),
            Addresses::Printed(..) => write!(line, "{sport} > {dport}: "),
        };
    }

    /// `src > dst: `, unless already printed.
    pub fn write_hosts(self, line: &mut String) {
        if let Addresses::Shown(s, d) = self {
            let _ = write!(line, "{s} > {d}: ");
        }
    }
}

/// `l4`: the transport bytes captured, and the transport length the IP header gives.
fn format_transport(
    proto: IpProtocol,
    addresses: Addresses,
    (l4, length): (&[u8], usize),
    tcp: &mut TcpLines,
    line: &mut String,
) {
    match proto {
        IpProtocol::UDP => match (l4.len() >= UdpPacket::<&[u8]>::HEADER_LEN)
            .then(|| UdpPacket::new_unchecked(l4))
        {
            Some(udp) => {
                addresses.write_ports(udp.src_port(), udp.dst_port(), line);
                let _ = write!(line, "UDP, length {}", udp.len().saturating_sub(8));
            }
            None => {
                addresses.write_hosts(line);
                line.push_str("[|udp]");
            }
        },
        IpProtocol::TCP => tcp.format(l4, length, addresses, line),
        IpProtocol::ICMP => {
            addresses.write_hosts(line);
            icmp::format_v4(l4, length, line);
        }
        IpProtocol::ICMPV6 => {
            addresses.write_hosts(line);
            icmp::format_v6(l4, length, line);
        }
        IpProtocol(p) => {
            addresses.write_hosts(line);
            let _ = write!(line, "ip-proto-{p} {length}");
        }
    }
}

fn format_arp(arp: &ArpPacket<&[u8]>, line: &mut String) {
    let len = ArpPacket::<&[u8]>::HEADER_LEN;
    match arp.operation() {
        1 => {
            let _ = write!(
                line,
                "Request who-has {} tell {}, length {len}",
                arp.target_protocol_addr(),
                arp.sender_protocol_addr()
            );
        }
        2 => {
            let _ = write!(
                line,
                "Reply {} is-at {}, length {len}",
                arp.sender_protocol_addr(),
                arp.sender_hardware_addr()
            );
        }
        op => {
            let _ = write!(line, "op {op}, length {len}");
        }
    }
}
