//! Flow text from `ctl` and `--flows` (ovs-ofctl syntax): any string parses to a rule or an
//! error, never a panic, and a rule that parses prints back to text that parses to it again
//! (the round trip `dump-flows` relies on). The same for ctl's groups (`add-group` and the
//! `dump-groups` line); meters and selectors parse or refuse without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_switch::ofctl::flow_parse::{parse_flow_mod, parse_selector};
use wirespeed_switch::ofctl::group_text::{group_line, parse_group, parse_group_selector};
use wirespeed_switch::ofctl::meter_text::{parse_meter, parse_meter_selector};
use wirespeed_switch::{RuleDisplay, parse_rule};

fuzz_target!(|text: &str| {
    let _ = parse_flow_mod(text, false);
    let _ = parse_selector(text, "del-flows", false);
    let _ = parse_meter(text);
    let _ = parse_meter_selector(text);
    let _ = parse_group_selector(text);
    if let Ok(rule) = parse_rule(text) {
        let printed = RuleDisplay(&rule).to_string();
        assert_eq!(
            parse_rule(&printed).as_ref(),
            Ok(&rule),
            "{text:?} -> {printed:?}"
        );
    }
    if let Ok(group) = parse_group(text) {
        let printed = group_line(&group);
        assert_eq!(
            parse_group(&printed).as_ref(),
            Ok(&group),
            "{text:?} -> {printed:?}"
        );
    }
});
