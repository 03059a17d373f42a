//! UDP as tcpdump -n prints it (its print-udp.c): the ports and the payload's length by the
//! UDP header.

use std::fmt::Write as _;

use wirespeed_packet::UdpPacket;

use super::ip::Addresses;

/// `datagram`: the captured bytes from the UDP header on.
pub(super) fn print(datagram: &[u8], addresses: Addresses, line: &mut String) {
    if datagram.len() < UdpPacket::<&[u8]>::HEADER_LEN {
        addresses.write_hosts(line);
        line.push_str("[|udp]");
        return;
    }
    let udp = UdpPacket::new_unchecked(datagram);
    addresses.write_ports(udp.src_port(), udp.dst_port(), line);
    let _ = write!(line, "UDP, length {}", udp.len().saturating_sub(8));
}
