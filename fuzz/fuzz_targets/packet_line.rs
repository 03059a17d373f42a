//! Lines printed for packets off the wire (`capture` without -w, as `tcpdump -n`): any
//! bytes under any link type the printer decodes, with or without -e and -S, in a
//! sequence (TCP's relative numbers are remembered across packets). A line, never a panic,
//! and one line a packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_capture::print::{PrintOptions, Printer};

/// Ethernet, raw IP, Linux cooked v1 and v2.
const LINK_TYPES: [u16; 4] = [1, 101, 113, 276];

fuzz_target!(|input: &[u8]| {
    let Some((&flags, mut rest)) = input.split_first() else {
        return;
    };
    let options = PrintOptions {
        link: flags & 1 != 0,
        absolute_seq: flags & 2 != 0,
    };
    let mut printer = Printer::new(LINK_TYPES[usize::from(flags >> 2) % 4], options);
    let mut line = String::new();
    // Records of a classic pcap file: a 16-byte header (its lengths as they come), then
    // the bytes; each record here is as long as its first byte says.
    while let Some((&len, tail)) = rest.split_first() {
        let take = usize::from(len).min(tail.len());
        let (record, next) = tail.split_at(take);
        rest = next;
        line.clear();
        printer.record(record, &mut line);
        assert!(!line.is_empty() && !line.contains('\n'), "{line:?}");
    }
});
