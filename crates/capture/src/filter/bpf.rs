//! A classic BPF interpreter (the language libpcap compiles tcpdump expressions into).
//!
//! A program is checked once when it is built, like the kernel's `bpf_check_classic` and
//! libpcap's `bpf_validate`: known opcodes only, jumps inside the program, scratch memory
//! indexes below 16, no division by a constant zero, a return at the end. Jumps go forward,
//! except `ja` with a negative offset, which libpcap's own interpreter allows and its
//! `protochain` loops use; a run takes at most `MAX_BACK_JUMPS` of those, so every run ends.
//! At run time a load past the captured bytes, or a division by X = 0, rejects the packet
//! (returns 0), as both the kernel and libpcap do: never a panic.
//!
//! Loads at the kernel's ancillary offsets (`SKF_AD_OFF`) read packet metadata instead of
//! bytes: libpcap emits them for `inbound`, `outbound` and `ifindex`, and for `vlan` in a
//! live capture's program. The packet type, interface and VLAN tag come with each run
//! (`Metadata`); without them such a load rejects the packet.

use std::fmt;

/// One instruction, as the kernel's `struct sock_filter` and libpcap's `struct bpf_insn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl Insn {
    pub const fn new(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
        Insn { code, jt, jf, k }
    }
}

/// The longest program the kernel accepts (BPF_MAXINSNS).
pub const MAX_INSNS: usize = 4096;
/// Scratch memory words (BPF_MEMWORDS).
const MEM_WORDS: usize = 16;

/// Backward jumps a run may take before the packet is rejected: a `protochain` loop takes one
/// per header it skips, and a header is at least 8 bytes.
const MAX_BACK_JUMPS: u32 = 65_536;

/// The kernel's ancillary data area (`SKF_AD_OFF`, linux/filter.h) and the fields libpcap
/// reads there.
const SKF_AD_OFF: u32 = 0xffff_f000;
const SKF_AD_PKTTYPE: u32 = 4;
const SKF_AD_IFINDEX: u32 = 8;
const SKF_AD_VLAN_TAG: u32 = 44;
const SKF_AD_VLAN_TAG_PRESENT: u32 = 48;
const SKF_AD_VLAN_TPID: u32 = 60;

/// What a socket filter can read about a packet besides its bytes: its type (`PACKET_HOST`
/// 0 ... `PACKET_OUTGOING` 4, linux/if_packet.h), the index of the interface it came
/// through, and the 802.1Q tag the kernel took out of its bytes (TPID, TCI), which libpcap's
/// live programs read for `vlan`. A capture file keeps none of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metadata {
    pub pkttype: u32,
    pub ifindex: u32,
    pub vlan: Option<(u16, u16)>,
}

/// `Metadata::pkttype` of a packet the interface sent (libpcap's `outbound`).
pub const PACKET_OUTGOING: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetaField {
    PktType,
    IfIndex,
    VlanTag,
    VlanTagPresent,
    VlanTpid,
    /// Another ancillary field (none libpcap emits for a capture file's link type).
    Other,
}

/// Why a program was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BpfError {
    pub at: usize,
    pub reason: &'static str,
}

impl fmt::Display for BpfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid BPF program at instruction {}: {}",
            self.at, self.reason
        )
    }
}

impl std::error::Error for BpfError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    Word,
    Half,
    Byte,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    K(u32),
    X,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    Or,
    And,
    Lsh,
    Rsh,
    Mod,
    Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cond {
    Eq,
    Gt,
    Ge,
    Set,
}

/// A decoded instruction: decoding once keeps the run loop to one match per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    LdAbs(Size, u32),
    LdInd(Size, u32),
    LdImm(u32),
    LdLen,
    LdMem(usize),
    LdxImm(u32),
    LdxLen,
    LdxMem(usize),
    LdxMsh(u32),
    St(usize),
    Stx(usize),
    Alu(AluOp, Src),
    Neg,
    Ja(usize),
    JaBack(usize),
    LdMeta(MetaField),
    Jump(Cond, Src, usize, usize),
    RetK(u32),
    RetA,
    RetX,
    Tax,
    Txa,
}

/// A checked program, ready to run.
#[derive(Debug, Clone)]
pub struct Program {
    ops: Box<[Op]>,
    insns: Box<[Insn]>,
    reads_metadata: bool,
}

impl Program {
    /// Checks and decodes `insns`.
    pub fn new(insns: &[Insn]) -> Result<Program, BpfError> {
        if insns.is_empty() || insns.len() > MAX_INSNS {
            return Err(BpfError {
                at: 0,
                reason: "a program has 1 to 4096 instructions",
            });
        }
        let ops = insns
            .iter()
            .enumerate()
            .map(|(pc, insn)| decode(pc, insn, insns.len()))
            .collect::<Result<Box<[Op]>, BpfError>>()?;
        if !matches!(ops[ops.len() - 1], Op::RetK(_) | Op::RetA | Op::RetX) {
            return Err(BpfError {
                at: ops.len() - 1,
                reason: "the last instruction must return",
            });
        }
        let reads_metadata = ops.iter().any(|op| matches!(op, Op::LdMeta(_)));
        Ok(Program {
            ops,
            insns: insns.into(),
            reads_metadata,
        })
    }

    /// True when the program reads packet metadata (`Metadata`), not only bytes.
    pub fn reads_metadata(&self) -> bool {
        self.reads_metadata
    }

    /// The instructions as given (for attaching the same program to a socket).
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Runs the program over the captured bytes of a packet `wire_len` bytes long on the wire;
    /// returns how many bytes to keep, 0 to reject.
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        self.run_with(packet, wire_len, None)
    }

    /// `run`, with the packet's metadata when it is known.
    pub fn run_with(&self, packet: &[u8], wire_len: u32, meta: Option<Metadata>) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; MEM_WORDS];
        let mut pc = 0;
        let mut back_jumps = 0u32;
        loop {
            // The checks in `new` keep pc inside the program; `get` keeps that a rejection.
            let Some(&op) = self.ops.get(pc) else {
                return 0;
            };
            pc += 1;
            match op {
                Op::LdAbs(size, k) => match load(packet, size, Some(k)) {
                    Some(v) => a = v,
                    None => return 0,
                },
                Op::LdInd(size, k) => match load(packet, size, k.checked_add(x)) {
                    Some(v) => a = v,
                    None => return 0,
                },
                Op::LdImm(k) => a = k,
                Op::LdLen => a = wire_len,
                Op::LdMem(i) => a = mem[i],
                Op::LdxImm(k) => x = k,
                Op::LdxLen => x = wire_len,
                Op::LdxMem(i) => x = mem[i],
                Op::LdxMsh(k) => match packet.get(k as usize) {
                    Some(&b) => x = u32::from(b & 0xf) << 2,
                    None => return 0,
                },
                Op::St(i) => mem[i] = a,
                Op::Stx(i) => mem[i] = x,
                Op::Alu(alu, src) => {
                    let v = match src {
                        Src::K(k) => k,
                        Src::X => x,
                    };
                    match alu_op(alu, a, v) {
                        Some(r) => a = r,
                        None => return 0,
                    }
                }
                Op::Neg => a = a.wrapping_neg(),
                Op::Ja(off) => pc += off,
                Op::JaBack(back) => {
                    back_jumps += 1;
                    if back_jumps > MAX_BACK_JUMPS {
                        return 0;
                    }
                    pc -= back;
                }
                Op::LdMeta(field) => match (meta, field) {
                    (Some(m), MetaField::PktType) => a = m.pkttype,
                    (Some(m), MetaField::IfIndex) => a = m.ifindex,
                    (Some(m), MetaField::VlanTag) => a = m.vlan.map_or(0, |(_, tci)| tci.into()),
                    (Some(m), MetaField::VlanTagPresent) => a = u32::from(m.vlan.is_some()),
                    (Some(m), MetaField::VlanTpid) => a = m.vlan.map_or(0, |(t, _)| t.into()),
                    _ => return 0,
                },
                Op::Jump(cond, src, jt, jf) => {
                    let v = match src {
                        Src::K(k) => k,
                        Src::X => x,
                    };
                    let taken = match cond {
                        Cond::Eq => a == v,
                        Cond::Gt => a > v,
                        Cond::Ge => a >= v,
                        Cond::Set => a & v != 0,
                    };
                    pc += if taken { jt } else { jf };
                }
                Op::RetK(k) => return k,
                Op::RetA => return a,
                Op::RetX => return x,
                Op::Tax => x = a,
                Op::Txa => a = x,
            }
        }
    }
}

/// A big-endian load of `size` at `at`, if the captured bytes hold it.
#[inline]
fn load(packet: &[u8], size: Size, at: Option<u32>) -> Option<u32> {
    let at = at? as usize;
    match size {
        Size::Byte => packet.get(at).map(|&b| u32::from(b)),
        Size::Half => {
            let b = packet.get(at..at.checked_add(2)?)?;
            Some(u32::from(u16::from_be_bytes([b[0], b[1]])))
        }
        Size::Word => {
            let b = packet.get(at..at.checked_add(4)?)?;
            Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        }
    }
}

/// None for a division or remainder by zero (the packet is rejected).
#[inline]
fn alu_op(op: AluOp, a: u32, v: u32) -> Option<u32> {
    Some(match op {
        AluOp::Add => a.wrapping_add(v),
        AluOp::Sub => a.wrapping_sub(v),
        AluOp::Mul => a.wrapping_mul(v),
        AluOp::Div => a.checked_div(v)?,
        AluOp::Mod => a.checked_rem(v)?,
        AluOp::Or => a | v,
        AluOp::And => a & v,
        AluOp::Xor => a ^ v,
        // libpcap: a shift by 32 or more gives 0 (C leaves it undefined).
        AluOp::Lsh => a.checked_shl(v).unwrap_or(0),
        AluOp::Rsh => a.checked_shr(v).unwrap_or(0),
    })
}

// Instruction classes and fields (linux/filter.h, pcap/bpf.h).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const MISC: u16 = 0x07;

fn decode(pc: usize, insn: &Insn, len: usize) -> Result<Op, BpfError> {
    let bad = |reason| BpfError { at: pc, reason };
    let code = insn.code;
    if code > 0xff {
        return Err(bad("unknown instruction"));
    }
    let k = insn.k;
    let mem = |k: u32| match (k as usize) < MEM_WORDS {
        true => Ok(k as usize),
        false => Err(bad("scratch memory index out of range")),
    };
    let size = match code & 0x18 {
        0x00 => Some(Size::Word),
        0x08 => Some(Size::Half),
        0x10 => Some(Size::Byte),
        _ => None,
    };
    let src = match code & 0x08 {
        0 => Src::K(k),
        _ => Src::X,
    };
    // A jump lands after this instruction plus its offset, which must be in the program.
    let target = |off: u32| {
        let off = off as usize;
        match pc + 1 + off < len {
            true => Ok(off),
            false => Err(bad("jump out of the program")),
        }
    };
    let op = match code & 0x07 {
        LD => match (code & 0xe0, size) {
            (0x00, Some(Size::Word)) => Op::LdImm(k),
            (0x20, Some(_)) if k >= SKF_AD_OFF => Op::LdMeta(match k - SKF_AD_OFF {
                SKF_AD_PKTTYPE => MetaField::PktType,
                SKF_AD_IFINDEX => MetaField::IfIndex,
                SKF_AD_VLAN_TAG => MetaField::VlanTag,
                SKF_AD_VLAN_TAG_PRESENT => MetaField::VlanTagPresent,
                SKF_AD_VLAN_TPID => MetaField::VlanTpid,
                _ => MetaField::Other,
            }),
            (0x20, Some(s)) => Op::LdAbs(s, k),
            (0x40, Some(s)) => Op::LdInd(s, k),
            (0x60, Some(Size::Word)) => Op::LdMem(mem(k)?),
            (0x80, Some(Size::Word)) => Op::LdLen,
            _ => return Err(bad("unknown load")),
        },
        LDX => match code & 0xf8 {
            0x00 => Op::LdxImm(k),
            0x60 => Op::LdxMem(mem(k)?),
            0x80 => Op::LdxLen,
            0xb0 => Op::LdxMsh(k),
            _ => return Err(bad("unknown load into X")),
        },
        ST if code == ST => Op::St(mem(k)?),
        STX if code == STX => Op::Stx(mem(k)?),
        ALU => {
            let alu = match code & 0xf0 {
                0x00 => AluOp::Add,
                0x10 => AluOp::Sub,
                0x20 => AluOp::Mul,
                0x30 => AluOp::Div,
                0x40 => AluOp::Or,
                0x50 => AluOp::And,
                0x60 => AluOp::Lsh,
                0x70 => AluOp::Rsh,
                0x80 if code == ALU | 0x80 => return Ok(Op::Neg),
                0x90 => AluOp::Mod,
                0xa0 => AluOp::Xor,
                _ => return Err(bad("unknown arithmetic")),
            };
            if code & !0xf8 != ALU {
                return Err(bad("unknown arithmetic"));
            }
            match (alu, src) {
                (AluOp::Div | AluOp::Mod, Src::K(0)) => return Err(bad("division by zero")),
                (AluOp::Lsh | AluOp::Rsh, Src::K(k)) if k >= 32 => {
                    return Err(bad("shift by 32 or more"));
                }
                _ => Op::Alu(alu, src),
            }
        }
        JMP => {
            if code & !0xf8 != JMP {
                return Err(bad("unknown jump"));
            }
            let cond = match code & 0xf0 {
                // libpcap's interpreter reads `ja`'s offset as signed (protochain).
                0x00 if code == JMP && (k as i32) < 0 => {
                    let back = (k as i32).unsigned_abs() as usize;
                    return match back <= pc + 1 {
                        true => Ok(Op::JaBack(back)),
                        false => Err(bad("jump out of the program")),
                    };
                }
                0x00 if code == JMP => return Ok(Op::Ja(target(k)?)),
                0x10 => Cond::Eq,
                0x20 => Cond::Gt,
                0x30 => Cond::Ge,
                0x40 => Cond::Set,
                _ => return Err(bad("unknown jump")),
            };
            Op::Jump(cond, src, target(insn.jt.into())?, target(insn.jf.into())?)
        }
        RET => match code {
            0x06 => Op::RetK(k),
            0x16 => Op::RetA,
            0x0e => Op::RetX,
            _ => return Err(bad("unknown return")),
        },
        MISC => match code {
            0x07 => Op::Tax,
            0x87 => Op::Txa,
            _ => return Err(bad("unknown misc instruction")),
        },
        _ => return Err(bad("unknown instruction")),
    };
    Ok(op)
}

#[cfg(test)]
mod tests;
