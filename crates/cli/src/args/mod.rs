//! Argument types and flag groups that several commands share: the port flags, the
//! transmit engine, CPU lists.

pub mod cpus;
pub mod engine;
pub mod port_flags;
