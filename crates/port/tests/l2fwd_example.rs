//! The l2fwd example forwards: 1,000 frames sent to it over a veth pair come back, each once,
//! with its MAC addresses swapped and every other byte intact, and it counts them on Ctrl-C.
//! Needs root; fails with the reason otherwise.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{MAC_A, MAC_B, Netns};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use wirespeed_port::{Batch, PortOptions, PortSpec};

const FRAMES: u32 = 1000;

/// Frame `seq`: 60..=1514 bytes of experimental ethertype, its number, a payload from it.
fn frame(seq: u32, src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60 + (seq as usize * 37) % 1455];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f.iter_mut().enumerate().skip(18) {
        *b = (seq as usize * 7 + i) as u8;
    }
    f
}

#[test]
fn l2fwd_sends_every_frame_back_with_its_macs_swapped() {
    let ns = Netns::enter("l2fwd_sends_every_frame_back_with_its_macs_swapped");
    // Cargo builds the examples next to the test binaries (target/*/examples).
    let exe = std::env::current_exe().unwrap();
    let example = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/l2fwd");
    // Spawned from this thread: the child starts in the test's namespace.
    let mut fwd = Command::new(&example)
        .arg(&ns.b)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", example.display()));
    let mut out = BufReader::new(fwd.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    assert!(ready.contains("Ctrl-C ends"), "{ready}");

    let (sent, back, wrong) = send_and_take_back(&ns.a);
    kill(Pid::from_raw(fwd.id() as i32), Signal::SIGINT).unwrap();
    let status = fwd.wait().unwrap();
    let mut summary = String::new();
    out.read_to_string(&mut summary).unwrap();

    assert_eq!(sent, FRAMES);
    assert_eq!(wrong, 0, "frames that came back changed");
    assert!(
        back.iter().all(|&n| n == 1),
        "each frame back once: {back:?}"
    );
    assert!(status.success(), "{status}");
    assert!(
        summary.contains("forwarded 1000 packets (received 1000, dropped 0)"),
        "{summary}"
    );
}

/// Sends FRAMES frames out of `iface` one at a time while taking back what returns; returns
/// how many were sent, how many times each came back as expected, and how many came back
/// wrong.
fn send_and_take_back(iface: &str) -> (u32, Vec<u32>, u32) {
    let spec: PortSpec = format!("packet:{iface}").parse().unwrap();
    let mut port = wirespeed_port::open(&spec, &PortOptions::default()).unwrap();
    let mut batch = Batch::with_capacity(64);
    let (mut sent, mut back, mut wrong) = (0u32, vec![0u32; FRAMES as usize], 0u32);
    let deadline = Instant::now() + Duration::from_secs(10);
    while back.iter().sum::<u32>() + wrong < FRAMES && Instant::now() < deadline {
        if sent < FRAMES {
            let f = frame(sent, MAC_A, MAC_B);
            if port.alloc_tx(&mut batch, 1, f.len() as u32) == 1 {
                port.packet_mut(batch.addr(0), f.len() as u32)
                    .copy_from_slice(&f);
                sent += port.tx_burst(&mut batch).unwrap() as u32;
            }
        }
        port.flush().unwrap();
        port.rx_burst(&mut batch).unwrap();
        for (addr, len) in batch.iter() {
            let got = port.packet(addr, len);
            let seq = got
                .get(14..18)
                .map_or(u32::MAX, |s| u32::from_be_bytes(s.try_into().unwrap()));
            match seq < FRAMES && got == frame(seq, MAC_B, MAC_A) {
                true => back[seq as usize] += 1,
                false => wrong += 1,
            }
        }
        port.release(&mut batch);
    }
    (sent, back, wrong)
}
