//! The frames `wirespeed gen` sends: Ethernet, an optional 802.1Q tag, IPv4 or IPv6, then UDP,
//! a TCP SYN or an ICMP echo request, whose payload starts with the 18-byte test payload
//! (see [`crate::template`]) followed by filler. Every checksum is filled.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::error::BuildError;
use crate::ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr};
use crate::filler;
use crate::icmp::Icmpv4Packet;
use crate::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use crate::ipv6::Ipv6Packet;
use crate::tcp::{TcpPacket, flags};
use crate::template::{PAYLOAD_HEADER_LEN, TestPayload};
use crate::udp::{UdpPacket, UdpRepr};
use crate::vlan::{VlanRepr, VlanTag};

/// ICMPv6 echo request (RFC 4443 §4.1).
pub const ICMPV6_ECHO_REQUEST: u8 = 128;
/// The window a generated SYN offers (Linux's default for a 1460-byte MSS).
pub const SYN_WINDOW: u16 = 64240;

/// The addresses of one IP packet: both of the same family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPair {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

impl IpPair {
    fn header_len(&self) -> usize {
        match self {
            IpPair::V4(..) => Ipv4Packet::<&[u8]>::MIN_HEADER_LEN,
            IpPair::V6(..) => Ipv6Packet::<&[u8]>::HEADER_LEN,
        }
    }
}

/// What rides on IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4Kind {
    Udp,
    /// A TCP segment with only SYN set; the payload rides in the SYN (RFC 793 allows it).
    TcpSyn,
    /// ICMP echo request (ICMPv6 over IPv6); the source port is the echo identifier.
    IcmpEcho,
}

impl L4Kind {
    pub fn header_len(self) -> usize {
        match self {
            L4Kind::Udp => UdpPacket::<&[u8]>::HEADER_LEN,
            L4Kind::TcpSyn => TcpPacket::<&[u8]>::MIN_HEADER_LEN,
            L4Kind::IcmpEcho => Icmpv4Packet::<&[u8]>::HEADER_LEN,
        }
    }
}

/// One flow's frame, minus what changes per packet (length, sequence number, timestamp).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSpec {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    /// 802.1Q VLAN id (priority 0).
    pub vlan: Option<u16>,
    pub ip: IpPair,
    pub l4: L4Kind,
    /// UDP / TCP source port, or the ICMP echo identifier.
    pub src_port: u16,
    /// UDP / TCP destination port (unused by ICMP).
    pub dst_port: u16,
    pub generator: u16,
}

impl FrameSpec {
    /// Largest frame built (a jumbo frame, without FCS).
    pub const MAX_FRAME_LEN: usize = 9000;

    /// Bytes of headers in front of the test payload.
    pub fn headers_len(&self) -> usize {
        let vlan = if self.vlan.is_some() {
            VlanTag::<&[u8]>::HEADER_LEN
        } else {
            0
        };
        EthernetFrame::<&[u8]>::HEADER_LEN + vlan + self.ip.header_len() + self.l4.header_len()
    }

    /// Where the transport checksum lies in the frame (UDP, TCP, ICMP or ICMPv6's), which
    /// covers the test payload.
    pub fn checksum_at(&self) -> usize {
        let l4 = self.headers_len() - self.l4.header_len();
        l4 + match self.l4 {
            L4Kind::Udp => 6,
            L4Kind::TcpSyn => 16,
            L4Kind::IcmpEcho => 2,
        }
    }

    /// The shortest frame (without FCS) that holds the headers and the test payload.
    pub fn min_frame_len(&self) -> usize {
        self.headers_len() + PAYLOAD_HEADER_LEN
    }

    /// Writes the whole frame into `buf[..frame_len]`; returns `frame_len`.
    pub fn write(
        &self,
        buf: &mut [u8],
        frame_len: usize,
        seq: u64,
        timestamp_ns: u64,
    ) -> Result<usize, BuildError> {
        let (min, max) = (self.min_frame_len(), Self::MAX_FRAME_LEN);
        if !(min..=max).contains(&frame_len) {
            return Err(BuildError::FrameLenOutOfRange {
                frame_len,
                min,
                max,
            });
        }
        let have = buf.len();
        let frame = buf.get_mut(..frame_len).ok_or(BuildError::BufferTooShort {
            need: frame_len,
            have,
        })?;
        let l3_start = self.write_l2(frame);
        let l4_start = l3_start + self.ip.header_len();
        let test_payload = TestPayload {
            generator: self.generator,
            seq,
            timestamp_ns,
        };
        let payload = &mut frame[l4_start + self.l4.header_len()..];
        test_payload.emit(payload)?;
        filler::write(&mut payload[PAYLOAD_HEADER_LEN..], seq);
        // Fits in u16: frame_len <= 9000.
        let l4_len = (frame_len - l4_start) as u16;
        self.write_l3(&mut frame[l3_start..], l4_len, seq);
        self.write_l4(&mut frame[l4_start..], seq);
        Ok(frame_len)
    }

    /// Ethernet and the VLAN tag; returns where the IP header starts.
    fn write_l2(&self, frame: &mut [u8]) -> usize {
        let ethertype = match self.ip {
            IpPair::V4(..) => EtherType::IPV4,
            IpPair::V6(..) => EtherType::IPV6,
        };
        let mut ethernet = EthernetFrame::new_unchecked(&mut *frame);
        let mut header = EthernetRepr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype,
        };
        let Some(vlan_id) = self.vlan else {
            header.emit(&mut ethernet);
            return header.buffer_len();
        };
        header.ethertype = EtherType::VLAN;
        header.emit(&mut ethernet);
        let tag = VlanRepr {
            priority: 0,
            drop_eligible: false,
            vlan_id,
            ethertype,
        };
        tag.emit(&mut VlanTag::new_unchecked(ethernet.payload_mut()));
        header.buffer_len() + tag.buffer_len()
    }

    fn ip_protocol(&self) -> IpProtocol {
        match (self.l4, self.ip) {
            (L4Kind::Udp, _) => IpProtocol::UDP,
            (L4Kind::TcpSyn, _) => IpProtocol::TCP,
            (L4Kind::IcmpEcho, IpPair::V4(..)) => IpProtocol::ICMP,
            (L4Kind::IcmpEcho, IpPair::V6(..)) => IpProtocol::ICMPV6,
        }
    }

    /// The IP header, given the length of what follows it.
    fn write_l3(&self, l3: &mut [u8], l4_len: u16, seq: u64) {
        let protocol = self.ip_protocol();
        match self.ip {
            IpPair::V4(src, dst) => {
                let header = Ipv4Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol,
                    payload_len: l4_len,
                    ttl: 64,
                    ident: seq as u16,
                    dscp: 0,
                    ecn: 0,
                    dont_frag: false,
                };
                let len = header.buffer_len() + l4_len as usize;
                header.emit(&mut Ipv4Packet::new_unchecked(&mut l3[..len]));
            }
            IpPair::V6(src, dst) => {
                let mut ip = Ipv6Packet::new_unchecked(&mut *l3);
                ip.set_version(6);
                ip.set_traffic_class(0);
                ip.set_flow_label(0);
                ip.set_payload_len(l4_len);
                ip.set_next_header(protocol);
                ip.set_hop_limit(64);
                ip.set_src_addr(&src);
                ip.set_dst_addr(&dst);
            }
        }
    }

    /// The transport header and its checksum over the payload already written.
    fn write_l4(&self, l4: &mut [u8], seq: u64) {
        match self.l4 {
            L4Kind::Udp => {
                let udp_len = l4.len() as u16;
                UdpRepr {
                    src_port: self.src_port,
                    dst_port: self.dst_port,
                    payload_len: udp_len - UdpPacket::<&[u8]>::HEADER_LEN as u16,
                }
                .emit(&mut UdpPacket::new_unchecked(&mut *l4));
                let pseudo = match self.ip {
                    IpPair::V4(src, dst) => {
                        checksum::pseudo_header_v4(src, dst, IpProtocol::UDP.0, udp_len)
                    }
                    IpPair::V6(src, dst) => checksum::pseudo_header_v6(
                        &src,
                        &dst,
                        IpProtocol::UDP.0,
                        u32::from(udp_len),
                    ),
                };
                let sum = filler::udp_checksum(l4, pseudo, seq);
                UdpPacket::new_unchecked(&mut *l4).set_checksum(sum);
            }
            L4Kind::TcpSyn => {
                let mut tcp = TcpPacket::new_unchecked(&mut *l4);
                tcp.set_src_port(self.src_port);
                tcp.set_dst_port(self.dst_port);
                tcp.set_seq_number(seq as u32);
                tcp.set_ack_number(0);
                tcp.set_header_len(TcpPacket::<&[u8]>::MIN_HEADER_LEN);
                tcp.set_flags(flags::SYN);
                tcp.set_window_len(SYN_WINDOW);
                tcp.set_urgent_at(0);
                match self.ip {
                    IpPair::V4(src, dst) => tcp.fill_checksum_v4(src, dst),
                    IpPair::V6(src, dst) => tcp.fill_checksum_v6(&src, &dst),
                }
            }
            L4Kind::IcmpEcho => {
                let mut icmp = Icmpv4Packet::new_unchecked(&mut *l4);
                icmp.set_code(0);
                icmp.set_echo_ident(self.src_port);
                icmp.set_echo_seq_no(seq as u16);
                match self.ip {
                    IpPair::V4(..) => {
                        icmp.set_msg_type(crate::icmp::message_type::ECHO_REQUEST);
                        icmp.fill_checksum();
                    }
                    IpPair::V6(src, dst) => {
                        icmp.set_msg_type(ICMPV6_ECHO_REQUEST);
                        icmp.set_checksum(0);
                        let len = l4.len() as u32;
                        let pseudo =
                            checksum::pseudo_header_v6(&src, &dst, IpProtocol::ICMPV6.0, len);
                        let sum = checksum::combine(&[pseudo, checksum::data(l4)]);
                        l4[2..4].copy_from_slice(&(!sum).to_be_bytes());
                    }
                }
            }
        }
    }
}
