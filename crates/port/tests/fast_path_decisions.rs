//! The switch's fast path (bpf/switch_fast_path.c) run by the kernel on real packets: an
//! entry forwards its flow out of its port, and a stopped class, a stale generation or a
//! missing entry sends the packet up to the port's socket instead, while the entries of the
//! other classes go on forwarding. The offload's tests check user space's view of the maps
//! (`FastPath::forwards`); this one checks what the program does with a packet.
//!
//! One veth pair: the fast path on `a` (native mode, as `switch --offload` attaches it), with
//! an AF_XDP socket of its own on `a` for what it does not forward. Packets are sent from an
//! AF_XDP port on `b`; an entry forwards them out of `a` again, so they come back to `b`.
//! Needs root; fails with the reason otherwise.

mod common;

use std::time::{Duration, Instant};

use common::{MAC_A, MAC_B, Netns};
use wirespeed_port::xdp::{XdpGroup, if_index};
use wirespeed_port::{Batch, Port, PortOptions, PortSpec};
use wirespeed_xdp::fast_path::{Classes, FastKey, FastPathCounters, class_of, fast_key};
use wirespeed_xdp::{AttachMode, FastPath};

/// An IPv4 UDP frame from `b` to `a`, to UDP port `dst_port`.
fn udp_frame(dst_port: u16) -> Vec<u8> {
    let payload = 18;
    let ip_len = 20 + 8 + payload;
    let mut f = Vec::with_capacity(14 + ip_len);
    f.extend_from_slice(&MAC_A);
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 2]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 1]);
    let sum = ip
        .chunks(2)
        .fold(0u32, |s, w| s + u32::from(u16::from_be_bytes([w[0], w[1]])));
    let sum = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!((sum & 0xffff) + (sum >> 16)) as u16).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&dst_port.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]); // no UDP checksum
    f.extend((0..payload).map(|i| i as u8));
    f
}

/// Where the packets sent went: those `b` got back (forwarded by the kernel) and those the
/// socket on `a` got (sent up), each as the frames' UDP destination ports, in arrival order.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    forwarded: Vec<u16>,
    sent_up: Vec<u16>,
}

struct Rig {
    fast_path: FastPath,
    up: XdpGroup,
    b: Box<dyn Port>,
}

impl Rig {
    /// Sends one frame to each of `ports` from `b`, and collects where they went: waits
    /// until all have arrived somewhere, then a little longer for any extra.
    fn send(&mut self, ports: &[u16]) -> Outcome {
        let mut out = Batch::with_capacity(ports.len());
        let len = udp_frame(0).len() as u32;
        assert_eq!(self.b.alloc_tx(&mut out, ports.len(), len), ports.len());
        for (i, &port) in ports.iter().enumerate() {
            self.b
                .packet_mut(out.addr(i), len)
                .copy_from_slice(&udp_frame(port));
        }
        assert_eq!(self.b.tx_burst(&mut out).unwrap(), ports.len());
        self.b.flush().unwrap();

        let mut outcome = Outcome::default();
        let mut got = Batch::with_capacity(64);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut settle = None;
        loop {
            let now = Instant::now();
            let all = outcome.forwarded.len() + outcome.sent_up.len() >= ports.len();
            if all && settle.is_none() {
                settle = Some(now + Duration::from_millis(100));
            }
            if settle.is_some_and(|until| now >= until) || now >= deadline {
                break;
            }
            self.b.rx_burst(&mut got).unwrap();
            for i in 0..got.len() {
                outcome
                    .forwarded
                    .push(dst_port(self.b.packet(got.addr(i), got.frame_len(i))));
            }
            self.b.release(&mut got);
            self.up.rx_burst(0, &mut got).unwrap();
            for i in 0..got.len() {
                outcome
                    .sent_up
                    .push(dst_port(self.up.packet(got.addr(i), got.frame_len(i))));
            }
            self.up.release(&mut got);
            std::thread::sleep(Duration::from_millis(2));
        }
        outcome
    }

    fn counters(&self) -> FastPathCounters {
        self.fast_path.counters().unwrap()
    }
}

/// The UDP destination port of a frame built by [`udp_frame`] (0 for anything else).
fn dst_port(frame: &[u8]) -> u16 {
    if frame.len() == udp_frame(0).len() && frame[23] == 17 {
        u16::from_be_bytes([frame[36], frame[37]])
    } else {
        0
    }
}

fn outcome(forwarded: &[u16], sent_up: &[u16]) -> Outcome {
    Outcome {
        forwarded: forwarded.to_vec(),
        sent_up: sent_up.to_vec(),
    }
}

#[test]
fn the_program_forwards_only_valid_entries_of_running_classes() {
    let ns = Netns::enter("the_program_forwards_only_valid_entries_of_running_classes");
    let a = if_index(&ns.a).expect("veth a");
    let mut fast_path = FastPath::attach(&[ns.a.as_str()], AttachMode::Native, false, false)
        .unwrap_or_else(|e| panic!("attach the fast path to {}: {e}", ns.a));
    fast_path.add_port(0, a).unwrap();
    let spec_a: PortSpec = format!("xdp:{}", ns.a).parse().unwrap();
    let up = XdpGroup::open(
        &[spec_a],
        &PortOptions {
            program_attached: Some(AttachMode::Native),
            tx: false,
            ..PortOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("open a socket on {}: {e}", ns.a));
    fast_path.register(0, up.queue(0), up.socket_fd(0)).unwrap();
    let spec_b: PortSpec = format!("xdp:{}", ns.b).parse().unwrap();
    let b = wirespeed_port::open(&spec_b, &PortOptions::default())
        .unwrap_or_else(|e| panic!("open {spec_b}: {e}"));
    let mut rig = Rig { fast_path, up, b };

    // Two flows of different classes, and a third with no entry.
    let key = |port: u16| -> FastKey {
        fast_key(&udp_frame(port), a).expect("the fast path takes the frame")
    };
    let (p1, p2) = (
        1000u16,
        (1001..2000)
            .find(|&p| class_of(&key(p)) != class_of(&key(1000)))
            .unwrap(),
    );
    let p3 = 3000u16;
    for port in [p1, p2] {
        assert!(rig.fast_path.install(&key(port), 0).unwrap());
    }

    assert_eq!(rig.send(&[p1, p2, p3]), outcome(&[p1, p2], &[p3]));
    assert_eq!(rig.fast_path.counts(&key(p1)).unwrap().packets, 1);
    assert_eq!(rig.fast_path.counts(&key(p2)).unwrap().packets, 1);
    let c = rig.counters();
    assert_eq!((c.hits, c.misses, c.stale, c.blocked), (2, 1, 0, 0));

    // p1's class stopped: its packets go up uncounted; p2's are still forwarded.
    let first = Classes::of([&key(p1)]);
    rig.fast_path.suspend(first).unwrap();
    assert_eq!(rig.send(&[p1, p2]), outcome(&[p2], &[p1]));
    assert_eq!(rig.fast_path.counts(&key(p1)).unwrap().packets, 1);
    assert_eq!(rig.fast_path.counts(&key(p2)).unwrap().packets, 2);
    let c = rig.counters();
    assert_eq!((c.hits, c.misses, c.stale), (3, 2, 1));

    // Resumed, it forwards again.
    rig.fast_path.resume(first).unwrap();
    assert_eq!(rig.send(&[p1, p2]), outcome(&[p1, p2], &[]));
    assert_eq!(rig.fast_path.counts(&key(p1)).unwrap().packets, 2);

    // Every class stopped: nothing is forwarded.
    rig.fast_path.suspend(Classes::ALL).unwrap();
    assert_eq!(rig.send(&[p1, p2]), outcome(&[], &[p1, p2]));
    rig.fast_path.resume(Classes::ALL).unwrap();

    // A new generation makes both entries stale for good.
    rig.fast_path.invalidate_all().unwrap();
    assert_eq!(rig.send(&[p1, p2]), outcome(&[], &[p1, p2]));
    let c = rig.counters();
    assert_eq!((c.hits, c.misses, c.stale, c.blocked), (5, 6, 5, 0));
    assert_eq!(rig.fast_path.counts(&key(p1)).unwrap().packets, 2);
    assert_eq!(rig.fast_path.counts(&key(p2)).unwrap().packets, 3);
}
