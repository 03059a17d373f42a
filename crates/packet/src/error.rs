//! The two ways a header can fail: it does not parse, or it does not fit.

use core::fmt;

/// Why a byte slice is not a valid header of some protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// The slice ends before the header (or the length it claims) does.
    Truncated {
        header: &'static str,
        need: usize,
        have: usize,
    },
    /// A field holds a value the view cannot honour (wrong version, lying length...).
    Malformed {
        header: &'static str,
        reason: &'static str,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Truncated { header, need, have } => write!(
                f,
                "{header}: truncated, needs {need} bytes but the buffer has {have}"
            ),
            ParseError::Malformed { header, reason } => write!(f, "{header}: malformed, {reason}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Why a frame could not be built into a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The destination buffer is shorter than the frame.
    BufferTooShort { need: usize, have: usize },
    /// The requested frame length is outside what the builder supports.
    FrameLenOutOfRange {
        frame_len: usize,
        min: usize,
        max: usize,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::BufferTooShort { need, have } => write!(
                f,
                "frame buffer too short: the frame needs {need} bytes but the buffer has {have}"
            ),
            BuildError::FrameLenOutOfRange {
                frame_len,
                min,
                max,
            } => write!(
                f,
                "frame length {frame_len} out of range: use {min}..={max} bytes (without FCS)"
            ),
        }
    }
}

impl std::error::Error for BuildError {}

/// Shorthand used by every view's `check_len`.
pub(crate) fn truncated(header: &'static str, need: usize, have: usize) -> ParseError {
    ParseError::Truncated { header, need, have }
}

pub(crate) fn malformed(header: &'static str, reason: &'static str) -> ParseError {
    ParseError::Malformed { header, reason }
}
