//! pcapng: a stream of blocks, each `type, total length, body, total length`. A section header
//! block (SHB) sets the byte order; interface description blocks (IDB) give each interface's
//! link type, snap length and timestamp resolution; packets come in enhanced (EPB), simple (SPB)
//! or obsolete packet blocks. Other blocks (statistics, name resolution, custom) are skipped.

use super::input::Input;
use super::{Found, MAX_RECORD_LEN};
use crate::error::ErrorKind;

pub const SHB_TYPE: u32 = 0x0a0d_0d0a;
pub const IDB_TYPE: u32 = 0x0000_0001;
pub const OPB_TYPE: u32 = 0x0000_0002;
pub const SPB_TYPE: u32 = 0x0000_0003;
pub const EPB_TYPE: u32 = 0x0000_0006;
pub const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

const OPT_END: u16 = 0;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;

/// Timestamp units of an interface: 10^-n or 2^-n seconds (if_tsresol; default 10^-6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TsResol {
    Pow10(u8),
    Pow2(u8),
}

impl TsResol {
    fn from_option(v: u8) -> TsResol {
        match v & 0x80 {
            0 => TsResol::Pow10(v),
            _ => TsResol::Pow2(v & 0x7f),
        }
    }

    /// Converts a timestamp in these units to nanoseconds (saturating, never panicking).
    pub(crate) fn to_ns(self, ts: u64) -> u64 {
        match self {
            TsResol::Pow10(n) if n <= 9 => ts.saturating_mul(10u64.pow(9 - n as u32)),
            TsResol::Pow10(n) => 10u64.checked_pow(n as u32 - 9).map_or(0, |d| ts / d),
            TsResol::Pow2(n) => {
                let ns = (ts as u128 * 1_000_000_000) >> n.min(127);
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Interface {
    link_type: u16,
    snaplen: u32,
    tsresol: TsResol,
    tsoffset_s: i64,
    /// if_name, when it is UTF-8.
    name: Option<String>,
}

/// The state of the current section: its byte order and the interfaces it described so far.
pub(crate) struct Section {
    big_endian: bool,
    interfaces: Vec<Interface>,
    /// Link type and snap length of the file's first interface (what `link_type()` reports);
    /// every later interface must have the same link type.
    first: Option<(u16, u32)>,
}

impl Section {
    pub(crate) fn first_link_type(&self) -> u16 {
        self.first.map_or(0, |f| f.0)
    }

    /// The interface name, when the section has described one interface and named it (with
    /// several, a name would mislabel the others' packets).
    pub(crate) fn sole_interface_name(&self) -> Option<&str> {
        match self.interfaces.as_slice() {
            [only] => only.name.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn first_snaplen(&self) -> u32 {
        self.first.map_or(0, |f| f.1)
    }
}

/// Bounds-checked field reads in the section's byte order.
#[derive(Clone, Copy)]
struct Fields<'a> {
    b: &'a [u8],
    big_endian: bool,
}

impl Fields<'_> {
    fn u16(&self, at: usize) -> Option<u16> {
        let b: [u8; 2] = self.b.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(match self.big_endian {
            true => u16::from_be_bytes(b),
            false => u16::from_le_bytes(b),
        })
    }

    fn u32(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match self.big_endian {
            true => u32::from_be_bytes(b),
            false => u32::from_le_bytes(b),
        })
    }

    fn u64(&self, at: usize) -> Option<u64> {
        let b: [u8; 8] = self.b.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(match self.big_endian {
            true => u64::from_be_bytes(b),
            false => u64::from_le_bytes(b),
        })
    }
}

fn malformed(offset: u64, reason: impl Into<String>) -> ErrorKind {
    ErrorKind::Malformed {
        offset,
        reason: reason.into(),
    }
}

/// Reads the first section header (its type already consumed) and the blocks up to the first
/// interface description, so the link type is known before any packet.
pub(crate) fn read_first_section(
    input: &mut Input,
    buf: &mut Vec<u8>,
) -> Result<Section, ErrorKind> {
    let mut section = Section {
        big_endian: false,
        interfaces: Vec::new(),
        first: None,
    };
    read_section_header(input, &mut section, buf)?;
    loop {
        let at = input.offset();
        let Some(block_type) = read_block(input, &mut section, buf)? else {
            return Err(ErrorKind::NoInterface);
        };
        match block_type {
            IDB_TYPE => return Ok(section),
            EPB_TYPE | SPB_TYPE | OPB_TYPE => {
                return Err(malformed(
                    at,
                    "packet block before any interface description block",
                ));
            }
            _ => {}
        }
    }
}

/// The next packet of the file, crossing sections and skipping blocks that hold none.
pub(crate) fn next_record(
    input: &mut Input,
    s: &mut Section,
    buf: &mut Vec<u8>,
) -> Result<Option<Found>, ErrorKind> {
    loop {
        let at = input.offset();
        let Some(block_type) = read_block(input, s, buf)? else {
            return Ok(None);
        };
        let found = match block_type {
            EPB_TYPE => enhanced_packet(s, buf, at)?,
            SPB_TYPE => simple_packet(s, buf, at)?,
            OPB_TYPE => obsolete_packet(s, buf, at)?,
            _ => continue,
        };
        return Ok(Some(found));
    }
}

/// Reads one block's body (after type and length, without the trailing length) into `buf`.
/// Section headers and interface descriptions update `s` as they go by.
fn read_block(
    input: &mut Input,
    s: &mut Section,
    buf: &mut Vec<u8>,
) -> Result<Option<u32>, ErrorKind> {
    let at = input.offset();
    let mut head = [0u8; 4];
    match input.fill(&mut head)? {
        0 => return Ok(None),
        4 => {}
        got => {
            return Err(ErrorKind::Truncated {
                offset: at,
                what: "a block header",
                need: 8,
                have: got as u64,
            });
        }
    }
    let raw_type = u32::from_le_bytes(head);
    if raw_type == SHB_TYPE {
        read_section_header(input, s, buf)?;
        return Ok(Some(SHB_TYPE));
    }
    let mut len = [0u8; 4];
    input.need(&mut len, "a block header")?;
    let f = Fields {
        b: &[head, len].concat(),
        big_endian: s.big_endian,
    };
    let (block_type, total) = (f.u32(0).unwrap_or(0), f.u32(4).unwrap_or(0));
    read_body(input, s.big_endian, total, 8, buf, at)?;
    if block_type == IDB_TYPE {
        let idb = parse_interface(
            Fields {
                b: buf,
                big_endian: s.big_endian,
            },
            at,
        )?;
        match s.first {
            None => s.first = Some((idb.link_type, idb.snaplen)),
            Some((first, _)) if first != idb.link_type => {
                return Err(ErrorKind::MixedLinkTypes {
                    offset: at,
                    link_type: idb.link_type,
                    first,
                });
            }
            Some(_) => {}
        }
        s.interfaces.push(idb);
    }
    Ok(Some(block_type))
}

/// Reads a section header after its type: byte-order magic, then the rest of the block.
fn read_section_header(
    input: &mut Input,
    s: &mut Section,
    buf: &mut Vec<u8>,
) -> Result<(), ErrorKind> {
    let at = input.offset() - 4;
    let mut len_bom = [0u8; 8];
    input.need(&mut len_bom, "a section header block")?;
    let bom = [len_bom[4], len_bom[5], len_bom[6], len_bom[7]];
    let big_endian = match bom {
        b if u32::from_le_bytes(b) == BYTE_ORDER_MAGIC => false,
        b if u32::from_be_bytes(b) == BYTE_ORDER_MAGIC => true,
        b => {
            return Err(malformed(
                at + 8,
                format!("section header byte-order magic is {b:02x?}"),
            ));
        }
    };
    let f = Fields {
        b: &len_bom,
        big_endian,
    };
    let total = f.u32(0).unwrap_or(0);
    read_body(input, big_endian, total, 12, buf, at)?;
    // The body starts after the byte-order magic: major and minor version, section length.
    let major = Fields { b: buf, big_endian }.u16(0).unwrap_or(0);
    if major != 1 {
        return Err(malformed(
            at,
            format!("pcapng version {major} (this reader knows version 1)"),
        ));
    }
    s.big_endian = big_endian;
    s.interfaces.clear();
    Ok(())
}

/// Reads the rest of a block of `total` bytes of which `consumed` are read, checks the trailing
/// length, and leaves the body (without the trailing length) in `buf`.
fn read_body(
    input: &mut Input,
    big_endian: bool,
    total: u32,
    consumed: u32,
    buf: &mut Vec<u8>,
    at: u64,
) -> Result<(), ErrorKind> {
    if total < consumed + 4 || !total.is_multiple_of(4) || total > MAX_RECORD_LEN + 64 {
        return Err(malformed(
            at,
            format!(
                "block length {total} is not a multiple of 4 within 12..={}",
                MAX_RECORD_LEN + 64
            ),
        ));
    }
    input.need_vec(buf, (total - consumed) as usize, "a block")?;
    let end = buf.len() - 4;
    let trailer = Fields { b: buf, big_endian }.u32(end).unwrap_or(0);
    if trailer != total {
        return Err(malformed(
            at,
            format!("block length {total} at the start but {trailer} at the end"),
        ));
    }
    buf.truncate(end);
    Ok(())
}

fn parse_interface(f: Fields<'_>, at: u64) -> Result<Interface, ErrorKind> {
    let (Some(link_type), Some(snaplen)) = (f.u16(0), f.u32(4)) else {
        return Err(malformed(
            at,
            "interface description block shorter than 8 bytes",
        ));
    };
    let mut idb = Interface {
        link_type,
        snaplen,
        tsresol: TsResol::Pow10(6),
        tsoffset_s: 0,
        name: None,
    };
    let mut pos = 8;
    while let (Some(code), Some(len)) = (f.u16(pos), f.u16(pos + 2)) {
        let value = pos + 4;
        match code {
            OPT_END => break,
            IF_TSRESOL if len == 1 => {
                idb.tsresol = TsResol::from_option(f.b.get(value).copied().unwrap_or(6));
            }
            IF_TSOFFSET if len == 8 => idb.tsoffset_s = f.u64(value).unwrap_or(0) as i64,
            IF_NAME => {
                let bytes = f.b.get(value..value + len as usize).unwrap_or_default();
                let name = std::str::from_utf8(bytes)
                    .ok()
                    .map(|n| n.trim_end_matches('\0'));
                idb.name = name.filter(|n| !n.is_empty()).map(str::to_string);
            }
            _ => {}
        }
        pos = value + (len as usize).div_ceil(4) * 4;
    }
    Ok(idb)
}

fn interface(s: &Section, id: u32, at: u64) -> Result<&Interface, ErrorKind> {
    s.interfaces.get(id as usize).ok_or_else(|| {
        malformed(
            at,
            format!(
                "packet names interface {id} but the section describes {}",
                s.interfaces.len()
            ),
        )
    })
}

fn timestamp(idb: &Interface, high: u32, low: u32) -> u64 {
    let ns = idb.tsresol.to_ns((high as u64) << 32 | low as u64);
    ns.checked_add_signed(idb.tsoffset_s.saturating_mul(1_000_000_000))
        .unwrap_or(0)
}

/// The captured bytes must fit in the block after a `fixed`-byte header.
fn check_caplen(buf: &[u8], fixed: usize, caplen: u32, at: u64) -> Result<usize, ErrorKind> {
    let caplen = caplen as usize;
    match fixed.checked_add(caplen) {
        Some(end) if end <= buf.len() => Ok(caplen),
        _ => Err(malformed(
            at,
            format!(
                "packet claims {caplen} captured bytes, its block holds {}",
                buf.len().saturating_sub(fixed)
            ),
        )),
    }
}

fn enhanced_packet(s: &Section, buf: &[u8], at: u64) -> Result<Found, ErrorKind> {
    let f = Fields {
        b: buf,
        big_endian: s.big_endian,
    };
    let short = || malformed(at, "enhanced packet block shorter than 20 bytes");
    let (id, high, low) = (
        f.u32(0).ok_or_else(short)?,
        f.u32(4).ok_or_else(short)?,
        f.u32(8).ok_or_else(short)?,
    );
    let (caplen, orig_len) = (f.u32(12).ok_or_else(short)?, f.u32(16).ok_or_else(short)?);
    let idb = interface(s, id, at)?;
    Ok(Found {
        ts_ns: timestamp(idb, high, low),
        start: 20,
        caplen: check_caplen(buf, 20, caplen, at)?,
        orig_len,
    })
}

fn simple_packet(s: &Section, buf: &[u8], at: u64) -> Result<Found, ErrorKind> {
    let f = Fields {
        b: buf,
        big_endian: s.big_endian,
    };
    let orig_len = f
        .u32(0)
        .ok_or_else(|| malformed(at, "simple packet block shorter than 4 bytes"))?;
    let idb = interface(s, 0, at)?;
    // An SPB stores min(original length, snap length) bytes, padded to 32 bits.
    let mut caplen = orig_len as usize;
    if idb.snaplen != 0 {
        caplen = caplen.min(idb.snaplen as usize);
    }
    Ok(Found {
        ts_ns: 0,
        start: 4,
        caplen: caplen.min(buf.len() - 4),
        orig_len,
    })
}

fn obsolete_packet(s: &Section, buf: &[u8], at: u64) -> Result<Found, ErrorKind> {
    let f = Fields {
        b: buf,
        big_endian: s.big_endian,
    };
    let short = || malformed(at, "packet block shorter than 20 bytes");
    let id = f.u16(0).ok_or_else(short)? as u32;
    let (high, low) = (f.u32(4).ok_or_else(short)?, f.u32(8).ok_or_else(short)?);
    let (caplen, orig_len) = (f.u32(12).ok_or_else(short)?, f.u32(16).ok_or_else(short)?);
    let idb = interface(s, id, at)?;
    Ok(Found {
        ts_ns: timestamp(idb, high, low),
        start: 20,
        caplen: check_caplen(buf, 20, caplen, at)?,
        orig_len,
    })
}
