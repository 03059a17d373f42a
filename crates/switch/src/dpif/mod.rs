//! The datapath: the exact-match and megaflow caches, each poll-mode thread's own cache, ports
//! and loop, and the port sets a thread serves.

pub mod emc;
pub mod flow_cache;
pub mod megaflow;
pub mod pmd;
pub mod port_links;
pub mod port_set;
pub mod process;
pub mod thread_cache;
pub mod upcall;
