//! `NXAST_LEARN` on the wire, as Open vSwitch's `nx_action_learn` lays it out: after the
//! experimenter header, the learned rule's timeouts, priority, cookie, flags and table, then
//! its specs, each a 16-bit header (where the bits come from, where they go, how many), the
//! source (a field's NXM header and offset, or the value in whole 16-bit words) and the
//! destination (a field's header and offset; none for an output), zeros to the end.

use crate::action::Action;
use crate::learn::{Learn, LearnId, LearnSource, LearnSpec, SEND_FLOW_REM};
use crate::openflow::error::{OfpError, bad_action};
use crate::openflow::wire::{Reader, Writer};
use crate::subfield::{Nxm, Subfield};

pub const NXAST_LEARN: u16 = 16;

/// A spec header's bits: the source is a value, not a field...
const SRC_IMMEDIATE: u16 = 1 << 13;
/// ...the destination is a load, or an output (else a match)...
const DST_LOAD: u16 = 1 << 11;
const DST_OUTPUT: u16 = 2 << 11;
const DST_MASK: u16 = 3 << 11;
/// ...and the width.
const N_BITS_MASK: u16 = 0x3ff;
/// The spec header bits Open vSwitch defines.
const KNOWN_BITS: u16 = SRC_IMMEDIATE | DST_MASK | N_BITS_MASK;

/// Reads a learn after its experimenter header and subtype. Open vSwitch's `fin_*` timeouts
/// and `delete_learned` are refused (BAD_ARGUMENT), as is a spec this switch cannot learn.
pub fn read_learn(body: &mut Reader<'_>) -> Result<Action, OfpError> {
    let idle_timeout = body.u16()?;
    let hard_timeout = body.u16()?;
    let priority = body.u16()?;
    let cookie = body.u64()?;
    let flags = body.u16()?;
    let table = body.u8()?;
    let _pad = body.u8()?;
    let (fin_idle, fin_hard) = (body.u16()?, body.u16()?);
    if flags & !SEND_FLOW_REM != 0 || fin_idle != 0 || fin_hard != 0 {
        return Err(bad_action::BAD_ARGUMENT);
    }
    let mut learn = Learn {
        table,
        priority,
        idle_timeout,
        hard_timeout,
        cookie,
        send_flow_rem: flags & SEND_FLOW_REM != 0,
        specs: Vec::new(),
    };
    while body.remaining() >= 2 {
        let header = body.u16()?;
        if header == 0 {
            break;
        }
        learn.specs.push(read_spec(body, header)?);
    }
    if body.rest().iter().any(|&b| b != 0) {
        return Err(bad_action::BAD_ARGUMENT);
    }
    LearnId::keep(learn)
        .map(Action::Learn)
        .map_err(|_| bad_action::BAD_ARGUMENT)
}

fn read_spec(body: &mut Reader<'_>, header: u16) -> Result<LearnSpec, OfpError> {
    let n_bits = u32::from(header & N_BITS_MASK);
    if header & !KNOWN_BITS != 0 || n_bits == 0 {
        return Err(bad_action::BAD_ARGUMENT);
    }
    let field = |body: &mut Reader<'_>| -> Result<Subfield, OfpError> {
        let nxm = Nxm::of_header(body.u32()?).ok_or(bad_action::BAD_ARGUMENT)?;
        Subfield::new(nxm, u32::from(body.u16()?), n_bits).map_err(|_| bad_action::BAD_ARGUMENT)
    };
    let src = if header & SRC_IMMEDIATE != 0 {
        let words = n_bits.div_ceil(16) as usize;
        let bytes = body.take(words * 2)?;
        if bytes.len() > 16 && bytes[..bytes.len() - 16].iter().any(|&b| b != 0) {
            return Err(bad_action::BAD_ARGUMENT);
        }
        let value = bytes
            .iter()
            .fold(0u128, |v, &b| v.wrapping_shl(8) | u128::from(b));
        LearnSource::Value(value)
    } else {
        LearnSource::Field(field(body)?)
    };
    Ok(match (header & DST_MASK, src) {
        (0, src) => LearnSpec::Match {
            dst: field(body)?,
            src,
        },
        (DST_LOAD, src) => LearnSpec::Load {
            dst: field(body)?,
            src,
        },
        (DST_OUTPUT, LearnSource::Field(src)) => LearnSpec::Output(src),
        _ => return Err(bad_action::BAD_ARGUMENT),
    })
}

/// Writes a learn whole (its experimenter header included), padded to eight bytes.
pub fn write_learn(w: &mut Writer, learn: &Learn, experimenter: impl FnOnce(&mut Writer)) {
    let start = w.len();
    experimenter(w);
    w.u16(NXAST_LEARN)
        .u16(learn.idle_timeout)
        .u16(learn.hard_timeout)
        .u16(learn.priority)
        .u64(learn.cookie)
        .u16(if learn.send_flow_rem {
            SEND_FLOW_REM
        } else {
            0
        })
        .u8(learn.table)
        .u8(0)
        .u16(0)
        .u16(0);
    for spec in &learn.specs {
        let (kind, src, dst) = match *spec {
            LearnSpec::Match { dst, src } => (0, src, Some(dst)),
            LearnSpec::Load { dst, src } => (DST_LOAD, src, Some(dst)),
            LearnSpec::Output(src) => (DST_OUTPUT, LearnSource::Field(src), None),
        };
        let n_bits = match (src, dst) {
            (_, Some(dst)) => dst.n_bits,
            (LearnSource::Field(src), None) => src.n_bits,
            (LearnSource::Value(_), None) => unreachable!("an output reads a field"),
        };
        match src {
            LearnSource::Field(src) => {
                w.u16(kind | u16::from(n_bits));
                w.u32(src.nxm.header()).u16(u16::from(src.ofs));
            }
            LearnSource::Value(value) => {
                w.u16(SRC_IMMEDIATE | kind | u16::from(n_bits));
                let bytes = usize::from(n_bits).div_ceil(16) * 2;
                w.slice(&value.to_be_bytes()[16 - bytes..]);
            }
        }
        if let Some(dst) = dst {
            w.u32(dst.nxm.header()).u16(u16::from(dst.ofs));
        }
    }
    w.pad8();
    w.set_len(start + 2, start);
}
