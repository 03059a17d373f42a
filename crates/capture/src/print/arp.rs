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
