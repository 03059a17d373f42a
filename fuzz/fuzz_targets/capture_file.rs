//! A capture file (`capture -r`, `gen --pcap`): pcap or pcapng, any bytes. Reading ends in
//! records or an error, never a panic, and no record claims more bytes than the file has.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_capture::CaptureReader;

fuzz_target!(|file: &[u8]| {
    let source = Box::new(std::io::Cursor::new(file.to_vec()));
    let Ok(mut reader) = CaptureReader::from_reader("fuzz", source) else {
        return;
    };
    let _ = (reader.format(), reader.link_type(), reader.snaplen());
    // Each record takes at least a header's bytes of the input, so this bound is never the
    // one that ends a well-formed file.
    for _ in 0..=file.len() / 12 {
        match reader.next_record() {
            Ok(Some(record)) => assert!(record.data.len() <= file.len()),
            Ok(None) | Err(_) => break,
        }
    }
});
