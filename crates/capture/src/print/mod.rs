//! The line printer: one line a packet as `tcpdump -n` (or `-n -e`) prints it — time of day
//! (local, microseconds), protocol, addresses and ports, length — one protocol a file, as
//! tcpdump's `print-*.c`. Each printer is handed the bytes after the previous layer and is
//! total over truncated input (tcpdump's ` [|proto]`).

mod arp;
mod ether;
mod icmp;
mod icmp6;
mod ip;
mod ip6;
mod raw;
mod sll;
mod tcp;
mod udp;
mod vlan;

use std::fmt::Write as _;

use crate::LINKTYPE_ETHERNET;
use crate::localtime::LocalOffset;
use sll::InterfaceNames;
use tcp::TcpLines;

/// What tcpdump's flags change in a line.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrintOptions {
    /// tcpdump's -e: the link-level header on each line.
    pub link: bool,
    /// tcpdump's -S: TCP sequence numbers as they are, not relative to the conversation's first.
    pub absolute_seq: bool,
}

/// True when lines can show packets of `link_type` (filters and files take any).
pub fn decodes(link_type: u16) -> bool {
    matches!(
        link_type,
        LINKTYPE_ETHERNET | raw::LINKTYPE_RAW | sll::LINKTYPE_LINUX_SLL | sll::LINKTYPE_LINUX_SLL2
    )
}

/// Prints the packets of one capture, in order (TCP's relative numbers and the interface
/// names are remembered across packets).
pub struct Printer {
    /// The records' link type (see [`decodes`]).
    link_type: u16,
    link: bool,
    /// The local zone's offset, for the time of day.
    zone: LocalOffset,
    tcp: TcpLines,
    names: InterfaceNames,
}

impl Printer {
    pub fn new(link_type: u16, options: PrintOptions) -> Printer {
        Printer {
            link_type,
            link: options.link,
            zone: LocalOffset::default(),
            tcp: TcpLines::new(options.absolute_seq),
            names: InterfaceNames::default(),
        }
    }

    /// Appends the line of a classic pcap record (nanosecond header, then the bytes) to
    /// `line`, without the newline.
    pub fn record(&mut self, record: &[u8], line: &mut String) {
        let word = |i: usize| {
            record
                .get(i..i + 4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (sec, nsec, orig_len) = (word(0), word(4), word(12));
        let data = record.get(16..).unwrap_or(&[]);
        let local = i64::from(sec) + self.zone.at(i64::from(sec));
        write_time_of_day(local, nsec, line);
        self.packet(data, orig_len, line);
    }

    /// Appends the line of a packet, after its time: `data` as captured, `orig_len` as it was
    /// on the wire.
    fn packet(&mut self, data: &[u8], orig_len: u32, line: &mut String) {
        let (link, tcp) = (self.link, &mut self.tcp);
        match self.link_type {
            raw::LINKTYPE_RAW => raw::print(data, link, tcp, line),
            sll::LINKTYPE_LINUX_SLL => sll::print_sll(data, orig_len, link, tcp, line),
            sll::LINKTYPE_LINUX_SLL2 => {
                sll::print_sll2(data, orig_len, link, &mut self.names, tcp, line)
            }
            _ => ether::print(data, orig_len, link, tcp, line),
        }
    }
}

/// `HH:MM:SS.uuuuuu ` of local seconds since the epoch and their nanoseconds.
fn write_time_of_day(local_s: i64, nsec: u32, line: &mut String) {
    let day = local_s.rem_euclid(86_400);
    let _ = write!(
        line,
        "{:02}:{:02}:{:02}.{:06} ",
        day / 3600,
        day / 60 % 60,
        day % 60,
        nsec / 1000
    );
}

/// The line `Printer` prints for one packet of `link_type`, without the time: as
/// `tcpdump -n`, or with `link` as `tcpdump -n -e`.
#[cfg(test)]
fn line_of(link_type: u16, link: bool, packet: &[u8]) -> String {
    let options = PrintOptions {
        link,
        absolute_seq: false,
    };
    lines_of(link_type, options, &[packet]).remove(0)
}

/// The lines one `Printer` prints for `packets`, in order, without the time.
#[cfg(test)]
fn lines_of(link_type: u16, options: PrintOptions, packets: &[&[u8]]) -> Vec<String> {
    let mut printer = Printer::new(link_type, options);
    let orig_len = |p: &[u8]| u32::try_from(p.len()).unwrap();
    packets
        .iter()
        .map(|p| {
            let mut line = String::new();
            printer.packet(p, orig_len(p), &mut line);
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // 1700000000.000123456 s, 42 bytes captured of 60: an ARP request.
    const RECORD: [u8; 58] = [
        0x00, 0xf1, 0x53, 0x65, 0x40, 0xe2, 0x01, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x00,
        0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,
    ];

    #[test]
    fn a_record_is_its_time_then_its_packet_with_the_length_on_the_wire() {
        let options = PrintOptions {
            link: true,
            absolute_seq: false,
        };
        let mut line = String::new();
        Printer::new(LINKTYPE_ETHERNET, options).record(&RECORD, &mut line);
        // The hour and minute depend on the local zone; the second and microseconds do not.
        let (time, packet) = line.split_once(' ').unwrap();
        assert_eq!(time.len(), "HH:MM:SS.uuuuuu".len());
        assert!(time.ends_with(":20.000123"), "{time}");
        assert_eq!(
            packet,
            "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 60: Request who-has 10.0.0.2 tell 10.0.0.1, length 28"
        );
    }

    #[test]
    fn time_of_day_in_microseconds() {
        let mut line = String::new();
        write_time_of_day(3 * 86_400 + 13 * 3600 + 62, 123_456_789, &mut line);
        assert_eq!(line, "13:01:02.123456 ");
        line.clear();
        write_time_of_day(-1, 0, &mut line);
        assert_eq!(line, "23:59:59.000000 ");
    }

    #[test]
    fn lines_decode_ethernet_cooked_and_raw_ip_only() {
        for link_type in [LINKTYPE_ETHERNET, 101, 113, 276] {
            assert!(decodes(link_type), "{link_type}");
        }
        assert!(!decodes(105), "802.11");
    }
}
