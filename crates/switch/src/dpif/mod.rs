//! The datapath: the per-frame step ([`process`]), the exact-match and megaflow caches, each
//! poll-mode thread's own cache, ports and loop, and the port sets a thread serves. A miss goes
//! up through [`upcall`], the interface this layer defines and `ofproto` implements.

pub mod digest;
pub mod emc;
pub mod figures;
pub mod flow_cache;
pub mod megaflow;
pub mod packet_in;
pub mod pmd;
pub mod port_links;
pub mod port_set;
pub mod process;
pub mod revalidate;
pub mod thread_cache;
pub mod upcall;
