//! Reading capture files: classic pcap (micro- and nanosecond, either byte order) and pcapng
//! (section header, interface description, enhanced / simple / obsolete packet blocks).
//!
//! `CaptureReader::next_record` lends each packet out of one reused buffer: no allocation per
//! packet once the buffer has grown to the largest record.

mod input;
pub(crate) mod pcap;
pub(crate) mod pcapng;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{CaptureError, ErrorKind};
use input::Input;

/// Records larger than this are refused as malformed (libpcap's limit is 256 KiB for most link
/// types; this is generous, and keeps a lying length from allocating gigabytes).
pub const MAX_RECORD_LEN: u32 = 16 << 20;

/// One packet of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// The captured bytes (possibly cut at the snap length).
    pub data: &'a [u8],
    /// The length of the packet on the wire.
    pub orig_len: u32,
    /// The name of the interface it was captured on, when the file names one interface
    /// (pcapng's if_name, with one interface described so far); pcap files name none.
    pub interface_name: Option<&'a str>,
}

/// Which kind of file the reader found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Pcap { nanosecond: bool },
    Pcapng,
}

enum State {
    Pcap(pcap::Header),
    Pcapng(pcapng::Section),
}

/// A capture file opened for reading, one record at a time.
pub struct CaptureReader {
    path: PathBuf,
    input: Input,
    state: State,
    buf: Vec<u8>,
}

impl CaptureReader {
    /// Opens a pcap or pcapng file; `-` reads standard input.
    pub fn open(path: impl AsRef<Path>) -> Result<CaptureReader, CaptureError> {
        let path = path.as_ref();
        let source: Box<dyn Read + Send> = if path == Path::new("-") {
            Box::new(std::io::stdin())
        } else {
            let file = File::open(path).map_err(|e| CaptureError::new(path, ErrorKind::Open(e)))?;
            Box::new(file)
        };
        CaptureReader::from_reader(path, source)
    }

    /// Reads a capture from any byte stream; `name` is what errors call it.
    pub fn from_reader(
        name: impl AsRef<Path>,
        source: Box<dyn Read + Send>,
    ) -> Result<CaptureReader, CaptureError> {
        let path = name.as_ref().to_path_buf();
        let mut input = Input::new(source);
        let mut buf = Vec::new();
        let state =
            read_file_header(&mut input, &mut buf).map_err(|k| CaptureError::new(&path, k))?;
        Ok(CaptureReader {
            path,
            input,
            state,
            buf,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn format(&self) -> FileFormat {
        match &self.state {
            State::Pcap(h) => FileFormat::Pcap {
                nanosecond: h.nanosecond,
            },
            State::Pcapng(_) => FileFormat::Pcapng,
        }
    }

    /// The link type of the file (of its first interface, for pcapng). Ethernet is 1.
    pub fn link_type(&self) -> u16 {
        match &self.state {
            State::Pcap(h) => h.link_type,
            State::Pcapng(s) => s.first_link_type(),
        }
    }

    /// The snap length the file declares (of its first interface, for pcapng); 0 if none.
    pub fn snaplen(&self) -> u32 {
        match &self.state {
            State::Pcap(h) => h.snaplen,
            State::Pcapng(s) => s.first_snaplen(),
        }
    }

    /// The next packet, or `None` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, CaptureError> {
        let found = match &mut self.state {
            State::Pcap(h) => pcap::next_record(&mut self.input, h, &mut self.buf),
            State::Pcapng(s) => pcapng::next_record(&mut self.input, s, &mut self.buf),
        };
        let interface_name = match &self.state {
            State::Pcap(_) => None,
            State::Pcapng(s) => s.sole_interface_name(),
        };
        match found {
            Ok(Some(r)) => Ok(Some(Record {
                ts_ns: r.ts_ns,
                data: &self.buf[r.start..r.start + r.caplen],
                orig_len: r.orig_len,
                interface_name,
            })),
            Ok(None) => Ok(None),
            Err(kind) => Err(CaptureError::new(&self.path, kind)),
        }
    }
}

/// Where a record's bytes sit in the reader's buffer.
pub(crate) struct Found {
    ts_ns: u64,
    start: usize,
    caplen: usize,
    orig_len: u32,
}

fn read_file_header(input: &mut Input, buf: &mut Vec<u8>) -> Result<State, ErrorKind> {
    let mut magic = [0u8; 4];
    let got = input.fill(&mut magic)?;
    if got < 4 {
        return Err(ErrorKind::NotCapture {
            magic: magic[..got].to_vec(),
        });
    }
    if let Some(order) = pcap::magic_order(magic) {
        return Ok(State::Pcap(pcap::read_header(input, order)?));
    }
    if magic == pcapng::SHB_TYPE.to_le_bytes() {
        return Ok(State::Pcapng(pcapng::read_first_section(input, buf)?));
    }
    Err(ErrorKind::NotCapture {
        magic: magic.to_vec(),
    })
}

#[cfg(test)]
mod tests;
