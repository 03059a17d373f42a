//! A buffered byte stream that knows its offset, for error messages that say where.

use std::io::{BufRead, BufReader, ErrorKind as IoKind, Read};

use crate::error::ErrorKind;

pub(crate) struct Input {
    inner: BufReader<Box<dyn Read + Send>>,
    offset: u64,
}

impl Input {
    pub(crate) fn new(source: Box<dyn Read + Send>) -> Input {
        Input {
            // A pipe's worth: larger reads gain nothing from the page cache, and a buffer of
            // 1 MiB cost more to set up than a small file takes to read (a fuzzer's input).
            inner: BufReader::with_capacity(64 << 10, source),
            offset: 0,
        }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads until `buf` is full or the stream ends; returns how many bytes it got.
    pub(crate) fn fill(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(source) => {
                    return Err(ErrorKind::Read {
                        offset: self.offset + got as u64,
                        source,
                    });
                }
            }
        }
        self.offset += got as u64;
        Ok(got)
    }

    /// Reads exactly `buf.len()` bytes of `what`; a short read is a truncated file.
    pub(crate) fn need(&mut self, buf: &mut [u8], what: &'static str) -> Result<(), ErrorKind> {
        let at = self.offset;
        let got = self.fill(buf)?;
        if got < buf.len() {
            return Err(ErrorKind::Truncated {
                offset: at,
                what,
                need: buf.len() as u64,
                have: got as u64,
            });
        }
        Ok(())
    }

    /// Reads exactly `len` bytes of `what` into `buf` (replacing what it held), growing it
    /// only as the bytes arrive: a record header claiming megabytes in a short file costs
    /// what the file has, not what it claims.
    pub(crate) fn need_vec(
        &mut self,
        buf: &mut Vec<u8>,
        len: usize,
        what: &'static str,
    ) -> Result<(), ErrorKind> {
        let at = self.offset;
        buf.clear();
        while buf.len() < len {
            let available = match self.inner.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == IoKind::Interrupted => continue,
                Err(source) => {
                    return Err(ErrorKind::Read {
                        offset: self.offset,
                        source,
                    });
                }
            };
            if available.is_empty() {
                return Err(ErrorKind::Truncated {
                    offset: at,
                    what,
                    need: len as u64,
                    have: buf.len() as u64,
                });
            }
            let take = available.len().min(len - buf.len());
            buf.extend_from_slice(&available[..take]);
            self.inner.consume(take);
            self.offset += take as u64;
        }
        Ok(())
    }
}
