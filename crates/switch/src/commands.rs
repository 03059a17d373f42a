//! What `wirespeed ctl` can ask of a running bridge, in ovs-ofctl's words and output shapes.
//! Run by the poll-mode thread between bursts.

use std::fmt::Write;

use crate::bridge::Bridge;
use crate::control::{Request, Response};
use crate::execute::DropReason;
use crate::flow_format::MegaflowLine;
use crate::flow_parse::{parse_flow_mod, parse_flows, parse_rule, parse_selector};

/// The commands, for `--help` and for the answer to an unknown one.
pub const COMMANDS: &str = "add-flow FLOW, add-flows FILE, mod-flows FLOW, del-flows [MATCH], dump-flows, \
                            dump-ports, show, dump-cache";

pub fn execute(bridge: &mut Bridge, request: &Request) -> Response {
    let arg = request.args.first().map(String::as_str).unwrap_or("");
    let now = bridge.now();
    let dp = &mut bridge.datapath;
    match request.command.as_str() {
        "add-flow" => match parse_rule(arg).and_then(|rule| dp.add_rule(rule, now)) {
            Ok(_) => Response::ok(""),
            Err(e) => Response::error(format!("{arg}: {e}")),
        },
        // All or nothing: every flow parses and names known ports, or the table is unchanged.
        "add-flows" => match parse_flows(arg) {
            Err(e) => Response::error(e.to_string()),
            Ok(rules) => {
                if let Some(e) = rules
                    .iter()
                    .find_map(|r| dp.check_output_ports(&r.actions).err())
                {
                    return Response::error(e.to_string());
                }
                let n = rules.len();
                for rule in rules {
                    dp.tables.add(rule, now);
                }
                Response::ok(format!("{n} flows added"))
            }
        },
        "mod-flows" => match parse_flow_mod(arg, false) {
            Err(e) => Response::error(format!("{arg}: {e}")),
            Ok((selector, actions)) => match dp.check_output_ports(&actions) {
                Err(e) => Response::error(e.to_string()),
                Ok(()) => {
                    dp.tables.modify(&selector, &actions);
                    Response::ok("")
                }
            },
        },
        "del-flows" => match parse_selector(arg, false) {
            Err(e) => Response::error(format!("{arg}: {e}")),
            Ok(selector) => {
                dp.tables.delete(&selector);
                Response::ok("")
            }
        },
        "dump-flows" => Response::ok(dp.tables.dump_flows(now).join("\n")),
        "dump-ports" => Response::ok(dump_ports(bridge)),
        "show" => Response::ok(show(bridge)),
        "dump-cache" => Response::ok(dump_cache(bridge)),
        other => Response::error(format!("unknown command '{other}' (known: {COMMANDS})")),
    }
}

/// ovs-ofctl dump-ports' shape, with wirespeed's drop reasons after it.
fn dump_ports(bridge: &mut Bridge) -> String {
    let numbers = bridge.numbers().to_vec();
    let mut out = format!("OFPST_PORT reply: {} ports\n", numbers.len());
    for (member, n) in numbers.iter().enumerate() {
        let s = bridge.port_stats(member);
        let rx_drop = s.drops.fill_ring_empty + s.drops.rx_ring_full + s.drops.kernel_dropped;
        let tx_drop = s.drops.tx_ring_full + s.drops.tx_error;
        let _ = writeln!(
            out,
            "  port {n:>2}: rx pkts={}, bytes={}, drop={}, errs={}, frame=0, over=0, crc=0",
            s.rx_packets, s.rx_bytes, rx_drop, s.drops.rx_invalid_desc
        );
        let _ = writeln!(
            out,
            "           tx pkts={}, bytes={}, drop={}, errs={}, coll=0",
            s.tx_packets, s.tx_bytes, tx_drop, s.drops.tx_invalid_desc
        );
        let reasons: Vec<String> = s
            .drops
            .by_reason()
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !reasons.is_empty() {
            let _ = writeln!(out, "           drops: {}", reasons.join(", "));
        }
        let _ = writeln!(out, "           copies={}", s.copies);
    }
    let c = bridge.counters;
    let reasons: Vec<String> = DropReason::ALL
        .iter()
        .map(|r| format!("{}={}", r.name(), c.drops.get(*r)))
        .collect();
    let _ = write!(
        out,
        "  bridge: {}, unknown_port={}, no_frame={}, to_controller={}",
        reasons.join(", "),
        c.unknown_port,
        c.no_frame,
        c.to_controller
    );
    out
}

fn show(bridge: &Bridge) -> String {
    let group = bridge.group();
    let audit = group.audit();
    let mut out = format!(
        "wirespeed switch: {} ports on one UMEM of {} frames ({} free)\n",
        bridge.numbers().len(),
        audit.total,
        audit.pool
    );
    for (member, n) in bridge.numbers().iter().enumerate() {
        let info = group.info(member);
        let _ = writeln!(out, " {n}({}): {} mode", info.spec, info.mode);
    }
    out.pop();
    out
}

fn dump_cache(bridge: &Bridge) -> String {
    let cache = &bridge.datapath.cache;
    let s = cache.stats;
    let mut out = format!(
        "emc_hits={}, megaflow_hits={}, misses={}, flushes={}",
        s.emc_hits, s.megaflow_hits, s.misses, s.flushes
    );
    for megaflow in cache.megaflows() {
        let _ = write!(out, "\n{}", MegaflowLine(megaflow));
    }
    out
}
