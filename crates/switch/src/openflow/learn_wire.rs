//! `NXAST_LEARN` on the wire, as Open vSwitch's `nx_action_learn` lays it out: after the
//! experimenter header, the learned rule's timeouts, priority, cookie, flags and table, then
//! its specs, each a 16-bit header (where the bits come from, where they go, how many), the
//! source (a field's NXM header and offset, or the value in whole 16-bit words) and the
//! destination (a field's header and offset; none for an output), zeros to the end.

use crate::action::Action;
use crate::learn::{
    DELETE_LEARNED, Learn, LearnErrorKind, LearnId, LearnSource, LearnSpec, SEND_FLOW_REM,
};
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
/// Reads a learn after its experimenter header and subtype, with Open vSwitch's errors:
/// BAD_LEN for a spec cut short, BAD_SET_TYPE for an unknown field, BAD_SET_LEN for bits
/// outside one, BAD_SET_ARGUMENT for a load into one that cannot be written,
/// MATCH_INCONSISTENT for a match without its protocol's before it. The `fin_*` timeouts and
/// the flag `result_dst` needs (Open vSwitch's `learn2`, which this switch does not take)
/// are refused (BAD_ARGUMENT).
pub fn read_learn(body: &mut Reader<'_>) -> Result<Action, OfpError> {
    let short = |_| bad_action::BAD_LEN;
    let idle_timeout = body.u16().map_err(short)?;
    let hard_timeout = body.u16().map_err(short)?;
    let priority = body.u16().map_err(short)?;
    let cookie = body.u64().map_err(short)?;
    let flags = body.u16().map_err(short)?;
    let table = body.u8().map_err(short)?;
    let pad = body.u8().map_err(short)?;
    let fin_idle = body.u16().map_err(short)?;
    let fin_hard = body.u16().map_err(short)?;
    if pad != 0 || flags & !(SEND_FLOW_REM | DELETE_LEARNED) != 0 || fin_idle != 0 || fin_hard != 0
    {
        return Err(bad_action::BAD_ARGUMENT);
    }
    let mut learn = Learn {
        table,
        priority,
        idle_timeout,
        hard_timeout,
        cookie,
        send_flow_rem: flags & SEND_FLOW_REM != 0,
        delete_learned: flags & DELETE_LEARNED != 0,
        specs: Vec::new(),
    };
    while body.remaining() >= 2 {
        let header = body.u16().map_err(short)?;
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
        .map_err(|e| match e.kind {
            LearnErrorKind::Prerequisite => bad_action::MATCH_INCONSISTENT,
            LearnErrorKind::ReadOnly => bad_action::BAD_SET_ARGUMENT,
            LearnErrorKind::Argument => bad_action::BAD_ARGUMENT,
        })
}

/// One spec after its header (whose other bits, as Open vSwitch's, are ignored).
fn read_spec(body: &mut Reader<'_>, header: u16) -> Result<LearnSpec, OfpError> {
    let short = |_| bad_action::BAD_LEN;
    let n_bits = u32::from(header & N_BITS_MASK);
    let field = |body: &mut Reader<'_>| -> Result<Subfield, OfpError> {
        let nxm = Nxm::of_header(body.u32().map_err(short)?).ok_or(bad_action::BAD_SET_TYPE)?;
        let ofs = body.u16().map_err(short)?;
        Subfield::new(nxm, u32::from(ofs), n_bits).map_err(|_| bad_action::BAD_SET_LEN)
    };
    let src = if header & SRC_IMMEDIATE != 0 {
        // Whole 16-bit words, of which only the low bits count.
        let bytes = body.take(n_bits.div_ceil(16) as usize * 2).map_err(short)?;
        let low = &bytes[bytes.len().saturating_sub(16)..];
        let value = low.iter().fold(0u128, |v, &b| v << 8 | u128::from(b));
        let value = match n_bits {
            0..128 => value & ((1u128 << n_bits) - 1),
            _ => value,
        };
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
        .u16(
            if learn.send_flow_rem {
                SEND_FLOW_REM
            } else {
                0
            } | if learn.delete_learned {
                DELETE_LEARNED
            } else {
                0
            },
        )
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

#[cfg(test)]
mod tests {
    use super::write_learn;
    use crate::action::Action;
    use crate::learn::{Learn, LearnSource, LearnSpec};
    use crate::ofctl::action_parse::parse_actions;
    use crate::openflow::actions::{ActionsIn, read_actions, write_actions};
    use crate::openflow::error::{OfpError, bad_action};
    use crate::openflow::wire::{Reader, Writer};
    use crate::subfield::Subfield;

    const LEARN: &str = "learn(table=10,eth_type=0x800,NXM_OF_VLAN_TCI[0..11],\
                         NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
                         load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15])";

    /// The learn above as Open vSwitch lays out `nx_action_learn` and its specs.
    #[rustfmt::skip]
    const BYTES: [u8; 88] = [
        0xff, 0xff, 0, 88, 0x00, 0x00, 0x23, 0x20, 0, 16, // experimenter, NXAST_LEARN
        0, 0, 0, 0, 0x80, 0, // idle, hard, priority
        0, 0, 0, 0, 0, 0, 0, 0, // cookie
        0, 0, 10, 0, 0, 0, 0, 0, // flags, table, pad, fin_idle, fin_hard
        0x20, 0x10, 0x08, 0x00, 0, 0, 0x06, 0x02, 0, 0, // eth_type=0x800: value, dst
        0x00, 0x0c, 0, 0, 0x08, 0x02, 0, 0, 0, 0, 0x08, 0x02, 0, 0, // VLAN_TCI[0..11]
        0x00, 0x30, 0, 0, 0x04, 0x06, 0, 0, 0, 0, 0x02, 0x06, 0, 0, // ETH_DST=ETH_SRC
        0x08, 0x10, 0, 0, 0x00, 0x02, 0, 0, 0, 1, 0x00, 0x04, 0, 0, // load IN_PORT->REG0
        0, 0, 0, 0, // padding
    ];

    fn read(bytes: &[u8]) -> Result<Vec<Action>, OfpError> {
        read_actions(&mut Reader::new(bytes), ActionsIn::Rule)
    }

    #[test]
    fn lays_out_a_learn_as_open_vswitch() {
        let actions = parse_actions(LEARN).unwrap();
        let mut w = Writer::default();
        write_actions(
            &mut w,
            &actions,
            crate::openflow::actions::MatchFacts::default(),
        );
        assert_eq!(w.bytes, BYTES);
        assert_eq!(read(&BYTES), Ok(actions));
    }

    #[test]
    fn refuses_what_open_vswitch_refuses_with_its_errors() {
        let with = |at: usize, byte: u8| {
            let mut bytes = BYTES;
            bytes[at] = byte;
            read(&bytes)
        };
        assert_eq!(with(27, 1), Err(bad_action::BAD_ARGUMENT), "pad");
        assert_eq!(with(25, 4), Err(bad_action::BAD_ARGUMENT), "write_result");
        // delete_learned is taken, and written back.
        let Ok(actions) = with(25, 2) else {
            panic!("delete_learned refused");
        };
        let Action::Learn(id) = actions[0] else {
            panic!("{actions:?}");
        };
        assert!(id.get().delete_learned);
        let mut w = Writer::default();
        write_actions(
            &mut w,
            &actions,
            crate::openflow::actions::MatchFacts::default(),
        );
        assert_eq!(w.bytes[25], 2);
        assert_eq!(
            with(29, 3),
            Err(bad_action::BAD_ARGUMENT),
            "fin_idle_timeout"
        );
        assert_eq!(
            with(38, 0x7f),
            Err(bad_action::BAD_SET_TYPE),
            "no such field"
        );
        assert_eq!(
            with(43, 40),
            Err(bad_action::BAD_SET_LEN),
            "bits past the field"
        );
        let mut bytes = BYTES;
        bytes[78..82].copy_from_slice(&[0, 0, 0x06, 0x02]);
        assert_eq!(
            read(&bytes),
            Err(bad_action::BAD_SET_ARGUMENT),
            "load into ETH_TYPE"
        );
        // ip_src without eth_type=0x800 before it.
        let unchecked = Learn {
            specs: vec![LearnSpec::Match {
                dst: Subfield::parse("NXM_OF_IP_SRC[]").unwrap(),
                src: LearnSource::Value(1),
            }],
            ..Learn::default()
        };
        let mut w = Writer::default();
        write_learn(&mut w, &unchecked, |w| {
            w.u16(0xffff).u16(0).u32(0x2320);
        });
        assert_eq!(read(&w.bytes), Err(bad_action::MATCH_INCONSISTENT));
        // A spec cut short.
        let mut short = BYTES;
        short[3] = 40;
        assert_eq!(read(&short[..40]), Err(bad_action::BAD_LEN));
    }
}
