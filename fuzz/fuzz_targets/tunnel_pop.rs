//! A frame off a tunnel's underlay, classified as the switch pops it: any bytes, taken as a
//! whole frame or as a chain of two, are a verdict and never a panic, and an inner frame it
//! finds lies inside the packet with its Ethernet header in the first frame. The inner
//! frame's UDP source port (what pushing it into another tunnel hashes) is read inside it
//! too.
#![no_main]

use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use wirespeed_switch::tunnel::TunnelKind;
use wirespeed_switch::tunnel::header::{Arrival, Listener, classify, source_port};

fuzz_target!(|input: &[u8]| {
    let Some((&cut, bytes)) = input.split_first() else {
        return;
    };
    // The first byte says where the first frame ends, in 2-byte steps (odd and even cuts
    // come from the byte's last bit); 0 is a single frame.
    let cut = match cut {
        0 => bytes.len(),
        n => (usize::from(n) * 2 - usize::from(n & 1)).min(bytes.len()),
    };
    let (frame, rest) = bytes.split_at(cut);
    let tail: &[&[u8]] = if rest.is_empty() { &[] } else { &[rest] };
    let local = Ipv4Addr::new(192, 0, 2, 1);
    let listeners = [
        (4789, TunnelKind::Vxlan),
        (6081, TunnelKind::Geneve),
        (0, TunnelKind::Gre),
    ]
    .map(|(dst_port, kind)| Listener {
        local,
        dst_port,
        kind,
    });
    let _ = source_port(frame);
    if let Arrival::Tunnel(_, _, popped) = classify(frame, tail, &listeners) {
        assert!(popped.inner_len >= 14, "{popped:?}");
        assert!(popped.inner_at + 14 <= frame.len(), "{popped:?}");
        assert!(popped.inner_at + popped.inner_len <= bytes.len(), "{popped:?}");
        let _ = source_port(&frame[popped.inner_at..]);
    }
});
