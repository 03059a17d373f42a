//! UMEM headroom: the kernel puts a received packet after its own headroom
//! (XDP_PACKET_HEADROOM, in copy mode) and ours, and the largest packet shrinks by both.
//! Needs root; fails with the reason otherwise.

mod common;

use std::time::{Duration, Instant};

use common::{MAC_A, MAC_B, Netns};
use wirespeed_port::{Batch, PortOptions, PortSpec};

#[test]
fn received_packets_start_after_the_headroom() {
    let ns = Netns::enter("received_packets_start_after_the_headroom");
    let (frame_size, headroom) = (2048u32, 512u32);
    let receiver: PortSpec = format!("xdp:{}", ns.b).parse().unwrap();
    let mut rx = wirespeed_port::open(
        &receiver,
        &PortOptions {
            frame_size,
            headroom,
            tx: false,
            ..PortOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("open {receiver}: {e}"));
    assert_eq!(rx.max_packet_len(), frame_size - 256 - headroom);

    let sender: PortSpec = format!("xdp:{}", ns.a).parse().unwrap();
    let mut tx = wirespeed_port::open(
        &sender,
        &PortOptions {
            rx: false,
            ..PortOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("open {sender}: {e}"));
    let mut frame: Vec<u8> = (0..100u8).collect();
    frame[..6].copy_from_slice(&MAC_B);
    frame[6..12].copy_from_slice(&MAC_A);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType
    let mut out = Batch::with_capacity(1);
    assert_eq!(tx.alloc_tx(&mut out, 1, frame.len() as u32), 1);
    tx.packet_mut(out.addr(0), frame.len() as u32)
        .copy_from_slice(&frame);
    assert_eq!(tx.tx_burst(&mut out).unwrap(), 1);
    tx.flush().unwrap();

    let mut got = Batch::with_capacity(64);
    let until = Instant::now() + Duration::from_secs(2);
    while got.is_empty() && Instant::now() < until {
        rx.rx_burst(&mut got).unwrap();
        if got.is_empty() {
            rx.wait_rx(Duration::from_millis(10)).unwrap();
        }
    }
    assert_eq!(got.len(), 1, "one packet");
    let (addr, len) = (got.addr(0), got.frame_len(0));
    assert_eq!(len, frame.len() as u32);
    assert_eq!(
        addr % frame_size as u64,
        (256 + headroom) as u64,
        "the packet starts after the kernel's headroom and ours"
    );
    assert_eq!(rx.packet(addr, len), &frame[..]);
    rx.release(&mut got);
}
