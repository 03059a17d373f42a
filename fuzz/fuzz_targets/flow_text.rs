//! Flow text from `ctl` and `--flows` (ovs-ofctl syntax): any string parses to a rule or an
//! error, never a panic, and a rule that parses prints back to text that parses to it again
//! (the round trip `dump-flows` relies on).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_switch::ofctl::flow_parse::{parse_flow_mod, parse_selector};
use wirespeed_switch::{RuleDisplay, parse_rule};

fuzz_target!(|text: &str| {
    let _ = parse_flow_mod(text, false);
    let _ = parse_selector(text, "del-flows", false);
    if let Ok(rule) = parse_rule(text) {
        let printed = RuleDisplay(&rule).to_string();
        assert_eq!(
            parse_rule(&printed).as_ref(),
            Ok(&rule),
            "{text:?} -> {printed:?}"
        );
    }
});
