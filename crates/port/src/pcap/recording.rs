//! The sending side of a pcap port: every packet sent becomes a record of a capture file.
//! Records gather in a buffer that goes to the file in large writes; after a failed write the
//! file is cut back to its last whole record, so it stays readable and keeps every record
//! the write got out whole. `-` records on standard output (pcapng), which a failed write
//! leaves as it is.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

use wirespeed_capture::LINKTYPE_ETHERNET;
use wirespeed_capture::write::{Format, Interface};

use super::files::is_std_stream;
use crate::PortError;

/// Buffered records go to the file once they reach this much, or at `flush`.
const WRITE_AT: usize = 1 << 20;

pub(crate) struct Recording {
    /// What errors call the file: its path, or "standard output".
    name: String,
    format: Format,
    file: Option<File>,
    /// The file is standard output: not ours to cut back or remove.
    stdout: bool,
    buf: Vec<u8>,
    /// Packets and bytes in `buf`, not yet in the file.
    buffered: (u64, u64),
    /// Where each record in `buf` ends, and the packet bytes up to it: what a failed write
    /// that got part of `buf` out still keeps whole.
    ends: Vec<(usize, u64)>,
    /// Bytes of the file that are its header or whole records.
    valid_len: u64,
}

/// What a failed write lost: the packets that were in the buffer, and why.
pub(crate) struct Lost {
    pub packets: u64,
    pub bytes: u64,
    pub error: PortError,
}

impl Recording {
    /// Creates (or empties) the file at `path` and writes its header: pcap for a name ending
    /// in `.pcap`, pcapng otherwise (`Format::for_path`), snap length `snaplen`. `-`: standard output.
    pub fn create(path: &Path, snaplen: u32) -> Result<Recording, PortError> {
        let format = Format::for_path(path);
        let mut buf = Vec::with_capacity(WRITE_AT + 64 * 1024);
        let iface = Interface {
            link_type: LINKTYPE_ETHERNET,
            snaplen,
            name: None,
        };
        format.file_header(&iface, &mut buf);
        let stdout = is_std_stream(path);
        let name = match stdout {
            true => "standard output".to_string(),
            false => path.display().to_string(),
        };
        let io_error = |what, source| PortError::Io {
            iface: name.clone(),
            what,
            source,
        };
        let mut file = match stdout {
            // A descriptor of its own, so writes bypass the line buffer of Rust's stdout.
            true => std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map(File::from)
                .map_err(|e| io_error("take standard output", e))?,
            false => File::create(path).map_err(|e| io_error("create the capture file", e))?,
        };
        if let Err(e) = file.write_all(&buf) {
            // Not even a header: a file we made goes again (a device such as /dev/full stays).
            if !stdout && file.metadata().is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(path);
            }
            return Err(io_error("write the capture file's header", e));
        }
        let valid_len = buf.len() as u64;
        buf.clear();
        Ok(Recording {
            name,
            format,
            file: Some(file),
            stdout,
            buf,
            buffered: (0, 0),
            ends: Vec::new(),
            valid_len,
        })
    }

    /// Adds a packet sent at `ts_ns`. False once a write has failed: nothing more is
    /// recorded.
    #[inline]
    pub fn add(&mut self, ts_ns: u64, packet: &[u8]) -> bool {
        if self.file.is_none() {
            return false;
        }
        self.format
            .record(&mut self.buf, ts_ns, packet, packet.len() as u32);
        self.buffered.0 += 1;
        self.buffered.1 += packet.len() as u64;
        self.ends.push((self.buf.len(), self.buffered.1));
        true
    }

    /// True when enough is buffered to be worth a write.
    pub fn full(&self) -> bool {
        self.buf.len() >= WRITE_AT
    }

    /// True when records wait in the buffer.
    pub fn pending(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Writes what is buffered to the file.
    pub fn write_out(&mut self) -> Result<(), Lost> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        if self.buf.is_empty() {
            return Ok(());
        }
        let (packets, bytes) = std::mem::take(&mut self.buffered);
        match write_all_counted(file, &self.buf) {
            Ok(()) => {
                self.valid_len += self.buf.len() as u64;
                self.buf.clear();
                self.ends.clear();
                Ok(())
            }
            Err((done, source)) => {
                // The records wholly written stay; a part of the next is cut off (a file we
                // cannot cut, standard output, keeps it), and nothing more is recorded.
                let whole = self.ends.partition_point(|&(end, _)| end <= done);
                let (kept_len, kept_bytes) = whole.checked_sub(1).map_or((0, 0), |i| self.ends[i]);
                self.ends.clear();
                self.valid_len += kept_len as u64;
                if !self.stdout {
                    let _ = file.set_len(self.valid_len);
                }
                self.file = None;
                self.buf.clear();
                Err(Lost {
                    packets: packets - whole as u64,
                    bytes: bytes - kept_bytes,
                    error: PortError::Io {
                        iface: self.name.clone(),
                        what: "write the capture file",
                        source,
                    },
                })
            }
        }
    }
}

/// `write_all`, saying on failure how many bytes went out before it.
fn write_all_counted(file: &mut File, mut bytes: &[u8]) -> Result<(), (usize, std::io::Error)> {
    let mut done = 0;
    while !bytes.is_empty() {
        match file.write(bytes) {
            Ok(0) => return Err((done, std::io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                done += n;
                bytes = &bytes[n..];
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}
