//! Zero-allocation header views and builders over packet buffers (the `packet` layer).
//!
//! One protocol a module, in the style of smoltcp's `wire`: a view `Xxx<T: AsRef<[u8]>>` whose
//! `new_checked()` validates lengths once so every accessor after it is infallible, and setters
//! when `T: AsMut<[u8]>`; for Ethernet, VLAN, IPv4 and UDP an owned `Repr` with `parse()` from
//! a checked view and `emit()` into a mutable one, which the frame builders use. Parsing is total: truncated or lying headers are an `Err`, never a panic.
#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod error;
pub mod ethernet;
pub mod filler;
pub mod flow_key;
pub mod frame_builder;
pub mod frame_reader;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod partial_checksum;
pub mod tcp;
pub mod template;
pub mod udp;
pub mod vlan;

pub use arp::ArpPacket;
pub use error::{BuildError, ParseError};
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr, ParseMacError, swap_macs};
pub use frame_builder::{FrameSpec, IpPair, L4Kind};
pub use frame_reader::{ReadFrame, read_test_frame};
pub use icmp::Icmpv4Packet;
pub use ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
pub use ipv6::Ipv6Packet;
pub use tcp::TcpPacket;
pub use template::{
    DEFAULT_GENERATOR_ID, PAYLOAD_HEADER_LEN, PAYLOAD_MAGIC, TIMESTAMP_MASK, TestPayload,
    UdpTemplate, ipv4_udp_checksums_ok, read_test_payload,
};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanRepr, VlanTag};
