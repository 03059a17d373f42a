//! What `wirespeed ctl` can ask of a running bridge, in ovs-ofctl's words and output shapes.
//! Run on the control side; rule changes through [`Bridge::edit`].

use crate::openflow::reply::{RULE_TOO_LONG, dumpable_rule};
use std::fmt::Write;

use std::sync::mpsc::Receiver;
use std::time::Duration;

use wirespeed_packet::MacAddr;
use wirespeed_port::{Backend, PortError, PortSpec, PortStats};

use crate::bridge::control::{Request, Response};
use crate::bridge::ctl_json::{self, JSON, JSON_COMMANDS};
use crate::bridge::group_commands::{self, GROUP_COMMANDS};
use crate::bridge::link::LinkState;
use crate::bridge::meter_commands::{self, METER_COMMANDS};
use crate::bridge::port_counts::{fast_port_counts, port_counts};
use crate::bridge::{Bridge, RemovedReason, Work};
use crate::dpif::flow_cache::CacheStats;
use crate::dpif::pmd::{BridgeCounters, PmdSnapshot};
use crate::dpif::port_links::link_name;
use crate::execute::DropReason;
use crate::ofctl::flow_format::{MegaflowLine, RuleDisplay, dump_flows};
use crate::ofctl::flow_parse::{
    FlowMod, parse_flow_lines, parse_flow_mod, parse_rule, parse_selector,
};
use crate::ofctl::group_text::parse_group_selector;
use crate::ofctl::port_names::PortNames;
use crate::offload::FastPortCounts;
use crate::ofproto::rule_table::{InstalledRule, RuleSelector, TableStats};
use crate::ofproto::state::Ofproto;
use crate::rule::{N_TABLES, Rule};
use crate::tunnel::TunnelFigures;
use wirespeed_port::LinkState as Link;

/// The commands, for `--help` and for the answer to an unknown one.
pub const COMMANDS: &str = "add-flow FLOW, add-flows FILE, replace-flows FILE, diff-flows FILE, \
                            mod-flows FLOW, del-flows [MATCH], dump-flows [MATCH], dump-tables, \
                            dump-ports, show, dump-cache, fdb-show, metrics";

/// The commands that take `--strict` (a request's second argument): the match selects rules
/// with exactly that match and priority, as ovs-ofctl's mod-flows and del-flows do (a strict
/// dump-flows is ours).
pub const STRICT_COMMANDS: [&str; 3] = ["mod-flows", "del-flows", "dump-flows"];

/// The request argument that asks for strict selection.
pub const STRICT: &str = "--strict";

/// Runs `request`; an error quotes at most the first bytes of a long flow or token.
pub fn answer_ctl(bridge: &mut Bridge, request: &Request) -> Response {
    let mut response = run(bridge, request);
    if !response.ok {
        response.output = clip_long_words(&response.output);
    }
    response
}

/// Longest word an error message quotes whole.
const LONGEST_QUOTED: usize = 200;

/// `1 flow added`, `2 flows added`: how many of `what` a command added.
pub(crate) fn added(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what} added"),
        n => format!("{n} {what}s added"),
    }
}

/// `text` with each word (a run without spaces) longer than LONGEST_QUOTED cut to its start
/// and how long it was: a megabyte of bad action is named, not echoed.
fn clip_long_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4096));
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if word.len() <= LONGEST_QUOTED {
            out.push_str(word);
            continue;
        }
        let mut cut = 60;
        while !word.is_char_boundary(cut) {
            cut -= 1;
        }
        let _ = write!(out, "{}...({} bytes)", &word[..cut], word.len());
    }
    out
}

fn run(bridge: &mut Bridge, request: &Request) -> Response {
    let arg = request.args.first().map(String::as_str).unwrap_or("");
    let flags = request.args.get(1..).unwrap_or_default();
    let strict = flags.iter().any(|a| a == STRICT);
    let json = flags.iter().any(|a| a == JSON);
    let command = request.command.as_str();
    if strict && !STRICT_COMMANDS.contains(&command) {
        return Response::error(format!(
            "{STRICT} is for {} only",
            STRICT_COMMANDS.join(", ")
        ));
    }
    if json && !JSON_COMMANDS.contains(&command) {
        return Response::error(format!("{JSON} is for {} only", JSON_COMMANDS.join(", ")));
    }
    // Ports a flow names (`in_port=veth1`, `output:veth2`) are numbered first, as
    // ovs-ofctl does; messages quote the flow as typed.
    let names = port_names(bridge);
    let numbered = |arg: &str| names.number_in(arg);
    let edit = match command {
        "show" | "dump-cache" | "fdb-show" | "metrics" | "dump-tables" if !arg.is_empty() => {
            return Response::error(format!("{command} takes no argument (got '{arg}')"));
        }
        "dump-ports" => {
            return match port_selector(bridge, &names, arg) {
                Ok(only) if json => Response::ok(ctl_json::ports(bridge, only).to_string()),
                Ok(only) => Response::ok(dump_ports(bridge, only)),
                Err(e) => Response::error(e),
            };
        }
        "dump-tables" => {
            let tables = shown_tables(bridge);
            return Response::ok(match json {
                true => ctl_json::tables(&tables).to_string(),
                false => dump_tables(&tables),
            });
        }
        "meter-stats" if json && arg.is_empty() => {
            return Response::ok(ctl_json::meter_stats(bridge).to_string());
        }
        "dump-flows" if json => {
            return match numbered(arg).and_then(|t| parse_selector(&t, command, strict)) {
                Ok(selector) => match ctl_json::flows(bridge, &selector) {
                    Ok(flows) => Response::ok(flows.to_string()),
                    Err(e) => Response::error(e),
                },
                Err(e) => Response::error(format!("{arg}: {e}")),
            };
        }
        "dump-group-stats" if json => {
            return match parse_group_selector(arg) {
                Ok(only) => Response::ok(ctl_json::group_stats(bridge, only).to_string()),
                Err(e) => Response::error(format!("{arg}: {e}")),
            };
        }
        "show" => return Response::ok(show(bridge)),
        "dump-cache" => return Response::ok(dump_cache(bridge)),
        "fdb-show" => return Response::ok(fdb_show(bridge)),
        // What --metrics serves, for `wirespeed top --ctl` and scripts without a listener.
        "metrics" => return Response::ok(bridge.metrics().render()),
        "dump-flows" => match numbered(arg).and_then(|t| parse_selector(&t, command, strict)) {
            Ok(selector) => Edit::Dump(selector),
            Err(e) => return Response::error(format!("{arg}: {e}")),
        },
        // Parsed before the lock is taken: the poll-mode threads wait while it is held.
        "add-flow" => match numbered(arg).and_then(|t| parse_rule(&t)) {
            Ok(rule) => Edit::Add(vec![(1, rule)]),
            Err(e) => return Response::error(format!("{arg}: {e}")),
        },
        "add-flows" => match numbered(arg).and_then(|t| parse_flow_lines(&t)) {
            Ok(rules) => Edit::Add(rules),
            Err(e) => return Response::error(e.to_string()),
        },
        "replace-flows" => match numbered(arg).and_then(|t| parse_flow_lines(&t)) {
            Ok(rules) => Edit::Replace(rules),
            Err(e) => return Response::error(e.to_string()),
        },
        "diff-flows" => match numbered(arg).and_then(|t| parse_flow_lines(&t)) {
            Ok(rules) => Edit::Diff(rules.into_iter().map(|(_, rule)| rule).collect()),
            Err(e) => return Response::error(e.to_string()),
        },
        "mod-flows" => match numbered(arg).and_then(|t| parse_flow_mod(&t, strict)) {
            Ok(flow_mod) => Edit::Modify(flow_mod),
            Err(e) => return Response::error(format!("{arg}: {e}")),
        },
        "del-flows" => match numbered(arg).and_then(|t| parse_selector(&t, command, strict)) {
            Ok(selector) => Edit::Delete(selector),
            Err(e) => return Response::error(format!("{arg}: {e}")),
        },
        other => {
            if let Some(answer) = meter_commands::run(bridge, other, arg)
                .or_else(|| group_commands::run(bridge, other, arg, &names))
            {
                return answer;
            }
            return Response::error(format!(
                "unknown command '{other}' (known: {COMMANDS}, {GROUP_COMMANDS}, {METER_COMMANDS})"
            ));
        }
    };
    let now = bridge.now();
    // add-flow and mod-flows name their one flow in errors; add-flows' messages name the line.
    let flow = matches!(request.command.as_str(), "add-flow" | "mod-flows").then_some(arg);
    let mut removed = Vec::new();
    let response = bridge.edit(|ofproto| apply(ofproto, edit, flow, now, &mut removed));
    bridge.tell_removed(removed, RemovedReason::Delete, now);
    response
}

/// The bridge's ports by the names OpenFlow's PORT_DESC gives them: each port's interface
/// (its spec where it has none), and the tunnel ports'.
fn port_names(bridge: &Bridge) -> PortNames {
    let devices = bridge.numbers().iter().zip(bridge.specs());
    PortNames::of_bridge(
        devices.map(|(&number, spec)| (number, spec.as_str())),
        bridge
            .tunnels()
            .ports
            .iter()
            .map(|t| (t.number, t.config.kind)),
    )
}

/// A parsed request that reads or changes the rule tables.
enum Edit {
    /// Rules with their line numbers (add-flows names the line of a rule it refuses).
    Add(Vec<(usize, Rule)>),
    /// The rules the tables are to hold, with their line numbers.
    Replace(Vec<(usize, Rule)>),
    /// The rules to compare the tables with.
    Diff(Vec<Rule>),
    Modify(FlowMod),
    Delete(RuleSelector),
    /// The rules a selector picks (all for an empty match).
    Dump(RuleSelector),
}

/// Applies `edit` under the lock; the rules it deleted go to `removed`. Adding and
/// replacing are all or nothing: every flow names known ports, groups and meters, or the
/// table is unchanged.
fn apply(
    dp: &mut Ofproto,
    edit: Edit,
    flow: Option<&str>,
    now: Duration,
    removed: &mut Vec<InstalledRule>,
) -> Response {
    // The kernel's counts go to the rules as they are now. Before a change that takes
    // rules away the kernel stops forwarding under them, if it forwards under them, so
    // their counts are complete; otherwise it goes on, and only the flows the change
    // touched stop, after it.
    let deleting = match &edit {
        Edit::Delete(selector) => dp.tables.selected(selector),
        _ => Vec::new(),
    };
    let offload = match &edit {
        Edit::Dump(_) | Edit::Diff(_) => dp.harvest(now),
        Edit::Modify(_) => dp.before_taking(&[], now),
        Edit::Add(rules) => {
            let replaced: Vec<_> = rules
                .iter()
                .filter_map(|(_, r)| dp.tables.find_exact(r.table, &r.flow_match, r.priority))
                .collect();
            dp.before_taking(&replaced, now)
        }
        Edit::Delete(_) => dp.before_taking(&deleting, now),
        Edit::Replace(_) => dp.before_taking_any(now),
    };
    if let Err(e) = offload {
        return Response::error(format!("offload: {e}"));
    }
    if let Edit::Add(rules) | Edit::Replace(rules) = &edit
        && let Some((line, e)) = rules
            .iter()
            .find_map(|(line, r)| dp.check_output_ports(&r.actions).err().map(|e| (line, e)))
    {
        return Response::error(match flow {
            Some(flow) => format!("{flow}: {e}"),
            None => format!("line {line}: {e}"),
        });
    }
    if let Edit::Add(rules) | Edit::Replace(rules) = &edit
        && let Some(line) = rules
            .iter()
            .find_map(|(line, r)| (!dumpable_rule(&r.flow_match, &r.actions)).then_some(line))
    {
        return Response::error(match flow {
            Some(flow) => format!("{flow}: {RULE_TOO_LONG}"),
            None => format!("line {line}: {RULE_TOO_LONG}"),
        });
    }
    match edit {
        Edit::Diff(rules) => {
            let (extra, wanted) = dp.tables.diff(&rules);
            let lines: Vec<String> = (extra.iter().map(|r| format!("-{}", RuleDisplay(r))))
                .chain(wanted.iter().map(|r| format!("+{}", RuleDisplay(r))))
                .collect();
            Response::ok(lines.join("\n"))
        }
        Edit::Replace(rules) => {
            let rules = rules.into_iter().map(|(_, rule)| rule).collect();
            let (n, deleted) = dp.tables.replace_all(rules, now);
            *removed = deleted;
            Response::ok(format!(
                "{}, {} changed, {} deleted, {} kept",
                added(n.added, "flow"),
                n.changed,
                n.deleted,
                n.kept
            ))
        }
        Edit::Add(rules) => {
            let n = rules.len();
            for (_, rule) in rules {
                dp.tables.add(rule, now);
            }
            Response::ok(match flow {
                Some(_) => String::new(),
                None => added(n, "flow"),
            })
        }
        Edit::Modify(m) => {
            let undumpable = dp.tables.selected(&m.selector).iter().any(|&id| {
                dp.tables
                    .get(id)
                    .is_some_and(|r| !dumpable_rule(&r.rule.flow_match, &m.actions))
            });
            let changed = dp
                .check_output_ports(&m.actions)
                .map_err(|e| e.to_string())
                .and_then(|()| match undumpable {
                    true => Err(RULE_TOO_LONG.to_string()),
                    false => Ok(()),
                })
                .and_then(|()| {
                    dp.tables
                        .modify(&m.selector, &m.actions, m.new_cookie)
                        .map_err(|e| e.to_string())
                });
            match changed {
                Ok(_) => Response::ok(""),
                Err(e) => Response::error(match flow {
                    Some(flow) => format!("{flow}: {e}"),
                    None => e,
                }),
            }
        }
        Edit::Delete(_) => {
            *removed = dp.tables.remove_all(deleting);
            Response::ok("")
        }
        Edit::Dump(selector) => Response::ok(dump_flows(&dp.tables, &selector, now).join("\n")),
    }
}

/// The tables `dump-tables` shows, their counts up to date: table 0, and each other table
/// that has rules or was looked up.
fn shown_tables(bridge: &mut Bridge) -> Vec<TableStats> {
    let now = bridge.now();
    bridge.edit(|dp| {
        // A failed harvest shows the counts of the last one that worked, as dump-ports does.
        let _ = dp.harvest(now);
        let mut tables = dp.tables.table_stats();
        tables.retain(|t| t.table == 0 || t.active > 0 || t.counts.lookups > 0);
        tables
    })
}

/// `dump-tables` in ovs-ofctl's shape, the tables with neither rules nor lookups left out.
fn dump_tables(tables: &[TableStats]) -> String {
    let mut out = "OFPST_TABLE reply:".to_string();
    for t in tables {
        let _ = write!(
            out,
            "\n  table {}:\n    active={}, lookup={}, matched={}",
            t.table, t.active, t.counts.lookups, t.counts.matched
        );
    }
    out
}

/// Each port's counters summed over the poll-mode threads, and the bridge's.
pub fn port_totals(snapshots: &[PmdSnapshot]) -> (Vec<PortStats>, BridgeCounters) {
    let ports = snapshots.first().map_or(0, |s| s.ports.len());
    let mut totals = vec![PortStats::default(); ports];
    let mut counters = BridgeCounters::default();
    for snapshot in snapshots {
        for (total, (_, stats, _)) in totals.iter_mut().zip(&snapshot.ports) {
            total.add(stats);
        }
        counters.add(&snapshot.counters);
    }
    (totals, counters)
}

/// ovs-ofctl dump-ports' shape, with wirespeed's drop reasons after it.
/// `dump-ports [PORT]`: every port, or the one given by number or by name (as ovs-ofctl
/// takes it: its interface's, or a tunnel port's).
fn port_selector(bridge: &Bridge, names: &PortNames, arg: &str) -> Result<Option<u32>, String> {
    if arg.is_empty() {
        return Ok(None);
    }
    let mut numbers = bridge.numbers().to_vec();
    numbers.extend(bridge.tunnels().ports.iter().map(|t| t.number));
    let named = names.numbers_of(arg);
    match (arg.parse::<u32>(), named) {
        (Ok(n), _) if numbers.contains(&n) => Ok(Some(n)),
        (_, [n]) => Ok(Some(*n)),
        (_, [_, ..]) => {
            let ports: Vec<String> = named.iter().map(u32::to_string).collect();
            Err(format!(
                "dump-ports {arg}: names ports {} (one a queue): give the number",
                ports.join(" and ")
            ))
        }
        _ => {
            let known: Vec<String> = numbers.iter().map(u32::to_string).collect();
            Err(format!(
                "dump-ports {arg}: no such port (the bridge has ports {})",
                known.join(", ")
            ))
        }
    }
}

/// Port counters as `ovs-ofctl dump-ports` shows them (the kernel's fast path included, its
/// part on a line of its own), and the bridge's own counts when every port is shown.
fn dump_ports(bridge: &mut Bridge, only: Option<u32>) -> String {
    let numbers = bridge.numbers().to_vec();
    let snapshots = bridge.snapshots();
    let (totals, c) = port_totals(&snapshots);
    let tunnels = tunnel_totals(&snapshots);
    let fast = fast_port_counts(bridge);
    let tunnel_ports = &bridge.tunnels().ports;
    let shown = if only.is_some() {
        1
    } else {
        numbers.len() + tunnel_ports.len()
    };
    let mut out = format!("OFPST_PORT reply: {shown} ports\n");
    for (i, (n, s)) in numbers.iter().zip(&totals).enumerate() {
        if only.is_some_and(|only| only != *n) {
            continue;
        }
        let p = port_counts(s, fast.as_ref().map(|f| &f[i]));
        let _ = writeln!(
            out,
            "  port {n:>2}: rx pkts={}, bytes={}, drop={}, errs={}, frame=0, over=0, crc=0",
            p.rx_packets, p.rx_bytes, p.rx_dropped, p.rx_errors
        );
        let _ = writeln!(
            out,
            "           tx pkts={}, bytes={}, drop={}, errs={}, coll=0",
            p.tx_packets, p.tx_bytes, p.tx_dropped, p.tx_errors
        );
        write_port_extras(&mut out, bridge.link(i), s, fast.as_ref().map(|f| f[i]));
    }
    for (port, t) in tunnel_ports.iter().zip(&tunnels.ports) {
        if only.is_some_and(|only| only != port.number) {
            continue;
        }
        let _ = writeln!(
            out,
            "  port {:>2}: rx pkts={}, bytes={}, drop=0, errs=0, frame=0, over=0, crc=0\n           \
             tx pkts={}, bytes={}, drop={}, errs=0, coll=0\n           \
             tunnel: decapsulated={}, encapsulated={}, no_route={}, no_neighbour={}, too_big={} \
             (answered {})",
            port.number,
            t.decap_packets,
            t.decap_bytes,
            t.encap_packets,
            t.encap_bytes,
            t.drops(),
            t.decap_packets,
            t.encap_packets,
            t.no_route,
            t.no_neighbour,
            t.too_big,
            t.too_big_answered
        );
    }
    if only.is_some() {
        return out.trim_end().to_string();
    }
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
    if !tunnel_ports.is_empty() {
        let _ = write!(
            out,
            ", tunnel_malformed={}, tunnel_unmatched={}, tunnel_endpoint={} (echoes answered {})",
            tunnels.malformed,
            tunnels.unmatched,
            tunnels.to_endpoint + tunnels.echoes,
            tunnels.echoes
        );
    }
    out
}

/// The tunnel ports' counters summed over the threads.
pub fn tunnel_totals(snapshots: &[PmdSnapshot]) -> TunnelFigures {
    let mut totals = TunnelFigures::default();
    for snapshot in snapshots {
        totals.add(&snapshot.tunnels);
    }
    totals
}

/// The lines `dump-ports` adds to ovs-ofctl's for one port: its link when not up, drops by
/// reason, copies, and what the kernel's fast path did for it.
fn write_port_extras(out: &mut String, link: Link, s: &PortStats, fast: Option<FastPortCounts>) {
    if link != Link::Up || s.tx_stranded > 0 {
        let _ = writeln!(
            out,
            "           link: {}, stranded={} (sent, then the interface went away)",
            link_name(link),
            s.tx_stranded
        );
    }
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
    if let Some(f) = fast {
        let _ = writeln!(
            out,
            "           fast path: rx pkts={}, bytes={}, redirected pkts={}, bytes={}, of which \
             failed={}{}",
            f.rx_packets,
            f.rx_bytes,
            f.tx_packets,
            f.tx_bytes,
            f.tx_failed,
            if f.tx_blocked {
                " (blocked: the kernel could not send them; through user space)"
            } else {
                ""
            }
        );
    }
}

/// The learning table as `ovs-appctl fdb/show` prints it: each address `normal` knows, the
/// port it was last seen on and how many seconds ago, by port, VLAN and address.
fn fdb_show(bridge: &Bridge) -> String {
    let now = bridge.now();
    let ofproto = bridge.ofproto();
    let table = &ofproto.mac_table;
    let mut entries: Vec<_> = table
        .iter()
        .filter(|(vlan, mac, _)| table.lookup(*vlan, *mac, now).is_some())
        .map(|(vlan, mac, e)| (e.port, vlan, mac.0, now.saturating_sub(e.last_seen)))
        .collect();
    entries.sort_unstable_by_key(|&(port, vlan, mac, _)| (port, vlan, mac));
    let mut out = " port  VLAN  MAC                Age".to_string();
    for (port, vlan, mac, age) in entries {
        let mac = wirespeed_packet::MacAddr(mac);
        let _ = write!(out, "\n{port:>5}  {vlan:>4}  {mac}  {:>3}", age.as_secs());
    }
    out
}

/// The actions `show` lists: OpenFlow 1.0's that the switch carries out.
const SHOWN_ACTIONS: &str = "output set_vlan_vid set_vlan_pcp strip_vlan mod_dl_src mod_dl_dst \
                             mod_nw_src mod_nw_dst mod_nw_tos mod_tp_src mod_tp_dst";

/// The bridge as `ovs-ofctl show` prints one: its features, then each port with its
/// interface's address, state and speed. Then what is ours: each poll-mode thread with what
/// it receives on, in which mode, and its frames.
fn show(bridge: &mut Bridge) -> String {
    let numbers = bridge.numbers().to_vec();
    let snapshots = bridge.snapshots();
    let ports: Vec<(u32, String, LinkState)> = match snapshots.first() {
        Some(s) => numbers
            .iter()
            .zip(&s.ports)
            .enumerate()
            .map(|(i, (&n, (info, _, _)))| {
                let (name, mut link) = interface_of(&info.spec);
                // Another interface may have its name now, not (yet) bound: this one is down.
                if bridge.link(i) == Link::Gone {
                    link = LinkState::default();
                }
                (n, name, link)
            })
            .collect(),
        None => Vec::new(),
    };
    // ovs-vswitchd takes the datapath id from the bridge's address; ours from the first
    // port's, unless OpenFlow was given another (--datapath-id).
    let dpid = bridge.datapath_id().unwrap_or_else(|| {
        ports.iter().find_map(|(_, _, l)| l.mac).map_or(0, |m| {
            m.0.iter().fold(0u64, |id, &b| id << 8 | u64::from(b))
        })
    });
    let mut out = format!(
        "OFPT_FEATURES_REPLY (xid=0x2): dpid:{dpid:016x}\n\
         n_tables:{N_TABLES}, n_buffers:0\n\
         capabilities: FLOW_STATS PORT_STATS ARP_MATCH_IP\n\
         actions: {SHOWN_ACTIONS}"
    );
    let mut ports = ports;
    for tunnel in &bridge.tunnels().ports {
        // As ovs-ofctl shows a tunnel port: a name, no address, always up.
        let name = tunnel.name();
        let link = LinkState {
            admin_up: true,
            carrier: true,
            ..LinkState::default()
        };
        ports.push((tunnel.number, name, link));
    }
    for (n, name, link) in &ports {
        let mac = link.mac.unwrap_or(MacAddr([0; 6]));
        let config = if link.admin_up { "0" } else { "PORT_DOWN" };
        let state = if link.carrier { "0" } else { "LINK_DOWN" };
        let speed = link.speed_mbps.unwrap_or(0);
        let _ = write!(
            out,
            "\n {n}({name}): addr:{mac}\n     config:     {config}\n     state:      {state}\n     \
             speed: {speed} Mbps now, 0 Mbps max"
        );
    }
    let _ = write!(
        out,
        "\nwirespeed switch: {} ports, {} poll-mode threads",
        ports.len(),
        snapshots.len()
    );
    for tunnel in &bridge.tunnels().ports {
        let _ = write!(
            out,
            "\n port {}: {} over port {} ({}, {}, MTU {})",
            tunnel.number,
            tunnel.config,
            tunnel.underlay,
            tunnel.iface,
            tunnel.local_ip,
            tunnel.mtu.get()
        );
    }
    for (i, n) in numbers.iter().enumerate() {
        let link = bridge.link(i);
        if link != Link::Up {
            let _ = write!(
                out,
                "\n port {n}: link {} (what is meant for it is dropped: link_down)",
                link_name(link)
            );
        }
    }
    for (t, snapshot) in snapshots.iter().enumerate() {
        let cpu = snapshot
            .cpu
            .map_or("any CPU".to_string(), |c| format!("CPU {c}"));
        let _ = write!(out, "\n pmd {t} ({cpu}):");
        if let Some(a) = snapshot.audit {
            let _ = write!(out, " UMEM of {} frames ({} free", a.total, a.pool);
            if a.lost > 0 {
                let _ = write!(out, ", {} lost with deleted interfaces", a.lost);
            }
            let _ = write!(out, ");");
        }
        let _ = write!(out, " receives on");
        for (n, (info, stats, receives)) in numbers.iter().zip(&snapshot.ports) {
            if *receives {
                let _ = write!(
                    out,
                    " {n}({}, {} mode, {} pkts)",
                    info.spec, info.mode, stats.rx_packets
                );
            }
        }
    }
    out
}

/// The name `show` gives a port (its interface's, as ovs-ofctl does; the spec for a port on
/// none) and that interface's state.
fn interface_of(spec: &str) -> (String, LinkState) {
    match spec.parse::<PortSpec>() {
        Ok(s) if matches!(s.backend, Backend::Xdp | Backend::Packet | Backend::Tap) => {
            let link = LinkState::of(&s.iface);
            (s.iface, link)
        }
        // A pipe or capture file is up for as long as the port is open.
        _ => (
            spec.to_string(),
            LinkState {
                admin_up: true,
                carrier: true,
                ..LinkState::default()
            },
        ),
    }
}

fn dump_cache(bridge: &Bridge) -> String {
    let mut each = Vec::new();
    let mut megaflows = String::new();
    bridge.each_cache(|cache| {
        each.push(cache.stats);
        for megaflow in cache.megaflows() {
            let _ = write!(megaflows, "\n{}", MegaflowLine(megaflow));
        }
    });
    let mut total = CacheStats::default();
    for stats in &each {
        total.add(stats);
    }
    let mut out = cache_stats_line(&total);
    // Like ovs-appctl dpif-netdev/pmd-stats-show, each thread's share after the sum.
    if each.len() > 1 {
        for (t, stats) in each.iter().enumerate() {
            let _ = write!(out, "\npmd {t}: {}", cache_stats_line(stats));
        }
    }
    if let Some(offload) = &bridge.ofproto().offload {
        match offload.summary() {
            Ok(o) => {
                let _ = write!(
                    out,
                    "\nfast_path: flows={}, installed={}, table_full={}, aged={}, \
                     revalidated={}, port_down={}, flushes={}, stops={}, stopped_classes={}, \
                     errors={}, kernel_hits={}, sent_up={}, stale={}, blocked={}",
                    o.flows,
                    o.installed,
                    o.table_full,
                    o.aged,
                    o.revalidated,
                    o.port_down,
                    o.flushes,
                    o.stops,
                    o.stopped_classes,
                    o.errors,
                    o.kernel.hits,
                    o.kernel.misses,
                    o.kernel.stale,
                    o.kernel.blocked
                );
            }
            Err(e) => {
                let _ = write!(out, "\nfast_path: {e}");
            }
        }
    }
    let learned_rules_dropped = bridge.ofproto().tables.learned.dropped;
    if learned_rules_dropped > 0 {
        let _ = write!(out, "\nlearn: dropped={learned_rules_dropped}");
    }
    if let Some((config, e)) = bridge.flow_export() {
        let _ = write!(
            out,
            "\nipfix: collector={}, domain={}, flows={}, records={}, messages={}, \
             templates={}, send_errors={}, lost_records={}, sampled_out_packets={}, \
             lost_megaflows={}",
            config.collector,
            config.domain,
            e.flows,
            e.records,
            e.messages,
            e.templates,
            e.send_errors,
            e.lost_records,
            e.sampled_out_packets,
            e.lost_megaflows
        );
    }
    out.push_str(&megaflows);
    out
}

fn cache_stats_line(s: &CacheStats) -> String {
    format!(
        "emc_hits={}, megaflow_hits={}, misses={}, flushes={}, stale={}, shared_bursts={}",
        s.emc_hits, s.megaflow_hits, s.misses, s.flushes, s.stale, s.shared_bursts
    )
}

impl Bridge {
    /// Answers one control request with the commands above.
    pub fn handle(&mut self, request: &Request) -> Response {
        self.answer(request, answer_ctl)
    }

    /// [`Bridge::serve`] with the commands above: starts the poll-mode threads and serves
    /// `jobs` until `keep_going` says stop or a thread fails.
    pub fn run(
        &mut self,
        jobs: &Receiver<Work>,
        keep_going: impl FnMut() -> bool,
    ) -> Result<(), PortError> {
        self.serve(jobs, answer_ctl, keep_going)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_words_are_named_not_echoed() {
        let action = format!("actions=output:{}", "9".repeat(1 << 20));
        let clipped = clip_long_words(&format!("{action}: invalid port number"));
        assert_eq!(
            clipped,
            format!(
                "{}...({} bytes) invalid port number",
                &action[..60],
                action.len() + 1
            )
        );
        assert_eq!(clip_long_words("short words stay"), "short words stay");
        // Cut on a character boundary.
        let wide = "é".repeat(150);
        assert!(clip_long_words(&wide).starts_with(&"é".repeat(30)));
    }
}
