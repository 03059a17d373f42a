//! AF_XDP receive: 100,000 numbered packets from one namespace; on the other side every
//! number arrives exactly once with identical bytes, or is counted under a named drop.

mod common;
use common::scenarios::numbered_packets_arrive_once;

#[test]
fn xdp_hundred_thousand_numbered_packets_arrive_once() {
    numbered_packets_arrive_once("xr", "xdp", 100_000);
}
