//! IPFIX flow export (RFC 7011, information elements of RFC 7012 and IANA's registry), as
//! Open vSwitch's bridge exporter sends it: one record per flow, from counters the datapath
//! already keeps; the only work per packet is TCP's flags ORed into the megaflow (or the
//! kernel entry, when a flag is new): tcpControlBits, which Open vSwitch's records lack
//! (they count some flags' packets instead).
//!
//! - Where the counts come from ([`observe`]): with export on, every megaflow the upcall
//!   installs is exact on a record's fields (addresses, protocol, ports or ICMP type and
//!   code, VLAN, input port, destination MAC, a tunnel's VNI and outer addresses), so a
//!   megaflow is one flow and its
//!   `n_packets` / `n_bytes` are that flow's; the kernel's fast path entries are exact
//!   flows already. Once a second the control side takes what each counted since the
//!   last look into the [`flow_table::FlowTable`]: beyond
//!   [`crate::dpif::flow_cache::FLOW_COUNTS_BATCH`] megaflows a thread, a share a second,
//!   each twice per idle timeout (the thread waits while its share is read). Megaflows
//!   emptied by a rule change or a full cache keep their counts until then.
//! - When flows are reported ([`flow_table`]): after the active timeout of a report's first
//!   packet, and once more when no packet came for the idle timeout; all of them when the
//!   switch stops. Counts are deltas since the flow's last report.
//! - Tunnels ([`observe::Seen::resolve`]): a flow that went out through a tunnel port, or
//!   else came in by one, carries the tunnel's ends and VNI in Open vSwitch's enterprise
//!   elements, under templates of their own.
//! - What goes on the wire ([`message`], [`template`], [`record`]): messages of at most
//!   1400 bytes over UDP; templates at start and every template interval; sequence numbers
//!   counting the data records sent before each message; one observation domain.
//! - Sampling (`--ipfix-sampling N`): the counters count every packet, so sampling picks
//!   flows, not packets: a flow is reported, with all its packets, when a hash of its key
//!   is a multiple of N (about 1 in N flows, the same ones every run). The options record
//!   says so (selectorAlgorithm 3, samplingSize 1, samplingPopulation N).

pub mod exporter;
pub mod flow_table;
pub mod message;
pub mod observe;
pub mod record;
pub mod template;

pub use exporter::{ExportConfig, ExportStats, FlowExporter};
pub use flow_table::{Observation, Timeouts};

/// What can go wrong setting up the export.
#[derive(Debug, thiserror::Error)]
pub enum IpfixError {
    #[error("cannot open a UDP socket for the export: {0}")]
    Socket(std::io::Error),
}
