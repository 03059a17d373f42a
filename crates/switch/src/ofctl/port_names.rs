//! Ports named in a flow's text, as ovs-ofctl takes them: `in_port=veth1`, `out_port=veth1`,
//! `output:veth2` and a bare `veth2` among the actions stand for the ports' numbers. The
//! names are numbered in the text before it is parsed, so the parsers deal in numbers only.
//! A port's name is its interface's (its spec where it has none), or a tunnel port's name,
//! as OpenFlow's PORT_DESC gives them.

use std::collections::HashMap;

use crate::error::{FlowError, error};
use crate::field::parse_uint;
use crate::ofctl::action_parse::{ONE_WORD_ACTIONS, split_top_level};
use crate::ofctl::flow_parse::split_actions;
use crate::openflow::stats::port_name_of;
use crate::tunnel::TunnelKind;
use crate::tunnel::port_name;

/// The bridge's ports by name.
#[derive(Debug, Clone, Default)]
pub struct PortNames {
    /// Each name's ports (two when two ports share an interface, on different queues).
    by_name: HashMap<String, Vec<u32>>,
}

impl PortNames {
    /// `ports`: each port's name and number.
    pub fn new(ports: impl IntoIterator<Item = (String, u32)>) -> PortNames {
        let mut by_name: HashMap<String, Vec<u32>> = HashMap::new();
        for (name, number) in ports {
            by_name.entry(name).or_default().push(number);
        }
        PortNames { by_name }
    }

    /// The names of a bridge's ports: `devices`, each port's number and spec; `tunnels`,
    /// each tunnel port's number and kind.
    pub fn of_bridge<'a>(
        devices: impl IntoIterator<Item = (u32, &'a str)>,
        tunnels: impl IntoIterator<Item = (u32, TunnelKind)>,
    ) -> PortNames {
        let devices = devices
            .into_iter()
            .map(|(number, spec)| (port_name_of(spec), number));
        let tunnels = tunnels
            .into_iter()
            .map(|(number, kind)| (port_name(kind, number), number));
        PortNames::new(devices.chain(tunnels))
    }

    /// The ports named `name` (none, one, or one a queue where ports share an interface).
    pub fn numbers_of(&self, name: &str) -> &[u32] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// `text` (a flow, a match, or lines of flows) with every port name in it numbered;
    /// a name no port has is refused, naming it.
    pub fn number_in(&self, text: &str) -> Result<String, FlowError> {
        self.each_line(text, Self::number_line)
    }

    /// `text` (a group, or lines of groups, in `add-group`'s syntax) with every port name
    /// in its buckets numbered: `watch_port:NAME`, and their actions' as a flow's are.
    pub fn number_in_groups(&self, text: &str) -> Result<String, FlowError> {
        self.each_line(text, Self::number_group)
    }

    /// `text` with each line numbered by `number` (as it was where the bridge has no names).
    fn each_line(
        &self,
        text: &str,
        number: fn(&Self, &str) -> Result<String, FlowError>,
    ) -> Result<String, FlowError> {
        if self.by_name.is_empty() {
            return Ok(text.to_string());
        }
        let lines: Result<Vec<String>, FlowError> =
            text.split('\n').map(|line| number(self, line)).collect();
        Ok(lines?.join("\n"))
    }

    fn number_group(&self, line: &str) -> Result<String, FlowError> {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(line.to_string());
        }
        let mut out = Vec::new();
        for token in split_top_level(trimmed)? {
            // `bucket=` and `actions=` lead into a token without changing what it is.
            let mut rest = token;
            let mut lead = String::new();
            for prefix in ["bucket=", "actions=", "action="] {
                if let Some(after) = rest.strip_prefix(prefix) {
                    lead.push_str(prefix);
                    rest = after;
                }
            }
            let numbered = match rest.find(['=', ':']).map(|at| rest.split_at(at)) {
                Some(("watch_port", value)) if is_name(&value[1..]) => {
                    format!(
                        "watch_port{}{}",
                        &value[..1],
                        self.number(token, &value[1..])?
                    )
                }
                _ => self.number_actions(rest)?,
            };
            out.push(format!("{lead}{numbered}"));
        }
        Ok(out.join(","))
    }

    fn number_line(&self, line: &str) -> Result<String, FlowError> {
        // Comments and blank lines stay as they are (the parser skips them).
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(line.to_string());
        }
        let (match_text, actions) = match split_actions(line) {
            Some((m, a)) => (m, Some(a)),
            None => (line, None),
        };
        let mut out = self.number_match(match_text)?;
        if let Some(actions) = actions {
            out.push_str("actions=");
            out.push_str(&self.number_actions(actions)?);
        }
        Ok(out)
    }

    /// The match, its separators kept: `in_port=NAME` and `out_port=NAME` numbered.
    fn number_match(&self, text: &str) -> Result<String, FlowError> {
        let mut out = String::with_capacity(text.len());
        let mut token = String::new();
        let flush = |token: &mut String, out: &mut String| -> Result<(), FlowError> {
            let numbered = match token.split_once('=') {
                Some((key @ ("in_port" | "out_port"), value)) if is_name(value) => {
                    format!("{key}={}", self.number(token, value)?)
                }
                _ => token.clone(),
            };
            out.push_str(&numbered);
            token.clear();
            Ok(())
        };
        for c in text.chars() {
            if c == ',' || c.is_whitespace() {
                flush(&mut token, &mut out)?;
                out.push(c);
            } else {
                token.push(c);
            }
        }
        flush(&mut token, &mut out)?;
        Ok(out)
    }

    /// The actions: `output:NAME` and a bare `NAME` numbered, inside `write_actions(...)`
    /// too.
    fn number_actions(&self, text: &str) -> Result<String, FlowError> {
        let tokens = split_top_level(text.trim())?;
        let mut out = Vec::with_capacity(tokens.len());
        for token in tokens {
            let numbered = if let Some(inner) = token
                .strip_prefix("write_actions(")
                .and_then(|rest| rest.strip_suffix(')'))
            {
                format!("write_actions({})", self.number_actions(inner)?)
            } else if let Some(port) = token
                .strip_prefix("output:")
                .filter(|port| is_name(port) && !port.contains('['))
                .filter(|port| !ONE_WORD_ACTIONS.contains(&port.to_ascii_lowercase().as_str()))
            {
                format!("output:{}", self.number(token, port)?)
            } else if is_name(token)
                && !token.contains([':', '(', '['])
                && !ONE_WORD_ACTIONS.contains(&token.to_ascii_lowercase().as_str())
                && self.by_name.contains_key(token)
            {
                self.number(token, token)?.to_string()
            } else {
                token.to_string()
            };
            out.push(numbered);
        }
        Ok(out.join(","))
    }

    /// The number of the port `name` (in `token`, for the message).
    fn number(&self, token: &str, name: &str) -> Result<u32, FlowError> {
        match self.by_name.get(name).map(Vec::as_slice) {
            Some([number]) => Ok(*number),
            Some(numbers) => {
                let list: Vec<String> = numbers.iter().map(u32::to_string).collect();
                Err(error(format!(
                    "{token}: {name} names ports {}: give the number",
                    list.join(" and ")
                )))
            }
            None => {
                let mut known: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
                known.sort_unstable();
                Err(error(format!(
                    "{token}: no port is named {name} (the ports: {})",
                    known.join(", ")
                )))
            }
        }
    }
}

/// A value that can only be a name: not empty, not a number, no mask.
fn is_name(value: &str) -> bool {
    !value.is_empty() && parse_uint(value).is_none() && !value.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> PortNames {
        PortNames::new([
            ("veth1".to_string(), 1),
            ("veth2".to_string(), 2),
            ("vxlan10".to_string(), 10),
            ("shared".to_string(), 3),
            ("shared".to_string(), 4),
        ])
    }

    #[test]
    fn names_in_groups_become_numbers() {
        let n = names();
        for (text, want) in [
            (
                "group_id=1,type=select,bucket=output:veth1,bucket=weight:2,veth2",
                "group_id=1,type=select,bucket=output:1,bucket=weight:2,2",
            ),
            (
                "group_id=2,type=ff,bucket=watch_port:veth1,output:veth1,\
                 bucket=watch_port=veth2,actions=mod_vlan_vid:5,output:vxlan10",
                "group_id=2,type=ff,bucket=watch_port:1,output:1,\
                 bucket=watch_port=2,actions=mod_vlan_vid:5,output:10",
            ),
            // Numbers and other settings as they were; each line on its own.
            (
                "# groups\ngroup_id=3,type=all,bucket=output:4,bucket=watch_port:3,output:NORMAL",
                "# groups\ngroup_id=3,type=all,bucket=output:4,bucket=watch_port:3,output:NORMAL",
            ),
        ] {
            assert_eq!(n.number_in_groups(text).unwrap(), want, "{text}");
        }
        let unknown = n
            .number_in_groups("group_id=1,type=all,bucket=output:eth9")
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("no port is named eth9"), "{unknown}");
        let shared = n
            .number_in_groups("group_id=1,type=ff,bucket=watch_port:shared,output:1")
            .unwrap_err()
            .to_string();
        assert!(shared.contains("names ports 3 and 4"), "{shared}");
    }

    #[test]
    fn names_become_numbers_where_ports_go() {
        let n = names();
        for (text, want) in [
            (
                "priority=5,in_port=veth1,ip actions=output:veth2,vxlan10",
                "priority=5,in_port=1,ip actions=output:2,10",
            ),
            ("in_port=2,actions=veth1", "in_port=2,actions=1"),
            ("out_port=veth2", "out_port=2"),
            (
                "actions=write_actions(output:veth2),normal,output:NORMAL,output:NXM_NX_REG0[0..15]",
                "actions=write_actions(output:2),normal,output:NORMAL,output:NXM_NX_REG0[0..15]",
            ),
            // Numbers, masks and the rest as they were; each line of a file on its own.
            (
                "in_port=0x1/0xff,dl_type=0x800,actions=mod_vlan_vid:10,resubmit(,1),2",
                "in_port=0x1/0xff,dl_type=0x800,actions=mod_vlan_vid:10,resubmit(,1),2",
            ),
            (
                "# ports\nin_port=veth1,actions=veth2\n\nin_port=veth2,actions=veth1",
                "# ports\nin_port=1,actions=2\n\nin_port=2,actions=1",
            ),
            // A comment may name anything.
            (
                "  # old uplink: in_port=eth9,actions=(\nactions=veth1",
                "  # old uplink: in_port=eth9,actions=(\nactions=1",
            ),
        ] {
            assert_eq!(n.number_in(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn an_unknown_or_shared_name_is_refused_naming_it() {
        let n = names();
        assert_eq!(
            n.number_in("in_port=veth9,actions=drop")
                .unwrap_err()
                .to_string(),
            "in_port=veth9: no port is named veth9 (the ports: shared, veth1, veth2, vxlan10)"
        );
        assert_eq!(
            n.number_in("actions=output:shared")
                .unwrap_err()
                .to_string(),
            "output:shared: shared names ports 3 and 4: give the number"
        );
        // A bare word no port has is left to the action parser (a misspelt action).
        assert_eq!(n.number_in("actions=flod").unwrap(), "actions=flod");
        // Without ports, nothing is looked at.
        let none = PortNames::default();
        assert_eq!(
            none.number_in("in_port=veth1,actions=x").unwrap(),
            "in_port=veth1,actions=x"
        );
    }
}
