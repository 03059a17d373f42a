//! `wirespeed ctl`'s meter commands, in ovs-ofctl's words: `add-meter`, `mod-meter`,
//! `del-meter`, `dump-meters` and `meter-stats`, over the same meters as OpenFlow's
//! METER_MOD.

use crate::bridge::control::Response;
use crate::bridge::{Bridge, RemovedReason};
use crate::ofctl::meter_text::{meter_stats_line, parse_meter, parse_meter_selector};

/// The meter commands, for `--help` and the answer to an unknown command.
pub const METER_COMMANDS: &str = "add-meter METER, mod-meter METER, del-meter [meter=ID], \
                                  dump-meters, meter-stats";

/// Runs meter command `command` with its argument, or None if it is not one.
pub fn run(bridge: &mut Bridge, command: &str, arg: &str) -> Option<Response> {
    Some(match command {
        "add-meter" | "mod-meter" => {
            let config = match parse_meter(arg) {
                Ok(config) => config,
                Err(e) => return Some(Response::error(format!("{arg}: {e}"))),
            };
            let (replace, now) = (command == "mod-meter", bridge.now());
            match bridge.edit(|dp| dp.tables.set_meter(config, replace, now)) {
                Ok(()) => Response::ok(""),
                Err(e) => Response::error(format!("{arg}: {e}")),
            }
        }
        "del-meter" => match parse_meter_selector(arg) {
            Ok(only) => {
                let now = bridge.now();
                let removed = bridge.edit(|dp| dp.delete_meters(only, now));
                let n = removed.len();
                bridge.tell_removed(removed, RemovedReason::Delete, now);
                // OpenFlow's rule, which surprises: say so when it happened.
                Response::ok(match n {
                    0 => String::new(),
                    n => format!("flows deleted with the meter: {n}"),
                })
            }
            Err(e) => Response::error(format!("{arg}: {e}")),
        },
        "dump-meters" | "meter-stats" if !arg.is_empty() => {
            Response::error(format!("{command} takes no argument (got '{arg}')"))
        }
        "dump-meters" => {
            let dp = bridge.ofproto();
            let lines: Vec<String> = dp.tables.meters().map(|m| m.0.config.to_string()).collect();
            Response::ok(lines.join("\n"))
        }
        "meter-stats" => {
            let now = bridge.now();
            let dp = bridge.ofproto();
            let lines: Vec<String> = dp
                .tables
                .meters()
                .map(|m| {
                    let flows = dp.tables.meter_flow_count(m.0.config.id);
                    meter_stats_line(&m.0, flows, now)
                })
                .collect();
            Response::ok(lines.join("\n"))
        }
        _ => return None,
    })
}
