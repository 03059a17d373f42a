//! A port spec from the command line: any string parses or is refused with a message, and
//! one that parses prints back to a spec that parses to the same port, and says which
//! standard streams it uses without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_port::PortSpec;

fuzz_target!(|text: &str| {
    if let Ok(spec) = text.parse::<PortSpec>() {
        let printed = spec.to_string();
        assert_eq!(printed.parse::<PortSpec>().as_ref(), Ok(&spec), "{text:?}");
        for (rx, tx) in [(true, false), (false, true), (true, true)] {
            let _ = spec.std_streams(rx, tx);
        }
    }
});
