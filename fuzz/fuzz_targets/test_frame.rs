//! A frame `recv` checks for a generator's test payload: any bytes are read as one (with its
//! checksums verified) or not, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_packet::read_test_frame;

fuzz_target!(|frame: &[u8]| {
    if let Some(read) = read_test_frame(frame) {
        let _ = (read.payload.generator, read.payload.seq, read.checksums_ok);
    }
});
