//! Interpreter tests: literal programs (as `tcpdump -d` prints them), malformed programs, and
//! random programs over random bytes that must never panic.

use super::*;
use proptest::prelude::*;

const RET_MATCH: u32 = 262144;

/// `tcpdump -d ip`
fn prog_ip() -> Vec<Insn> {
    vec![
        Insn::new(0x28, 0, 0, 12),
        Insn::new(0x15, 0, 1, 0x0800),
        Insn::new(0x06, 0, 0, RET_MATCH),
        Insn::new(0x06, 0, 0, 0),
    ]
}

/// `tcpdump -d 'tcp dst port 80'` restricted to IPv4: ldh [12]; jeq 0x800; ldb [23];
/// jeq 6; ldh [20]; jset 0x1fff; ldxb 4*([14]&0xf); ldh [x+16]; jeq 80; ret; ret 0.
fn prog_tcp_dst_80() -> Vec<Insn> {
    vec![
        Insn::new(0x28, 0, 0, 12),
        Insn::new(0x15, 0, 8, 0x0800),
        Insn::new(0x30, 0, 0, 23),
        Insn::new(0x15, 0, 6, 6),
        Insn::new(0x28, 0, 0, 20),
        Insn::new(0x45, 4, 0, 0x1fff),
        Insn::new(0xb1, 0, 0, 14),
        Insn::new(0x48, 0, 0, 16),
        Insn::new(0x15, 0, 1, 80),
        Insn::new(0x06, 0, 0, RET_MATCH),
        Insn::new(0x06, 0, 0, 0),
    ]
}

fn ipv4_tcp(dst_port: u16) -> Vec<u8> {
    let mut p = vec![0u8; 54];
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    p[14] = 0x45;
    p[23] = 6;
    p[36..38].copy_from_slice(&dst_port.to_be_bytes());
    p
}

#[test]
fn ip_matches_ipv4_only() {
    let prog = Program::new(&prog_ip()).unwrap();
    assert_eq!(prog.run(&ipv4_tcp(80), 54), RET_MATCH);
    let mut arp = vec![0u8; 42];
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(prog.run(&arp, 42), 0);
}

#[test]
fn indirect_loads_follow_the_ip_header_length() {
    let prog = Program::new(&prog_tcp_dst_80()).unwrap();
    assert_eq!(prog.run(&ipv4_tcp(80), 54), RET_MATCH);
    assert_eq!(prog.run(&ipv4_tcp(81), 54), 0);
    // IHL 6: the port moves 4 bytes further.
    let mut p = ipv4_tcp(0);
    p.extend_from_slice(&[0; 4]);
    p[14] = 0x46;
    p[40..42].copy_from_slice(&80u16.to_be_bytes());
    assert_eq!(prog.run(&p, 58), RET_MATCH);
}

#[test]
fn loads_past_the_captured_bytes_reject() {
    let prog = Program::new(&prog_tcp_dst_80()).unwrap();
    let p = ipv4_tcp(80);
    assert_eq!(prog.run(&p[..37], 54), 0);
    assert_eq!(prog.run(&[], 0), 0);
    // A huge IHL-derived offset cannot wrap around.
    let far = [
        Insn::new(0x01, 0, 0, u32::MAX),
        Insn::new(0x40, 0, 0, 2),
        Insn::new(0x06, 0, 0, 1),
    ];
    assert_eq!(Program::new(&far).unwrap().run(&p, 54), 0);
}

#[test]
fn len_is_the_wire_length() {
    // len > 100
    let prog = Program::new(&[
        Insn::new(0x80, 0, 0, 0),
        Insn::new(0x25, 0, 1, 100),
        Insn::new(0x06, 0, 0, RET_MATCH),
        Insn::new(0x06, 0, 0, 0),
    ])
    .unwrap();
    assert_eq!(prog.run(&[0; 60], 101), RET_MATCH);
    assert_eq!(prog.run(&[0; 200], 100), 0);
}

#[test]
fn arithmetic_scratch_memory_and_returns() {
    let prog = Program::new(&[
        Insn::new(0x00, 0, 0, 7),    // A = 7
        Insn::new(0x02, 0, 0, 3),    // M[3] = A
        Insn::new(0x24, 0, 0, 6),    // A *= 6
        Insn::new(0x07, 0, 0, 0),    // X = A (42)
        Insn::new(0x61, 0, 0, 3),    // X = M[3] (7)
        Insn::new(0x3c, 0, 0, 0),    // A /= X (6)
        Insn::new(0x94, 0, 0, 4),    // A %= 4 (2)
        Insn::new(0x64, 0, 0, 4),    // A <<= 4 (32)
        Insn::new(0xa4, 0, 0, 0xff), // A ^= 0xff (223)
        Insn::new(0x84, 0, 0, 0),    // A = -A
        Insn::new(0x84, 0, 0, 0),    // A = -A (223)
        Insn::new(0x16, 0, 0, 0),    // ret A
    ])
    .unwrap();
    assert_eq!(prog.run(&[], 0), 223);
}

#[test]
fn division_by_x_zero_rejects() {
    let prog = Program::new(&[
        Insn::new(0x00, 0, 0, 7),
        Insn::new(0x01, 0, 0, 0),
        Insn::new(0x3c, 0, 0, 0),
        Insn::new(0x06, 0, 0, 1),
    ])
    .unwrap();
    assert_eq!(prog.run(&[], 0), 0);
}

#[test]
fn shifts_by_x_of_32_or_more_give_zero() {
    let prog = Program::new(&[
        Insn::new(0x00, 0, 0, 1),
        Insn::new(0x01, 0, 0, 40),
        Insn::new(0x6c, 0, 0, 0),
        Insn::new(0x16, 0, 0, 0),
    ])
    .unwrap();
    assert_eq!(prog.run(&[], 0), 0);
}

#[test]
fn malformed_programs_are_refused() {
    let reason = |insns: &[Insn]| Program::new(insns).unwrap_err().reason;
    assert_eq!(reason(&[]), "a program has 1 to 4096 instructions");
    assert_eq!(
        reason(&[Insn::new(0x28, 0, 0, 12)]),
        "the last instruction must return"
    );
    assert_eq!(
        reason(&[Insn::new(0x15, 0, 5, 1), Insn::new(0x06, 0, 0, 0)]),
        "jump out of the program"
    );
    assert_eq!(
        reason(&[Insn::new(0x05, 0, 0, 1), Insn::new(0x06, 0, 0, 0)]),
        "jump out of the program"
    );
    // Backward, before the first instruction.
    assert_eq!(
        reason(&[
            Insn::new(0x05, 0, 0, -2i32 as u32),
            Insn::new(0x06, 0, 0, 0)
        ]),
        "jump out of the program"
    );
    assert_eq!(
        reason(&[Insn::new(0x34, 0, 0, 0), Insn::new(0x06, 0, 0, 0)]),
        "division by zero"
    );
    assert_eq!(
        reason(&[Insn::new(0x60, 0, 0, 16), Insn::new(0x06, 0, 0, 0)]),
        "scratch memory index out of range"
    );
    assert_eq!(
        reason(&[Insn::new(0x64, 0, 0, 32), Insn::new(0x06, 0, 0, 0)]),
        "shift by 32 or more"
    );
    assert_eq!(reason(&[Insn::new(0xffff, 0, 0, 0)]), "unknown instruction");
    assert_eq!(reason(&[Insn::new(0x38, 0, 0, 0)]), "unknown load");
    let long = vec![Insn::new(0x06, 0, 0, 0); MAX_INSNS + 1];
    assert!(Program::new(&long).is_err());
}

proptest! {
    #[test]
    fn random_programs_never_panic(
        raw in proptest::collection::vec((any::<u16>(), 0u8..8, 0u8..8, any::<u32>()), 1..40),
        packet in proptest::collection::vec(any::<u8>(), 0..80),
        wire_len in any::<u32>(),
    ) {
        let mut insns: Vec<Insn> = raw.iter().map(|&(c, jt, jf, k)| {
            // Mostly valid opcodes, with small constants so loads land in the packet.
            let code = [0x28, 0x30, 0x20, 0x48, 0x50, 0x40, 0x00, 0x80, 0x60, 0x01, 0xb1, 0x61,
                0x02, 0x03, 0x04, 0x0c, 0x14, 0x3c, 0x34, 0x9c, 0x6c, 0x7c, 0x84, 0x05, 0x15,
                0x1d, 0x25, 0x35, 0x45, 0x4d, 0x06, 0x16, 0x0e, 0x07, 0x87][c as usize % 35];
            Insn::new(if c % 97 == 0 { c } else { code }, jt, jf, if k % 3 == 0 { k } else { k % 90 })
        }).collect();
        insns.push(Insn::new(0x06, 0, 0, 1));
        if let Ok(prog) = Program::new(&insns) {
            let _ = prog.run(&packet, wire_len);
        }
    }
}

#[test]
fn backward_jumps_loop_and_every_run_ends() {
    // X = 0; loop: X += 1 (via A); if X == 5 return X; ja loop.
    let prog = Program::new(&[
        Insn::new(0x01, 0, 0, 0),            // X = 0
        Insn::new(0x87, 0, 0, 0),            // A = X
        Insn::new(0x04, 0, 0, 1),            // A += 1
        Insn::new(0x07, 0, 0, 0),            // X = A
        Insn::new(0x15, 1, 0, 5),            // if A == 5 skip the jump
        Insn::new(0x05, 0, 0, -5i32 as u32), // ja back to A = X
        Insn::new(0x0e, 0, 0, 0),            // ret X
    ])
    .unwrap();
    assert_eq!(prog.run(&[], 0), 5);
    // A loop that never ends is cut off: the packet is rejected.
    let forever = Program::new(&[
        Insn::new(0x00, 0, 0, 1),
        Insn::new(0x05, 0, 0, -1i32 as u32),
        Insn::new(0x06, 0, 0, 1),
    ])
    .unwrap();
    assert_eq!(forever.run(&[], 0), 0);
}

#[test]
fn metadata_loads_read_the_packet_type_and_interface() {
    // outbound (libpcap: ldh [SKF_AD_OFF + 4]; jeq #4), then ifindex 7.
    let prog = Program::new(&[
        Insn::new(0x28, 0, 0, 0xffff_f004),
        Insn::new(0x15, 0, 3, 4),
        Insn::new(0x20, 0, 0, 0xffff_f008),
        Insn::new(0x15, 0, 1, 7),
        Insn::new(0x06, 0, 0, RET_MATCH),
        Insn::new(0x06, 0, 0, 0),
    ])
    .unwrap();
    assert!(prog.reads_metadata());
    let meta = |pkttype, ifindex| {
        Some(Metadata {
            pkttype,
            ifindex,
            ..Metadata::default()
        })
    };
    assert_eq!(prog.run_with(&[0; 60], 60, meta(4, 7)), RET_MATCH);
    assert_eq!(prog.run_with(&[0; 60], 60, meta(0, 7)), 0);
    assert_eq!(prog.run_with(&[0; 60], 60, meta(4, 8)), 0);
    // Unknown metadata: rejected, as before.
    assert_eq!(prog.run(&[0; 60], 60), 0);
    let bytes_only = Program::new(&[Insn::new(0x06, 0, 0, 1)]).unwrap();
    assert!(!bytes_only.reads_metadata());
}

#[test]
fn metadata_loads_read_the_vlan_tag_the_kernel_took_out() {
    // libpcap's live `vlan 10`: ldb [vlan_avail]; jeq #1; ldh [vlan_tci]; and #0xfff;
    // jeq #10; then the TPID (ldh [SKF_AD_OFF + 60]) returned.
    let prog = Program::new(&[
        Insn::new(0x30, 0, 0, 0xffff_f030),
        Insn::new(0x15, 0, 5, 1),
        Insn::new(0x28, 0, 0, 0xffff_f02c),
        Insn::new(0x54, 0, 0, 0x0fff),
        Insn::new(0x15, 0, 2, 10),
        Insn::new(0x28, 0, 0, 0xffff_f03c),
        Insn::new(0x16, 0, 0, 0),
        Insn::new(0x06, 0, 0, 0),
    ])
    .unwrap();
    assert!(prog.reads_metadata());
    let tagged = |tpid, tci| {
        Some(Metadata {
            vlan: Some((tpid, tci)),
            ..Metadata::default()
        })
    };
    assert_eq!(prog.run_with(&[0; 60], 60, tagged(0x8100, 0x200a)), 0x8100);
    assert_eq!(prog.run_with(&[0; 60], 60, tagged(0x88a8, 10)), 0x88a8);
    assert_eq!(prog.run_with(&[0; 60], 60, tagged(0x8100, 11)), 0);
    // Untagged: not present.
    assert_eq!(prog.run_with(&[0; 60], 60, Some(Metadata::default())), 0);
}
