//! AF_PACKET (TPACKET_V3) receive: 100,000 numbered packets sent by the AF_PACKET transmit
//! ring arrive once each with identical bytes, or are counted under a named drop.

mod common;
use common::scenarios::numbered_packets_arrive_once;

#[test]
fn packet_hundred_thousand_numbered_packets_arrive_once() {
    numbered_packets_arrive_once("pr", "packet", 100_000);
}
