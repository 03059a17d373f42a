//! ARP as tcpdump -n prints it (its print-arp.c): a request's who-has and tell, a reply's
//! is-at, else the operation's number.

use std::fmt::Write as _;

use wirespeed_packet::ArpPacket;

pub fn print(arp: &ArpPacket<&[u8]>, line: &mut String) {
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

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::line_of;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const ARP_REQUEST: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x02,
    ];
    const ARP_REPLY: [u8; 42] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0a, 0x00,
        0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x01,
    ];

    #[test]
    fn request() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ARP_REQUEST),
            "ARP, Request who-has 10.0.0.2 tell 10.0.0.1, length 28"
        );
    }

    #[test]
    fn request_with_the_link_header() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, true, &ARP_REQUEST),
            "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42: Request who-has 10.0.0.2 tell 10.0.0.1, length 28"
        );
    }

    #[test]
    fn reply() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ARP_REPLY),
            "ARP, Reply 10.0.0.2 is-at 02:00:00:00:00:02, length 28"
        );
    }
}
