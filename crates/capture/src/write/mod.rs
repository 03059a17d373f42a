//! Encoding capture files: classic pcap with the nanosecond magic, and pcapng with nanosecond
//! timestamps (if_tsresol 9). Encoders append to a byte buffer; the writer thread does the I/O.

pub mod pcap;
pub mod pcapng;

/// Which file format to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    Pcapng,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "pcap" => Ok(Format::Pcap),
            "pcapng" => Ok(Format::Pcapng),
            _ => Err(format!("{s}: the format is pcap or pcapng")),
        }
    }
}

/// What a file says about the interface its packets came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub link_type: u16,
    pub snaplen: u32,
    /// The interface name (pcapng if_name); none for packets read from a file.
    pub name: Option<String>,
}

/// Capture statistics for the end of a pcapng file (interface statistics block).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfStats {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Packets received from the interface (isb_ifrecv).
    pub received: u64,
    /// Packets the kernel or the receive ring dropped (isb_ifdrop).
    pub dropped: u64,
}

impl Format {
    /// The format a file name asks for: pcap for a name ending in `.pcap` (any case), pcapng
    /// otherwise (the default of tshark and dumpcap, and ours).
    pub fn for_path(path: &std::path::Path) -> Format {
        match path.extension() {
            Some(e) if e.eq_ignore_ascii_case("pcap") => Format::Pcap,
            _ => Format::Pcapng,
        }
    }

    /// Appends the blocks that start a file.
    pub fn file_header(self, iface: &Interface, out: &mut Vec<u8>) {
        match self {
            Format::Pcap => pcap::file_header(iface, out),
            Format::Pcapng => pcapng::file_header(iface, out),
        }
    }

    /// Bytes a packet of `caplen` captured bytes takes in the file.
    #[inline]
    pub fn record_len(self, caplen: usize) -> usize {
        match self {
            Format::Pcap => pcap::RECORD_HEADER_LEN + caplen,
            Format::Pcapng => pcapng::EPB_OVERHEAD + caplen.next_multiple_of(4),
        }
    }

    /// Appends one packet: `data` as captured, `orig_len` its length on the wire.
    #[inline]
    pub fn record(self, out: &mut Vec<u8>, ts_ns: u64, data: &[u8], orig_len: u32) {
        match self {
            Format::Pcap => pcap::record(out, ts_ns, data, orig_len),
            Format::Pcapng => pcapng::enhanced_packet(out, ts_ns, data, orig_len),
        }
    }

    /// Bytes the blocks that end a file take.
    pub fn trailer_len(self) -> usize {
        match self {
            Format::Pcap => 0,
            Format::Pcapng => pcapng::ISB_LEN,
        }
    }

    /// Appends the blocks that end a file (pcapng: the interface statistics).
    pub fn trailer(self, stats: &IfStats, out: &mut Vec<u8>) {
        if self == Format::Pcapng {
            pcapng::interface_statistics(out, stats);
        }
    }
}

#[cfg(test)]
mod tests;
