//! `wirespeed ctl`'s group commands, in ovs-ofctl's words: `add-group`, `add-groups`,
//! `mod-group`, `del-groups`, `dump-groups` and `dump-group-stats`, over the same groups as
//! OpenFlow's GROUP_MOD.

use crate::bridge::commands::added;
use crate::bridge::control::Response;
use crate::bridge::{Bridge, RemovedReason};
use crate::ofctl::flow_parse::parse_lines;
use crate::ofctl::group_text::{group_line, group_stats_line, parse_group, parse_group_selector};
use crate::ofctl::port_names::PortNames;
use crate::ofproto::state::OutputPorts;

/// The group commands, for `--help` and the answer to an unknown command.
pub const GROUP_COMMANDS: &str = "add-group GROUP, add-groups FILE, mod-group GROUP, \
                                  del-groups [group_id=ID], dump-groups [group_id=ID], \
                                  dump-group-stats [group_id=ID]";

/// Runs group command `command` with its argument, or None if it is not one. Ports its
/// buckets name (`output:veth2`, `watch_port:veth2`) are numbered by `names` first, as
/// ovs-ofctl does; messages quote the group as typed.
pub fn run(bridge: &mut Bridge, command: &str, arg: &str, names: &PortNames) -> Option<Response> {
    if !matches!(
        command,
        "add-group"
            | "add-groups"
            | "mod-group"
            | "del-groups"
            | "dump-groups"
            | "dump-group-stats"
    ) {
        return None;
    }
    if command == "add-groups" {
        return Some(add_groups(bridge, arg, names));
    }
    if matches!(command, "add-group" | "mod-group") {
        let group = match names.number_in_groups(arg).and_then(|t| parse_group(&t)) {
            Ok(group) => group,
            Err(e) => return Some(Response::error(format!("{arg}: {e}"))),
        };
        let (replace, now) = (command == "mod-group", bridge.now());
        return Some(
            match bridge.edit(|dp| dp.set_group(group, replace, OutputPorts::Present, now)) {
                Ok(()) => Response::ok(""),
                Err(e) => Response::error(format!("{arg}: {e}")),
            },
        );
    }
    let only = match parse_group_selector(arg) {
        Ok(only) => only,
        Err(e) => return Some(Response::error(format!("{arg}: {e}"))),
    };
    let now = bridge.now();
    Some(match command {
        "del-groups" => {
            let removed = bridge.edit(|dp| dp.delete_groups(only, now));
            let n = removed.len();
            bridge.tell_removed(removed, RemovedReason::GroupDelete, now);
            // OpenFlow's rule, which surprises: say so when it happened.
            Response::ok(match n {
                0 => String::new(),
                n => format!("flows deleted with the group: {n}"),
            })
        }
        "dump-groups" => {
            let dp = bridge.ofproto();
            let lines: Vec<String> = dp
                .tables
                .groups()
                .filter(|g| only.is_none_or(|id| id == g.id))
                .map(group_line)
                .collect();
            Response::ok(lines.join("\n"))
        }
        _ => {
            let lines: Vec<String> = bridge
                .edit(|dp| dp.group_stats(only, now))
                .iter()
                .map(|(group, usage)| group_stats_line(group, usage))
                .collect();
            Response::ok(lines.join("\n"))
        }
    })
}

/// `add-groups FILE` (the file's text): its groups, one a line, all or none; a refusal
/// names the line, as `add-flows` does.
fn add_groups(bridge: &mut Bridge, text: &str, names: &PortNames) -> Response {
    let numbered = names.number_in_groups(text);
    let groups = match numbered.and_then(|text| parse_lines(&text, parse_group)) {
        Ok(groups) => groups,
        Err(e) => return Response::error(e.to_string()),
    };
    let (n, now) = (groups.len(), bridge.now());
    bridge.edit(|dp| {
        dp.begin_undo();
        for (line, group) in groups {
            if let Err(e) = dp.set_group(group, false, OutputPorts::Present, now) {
                dp.tables.roll_back();
                return Response::error(format!("line {line}: {e}"));
            }
        }
        dp.tables.keep();
        Response::ok(added(n, "group"))
    })
}
