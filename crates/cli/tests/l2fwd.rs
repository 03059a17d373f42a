//! l2fwd: every packet comes back with its MAC addresses swapped and its payload intact,
//! as tcpdump on the sending side sees it.

mod common;
use common::scenarios::frames_come_back_swapped;

#[test]
fn xdp_l2fwd_swaps_macs_and_keeps_payload() {
    frames_come_back_swapped("xl", "xdp");
}

#[test]
fn packet_l2fwd_swaps_macs_and_keeps_payload() {
    frames_come_back_swapped("pl", "packet");
}
