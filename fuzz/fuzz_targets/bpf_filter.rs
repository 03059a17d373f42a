//! The classic BPF interpreter that runs capture filters (`capture`, `pcap-run`) on packets
//! off the wire: any program the checker takes, on any packet and metadata, returns a
//! length, never a panic (loads past the packet reject it, as the kernel's do).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_capture::filter::{Insn, Metadata, Program};

fuzz_target!(|input: &[u8]| {
    // The first byte: how many 8-byte instructions follow; then the packet.
    let Some((&count, rest)) = input.split_first() else {
        return;
    };
    let n = (usize::from(count) % 32 + 1).min(rest.len() / 8);
    let (code, packet) = rest.split_at(n * 8);
    let insns: Vec<Insn> = code
        .chunks_exact(8)
        .map(|b| {
            Insn::new(
                u16::from_le_bytes([b[0], b[1]]),
                b[2],
                b[3],
                u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            )
        })
        .collect();
    let Ok(program) = Program::new(&insns) else {
        return;
    };
    let wire_len = packet.len() as u32 + u32::from(count);
    let meta = Metadata {
        pkttype: u32::from(count & 7),
        ifindex: u32::from(count),
        vlan: (count & 8 != 0).then_some((0x8100, u16::from(count))),
    };
    let _ = program.run(packet, wire_len);
    let _ = program.run_with(packet, wire_len, Some(meta));
});
