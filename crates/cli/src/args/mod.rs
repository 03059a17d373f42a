//! Argument types and flag groups that several commands share.

pub mod engine;
pub mod port_flags;
