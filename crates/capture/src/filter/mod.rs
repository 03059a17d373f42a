//! Capture filters in tcpdump syntax: compiled by libpcap, run by our own classic BPF
//! interpreter (`bpf`) in the receive loop, and attached in the kernel where a backend can.

pub mod bpf;

use std::fmt;

pub use bpf::{BpfError, Insn, Metadata, PACKET_OUTGOING, Program};

/// The snap length programs are compiled with: the value a matching program returns.
/// libpcap's largest (MAXIMUM_SNAPLEN); we cut packets at `-s` ourselves, never by the filter,
/// so a packet's original length is never lost to a kernel filter.
pub const FILTER_SNAPLEN: u32 = 262_144;

/// An expression libpcap refused, with libpcap's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub expression: String,
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for FilterError {}

/// The libpcap DLT a file's link type (a LINKTYPE_ number) stands for, as libpcap's
/// `pcap_open_dead` takes it: the two differ only where the DLT numbers differ between
/// systems (LINKTYPE_RAW, 101, is DLT_RAW, 12 on Linux: raw IP, as tun and WireGuard
/// interfaces give it).
fn dlt_of(link_type: u16) -> i32 {
    match link_type {
        100 => 11, // LINKTYPE_ATM_RFC1483
        101 => 12, // LINKTYPE_RAW
        102 => 15, // LINKTYPE_SLIP_BSDOS
        103 => 16, // LINKTYPE_PPP_BSDOS
        106 => 19, // LINKTYPE_ATM_CLIP (Linux's DLT)
        other => i32::from(other),
    }
}

/// A compiled filter ready to run on packet bytes.
#[derive(Debug, Clone)]
pub struct Filter {
    expression: String,
    program: Program,
}

impl Filter {
    /// Compiles `expression` for packets of `link_type` as libpcap does for a capture file
    /// (`pcap_open_dead` + `pcap_compile`, optimized): what `tcpdump -r FILE EXPR` runs.
    /// VLAN tags are in the packet bytes, where both our backends leave them.
    pub fn compile(expression: &str, link_type: u16) -> Result<Filter, FilterError> {
        let dead = pcap::Capture::dead(pcap::Linktype(dlt_of(link_type)))
            .map_err(|e| error(expression, e))?;
        let program = dead
            .compile(expression, true)
            .map_err(|e| error(expression, e))?;
        Filter::from_libpcap(expression, &program)
    }

    /// Compiles `expression` as libpcap does for a live capture on `iface`, for a filter that
    /// runs in the kernel's socket path: there VLAN tags have been taken out of the bytes into
    /// metadata, and libpcap emits the ancillary loads that read them.
    pub fn compile_for_kernel(expression: &str, iface: &str) -> Result<Filter, FilterError> {
        let live = pcap::Capture::from_device(iface)
            .and_then(|c| c.snaplen(FILTER_SNAPLEN as i32).open())
            .map_err(|e| error(expression, e))?;
        let program = live
            .compile(expression, true)
            .map_err(|e| error(expression, e))?;
        Filter::from_libpcap(expression, &program)
    }

    fn from_libpcap(expression: &str, program: &pcap::BpfProgram) -> Result<Filter, FilterError> {
        // The pcap crate shows an instruction only as "code jt jf k".
        let insns: Option<Vec<Insn>> = program
            .get_instructions()
            .iter()
            .map(|i| parse_insn(&i.to_string()))
            .collect();
        let insns = insns.ok_or_else(|| FilterError {
            expression: expression.to_string(),
            message: "libpcap gave an instruction this build cannot read".to_string(),
        })?;
        let program = Program::new(&insns).map_err(|e| FilterError {
            expression: expression.to_string(),
            message: e.to_string(),
        })?;
        Ok(Filter {
            expression: expression.to_string(),
            program,
        })
    }

    /// The program as text, an instruction a line (`code jt jf k`, as `tcpdump -ddd` prints
    /// them after its count): what [`Filter::from_text`] reads back.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for i in self.insns() {
            text.push_str(&format!("{} {} {} {}\n", i.code, i.jt, i.jf, i.k));
        }
        text
    }

    /// A filter for `expression` from the text of its program (made by [`Filter::to_text`],
    /// perhaps in another process).
    pub fn from_text(expression: &str, text: &str) -> Result<Filter, FilterError> {
        let refused = |message: String| FilterError {
            expression: expression.to_string(),
            message,
        };
        let insns: Option<Vec<Insn>> = text.lines().map(parse_insn).collect();
        let insns =
            insns.ok_or_else(|| refused("a line of the program is not code jt jf k".into()))?;
        let program = Program::new(&insns).map_err(|e| refused(e.to_string()))?;
        Ok(Filter {
            expression: expression.to_string(),
            program,
        })
    }

    /// A filter from instructions given directly (tests, or a program from elsewhere).
    pub fn from_insns(expression: &str, insns: &[Insn]) -> Result<Filter, BpfError> {
        Ok(Filter {
            expression: expression.to_string(),
            program: Program::new(insns)?,
        })
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    pub fn insns(&self) -> &[Insn] {
        self.program.insns()
    }

    /// True when the packet (its captured bytes, `wire_len` on the wire) passes.
    #[inline]
    pub fn matches(&self, packet: &[u8], wire_len: u32) -> bool {
        self.program.run(packet, wire_len) != 0
    }

    /// `matches`, for a packet whose metadata is known (a live capture).
    #[inline]
    pub fn matches_with(&self, packet: &[u8], wire_len: u32, meta: Metadata) -> bool {
        self.program.run_with(packet, wire_len, Some(meta)) != 0
    }

    /// True when the expression tests packet metadata (`inbound`, `outbound`, `ifindex`),
    /// which capture files do not keep.
    pub fn reads_metadata(&self) -> bool {
        self.program.reads_metadata()
    }
}

fn error(expression: &str, e: pcap::Error) -> FilterError {
    let message = match e {
        pcap::Error::PcapError(m) => m,
        other => other.to_string(),
    };
    FilterError {
        expression: expression.to_string(),
        message,
    }
}

fn parse_insn(text: &str) -> Option<Insn> {
    let mut f = text.split_whitespace();
    let insn = Insn {
        code: f.next()?.parse().ok()?,
        jt: f.next()?.parse().ok()?,
        jf: f.next()?.parse().ok()?,
        k: f.next()?.parse().ok()?,
    };
    f.next().is_none().then_some(insn)
}

#[cfg(test)]
mod tests;
