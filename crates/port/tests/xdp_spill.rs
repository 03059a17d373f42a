//! The spill ring: a receiver that does not look for a while (a stall) loses nothing when it
//! has one, and gets every packet back in the order sent; without one, its small fill and RX
//! rings overflow and the drops are counted. Needs root; fails with the reason otherwise.

mod common;

use std::time::{Duration, Instant};

use common::{MAC_A, MAC_B, Netns};
use wirespeed_port::{Batch, Port, PortOptions, PortSpec};

const SENT: u32 = 20_000;

/// Sends `count` frames from `tx`, each carrying its sequence number and a length that
/// varies with it (60 to 1059 bytes), in bursts the veth takes whole.
fn send_numbered(tx: &mut dyn Port, count: u32) {
    let mut out = Batch::with_capacity(32);
    let mut seq = 0u32;
    let until = Instant::now() + Duration::from_secs(20);
    while seq < count {
        assert!(Instant::now() < until, "sent only {seq} of {count}");
        let n = tx.alloc_tx(&mut out, (count - seq).min(32) as usize, 2048);
        for i in 0..n {
            let s = seq + i as u32;
            let frame = numbered_frame(s);
            out.set_len(i, frame.len() as u32);
            tx.packet_mut(out.addr(i), frame.len() as u32)
                .copy_from_slice(&frame);
        }
        seq += tx.tx_burst(&mut out).unwrap() as u32;
        tx.flush().unwrap();
        while tx.tx_pending() {
            tx.flush().unwrap();
        }
    }
}

fn numbered_frame(seq: u32) -> Vec<u8> {
    let len = 60 + (seq as usize * 7) % 1000;
    let mut frame: Vec<u8> = (0..len).map(|i| (i as u32 ^ seq) as u8).collect();
    frame[..6].copy_from_slice(&MAC_B);
    frame[6..12].copy_from_slice(&MAC_A);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType
    frame[14..18].copy_from_slice(&seq.to_be_bytes());
    frame
}

/// Receives until `want` packets came or nothing came for a while; checks each against the
/// frame of the next sequence number, so a reordered, duplicated or damaged packet fails.
fn receive_in_order(rx: &mut dyn Port, want: u32) -> u32 {
    let mut got = Batch::with_capacity(64);
    let mut next = 0u32;
    let mut idle_since = Instant::now();
    while next < want && idle_since.elapsed() < Duration::from_secs(1) {
        rx.rx_burst(&mut got).unwrap();
        if got.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        idle_since = Instant::now();
        for i in 0..got.len() {
            let packet = rx.packet(got.addr(i), got.frame_len(i));
            let seq = u32::from_be_bytes(packet[14..18].try_into().unwrap());
            assert_eq!(seq, next, "packet {next} is out of order (got {seq})");
            assert_eq!(packet, &numbered_frame(seq)[..], "packet {seq}'s bytes");
            next += 1;
        }
        rx.release(&mut got);
    }
    next
}

fn open_pair(ns: &Netns, spill_bytes: u32) -> (Box<dyn Port>, Box<dyn Port>) {
    let receiver: PortSpec = format!("xdp:{}", ns.b).parse().unwrap();
    let rx = wirespeed_port::open(
        &receiver,
        &PortOptions {
            frame_count: 1024,
            frame_size: 2048,
            ring_size: 256,
            tx: false,
            spill_bytes,
            ..PortOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("open {receiver}: {e}"));
    let sender: PortSpec = format!("xdp:{}", ns.a).parse().unwrap();
    let tx = wirespeed_port::open(
        &sender,
        &PortOptions {
            rx: false,
            ..PortOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("open {sender}: {e}"));
    (rx, tx)
}

#[test]
fn a_stalled_receiver_gets_every_packet_back_in_order_from_the_spill_ring() {
    let ns = Netns::enter("a_stalled_receiver_gets_every_packet_back_in_order_from_the_spill_ring");
    let (mut rx, mut tx) = open_pair(&ns, 32 << 20);
    // The receiver does not look while all of them are sent: 20,000 packets against 512
    // frames in its fill ring and a 256-entry RX ring.
    send_numbered(&mut *tx, SENT);
    let received = receive_in_order(&mut *rx, SENT);
    let stats = rx.stats();
    assert_eq!(received, SENT, "{stats:?}");
    assert_eq!(stats.rx_packets, SENT as u64);
    assert_eq!(stats.drops.total(), 0, "{:?}", stats.drops);
    // All but what the rings held came through the spill ring.
    assert!(
        stats.spilled >= (SENT - 512) as u64,
        "spilled {} of {SENT}",
        stats.spilled
    );
    let audit = rx.audit().unwrap();
    assert!(audit.balanced(), "{audit:?}");
    assert_eq!(audit.application, 0, "{audit:?}");

    // And the receiver that keeps up again takes the next packets from its RX ring.
    let before = stats.spilled;
    send_numbered(&mut *tx, 100);
    assert_eq!(receive_in_order(&mut *rx, 100), 100);
    assert_eq!(
        rx.stats().spilled,
        before,
        "nothing spilled while keeping up"
    );
}

#[test]
fn without_a_spill_ring_a_stalled_receiver_counts_what_it_lost() {
    let ns = Netns::enter("without_a_spill_ring_a_stalled_receiver_counts_what_it_lost");
    let (mut rx, mut tx) = open_pair(&ns, 0);
    send_numbered(&mut *tx, SENT);
    let received = receive_in_order(&mut *rx, SENT);
    let stats = rx.stats();
    assert!(received < SENT, "{received}");
    assert_eq!(stats.spilled, 0);
    assert_eq!(
        received as u64 + stats.drops.fill_ring_empty + stats.drops.rx_ring_full,
        SENT as u64,
        "{:?}",
        stats.drops
    );
}
