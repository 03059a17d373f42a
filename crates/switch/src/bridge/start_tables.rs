//! What a switch is given to start with: files of meters, groups and flows (`switch
//! --meters`, `--groups`, `--flows`), one a line in ovs-ofctl's syntax. They load in that
//! order, so a flow can name a group or a meter of the files and a group's buckets are
//! checked against the bridge's ports. The same load runs twice: on an empty bridge of the
//! same ports before anything is opened (a refused start must leave nothing behind), then on
//! the bridge itself.

use crate::openflow::reply::{RULE_TOO_LONG, dumpable_rule};
use core::fmt;
use core::time::Duration;

use crate::action::Action;
use crate::error::{FlowError, error};
use crate::group::{Group, GroupError};
use crate::meter::{MeterConfig, MeterError};
use crate::ofctl::flow_parse::{parse_flow_lines, parse_lines};
use crate::ofctl::group_text::parse_group;
use crate::ofctl::meter_text::parse_meter;
use crate::ofctl::port_names::PortNames;
use crate::ofproto::state::{Ofproto, OutputPorts, check_output_ports};
use crate::rule::Rule;

/// The files a switch starts with, parsed; each item with its line.
#[derive(Clone, Debug, Default)]
pub struct StartTables {
    pub meters: Vec<(usize, MeterConfig)>,
    pub groups: Vec<(usize, Group)>,
    pub flows: Vec<(usize, Rule)>,
}

/// Which file a refusal is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StartFile {
    Meters,
    Groups,
    Flows,
}

/// Why the files cannot start a switch: the file, and what is wrong (naming the line).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StartError {
    pub file: StartFile,
    pub message: String,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StartError {}

impl StartTables {
    /// Parses the files' texts (None: no such file given); the flows and the groups'
    /// buckets may name the ports `names` has.
    pub fn parse(
        meters: Option<&str>,
        groups: Option<&str>,
        flows: Option<&str>,
        names: &PortNames,
    ) -> Result<StartTables, StartError> {
        let refused = |file| move |e: FlowError| StartError::new(file, e.to_string());
        Ok(StartTables {
            meters: parse_lines(meters.unwrap_or(""), parse_meter)
                .map_err(refused(StartFile::Meters))?,
            groups: names
                .number_in_groups(groups.unwrap_or(""))
                .and_then(|groups| parse_lines(&groups, parse_group))
                .map_err(refused(StartFile::Groups))?,
            flows: names
                .number_in(flows.unwrap_or(""))
                .and_then(|flows| parse_flow_lines(&flows))
                .map_err(refused(StartFile::Flows))?,
        })
    }

    /// Loads them into an empty bridge with `ports`, to find what the real one would refuse.
    pub fn check(&self, ports: &[u32]) -> Result<(), StartError> {
        let mut dp = Ofproto::new();
        for &port in ports {
            dp.add_port(port);
        }
        self.load(&mut dp, Duration::ZERO)
    }

    /// Meters, then groups, then flows into `dp`; the first refusal stops it.
    pub fn load(&self, dp: &mut Ofproto, now: Duration) -> Result<(), StartError> {
        for (line, meter) in &self.meters {
            dp.tables
                .set_meter(*meter, false, now)
                .map_err(|e| match e {
                    MeterError::Exists => format!("line {line}: meter {} is given twice", meter.id),
                    e => format!("line {line}: {e}"),
                })
                .map_err(|e| StartError::new(StartFile::Meters, e))?;
        }
        for (line, group) in &self.groups {
            let id = group.id;
            dp.set_group(group.clone(), false, OutputPorts::Present, now)
                .map_err(|e| match e {
                    GroupError::Exists => format!("line {line}: group_id={id} is given twice"),
                    e => format!("line {line}: {e}"),
                })
                .map_err(|e| StartError::new(StartFile::Groups, e))?;
        }
        for (line, rule) in &self.flows {
            check_names(dp, &rule.actions)
                .map_err(|e| StartError::new(StartFile::Flows, format!("line {line}: {e}")))?;
            if !dumpable_rule(&rule.flow_match, &rule.actions) {
                let why = format!("line {line}: {RULE_TOO_LONG}");
                return Err(StartError::new(StartFile::Flows, why));
            }
        }
        for (_, rule) in &self.flows {
            dp.tables.add(rule.clone(), now);
        }
        Ok(())
    }
}

/// That a flow's ports are the bridge's, and its groups and meters those of the files.
fn check_names(dp: &Ofproto, actions: &[Action]) -> Result<(), FlowError> {
    check_output_ports(dp.ports(), actions)?;
    for action in actions {
        match action {
            Action::Group(id) if dp.tables.group(*id).is_none() => {
                return Err(error(format!(
                    "{action}: no such group (--groups FILE defines groups at start)"
                )));
            }
            Action::Meter(id) if dp.tables.meter(*id).is_none() => {
                return Err(error(format!(
                    "{action}: no such meter (--meters FILE defines meters at start)"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

impl StartError {
    fn new(file: StartFile, message: String) -> StartError {
        StartError { file, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(meters: &str, groups: &str, flows: &str) -> StartError {
        StartTables::parse(
            Some(meters),
            Some(groups),
            Some(flows),
            &PortNames::default(),
        )
        .and_then(|t| t.check(&[1, 2]))
        .expect_err("refused")
    }

    #[test]
    fn flows_name_the_groups_and_meters_of_the_files() {
        let tables = StartTables::parse(
            Some("# rates\nmeter=1,pktps,bands=type=drop,rate=100\n"),
            Some("group_id=5,type=select,bucket=output:1,bucket=output:2\n\n"),
            Some("in_port=1,actions=meter:1,group:5\nin_port=veth2,actions=output:1"),
            &PortNames::new([("veth2".to_string(), 2)]),
        )
        .unwrap();
        assert_eq!(
            (tables.meters[0].0, tables.groups[0].0, tables.flows[1].0),
            (2, 1, 2),
            "each item keeps its line"
        );
        tables.check(&[1, 2]).unwrap();
        let mut dp = Ofproto::new();
        dp.add_port(1);
        dp.add_port(2);
        tables.load(&mut dp, Duration::ZERO).unwrap();
        assert!(dp.tables.group(5).is_some() && dp.tables.meter(1).is_some());
        assert_eq!(dp.tables.len(), 3, "the two flows beside normal's");
    }

    #[test]
    fn a_refusal_names_its_file_and_line() {
        let cases = [
            (
                refusal("meter=1,pktps,bands=type=drop,rate=0", "", ""),
                StartFile::Meters,
                "line 1: a band's rate must be above 0",
            ),
            (
                refusal("meter=1\nmeter=1", "", ""),
                StartFile::Meters,
                "line 2: meter 1 is given twice",
            ),
            (
                refusal("", "group_id=1,type=all,bucket=output:3", ""),
                StartFile::Groups,
                "line 1: output:3: no such port (the bridge has ports 1, 2)",
            ),
            (
                refusal(
                    "",
                    "group_id=1,type=all,bucket=output:1\n#\ngroup_id=1,type=all,bucket=output:2",
                    "",
                ),
                StartFile::Groups,
                "line 3: group_id=1 is given twice",
            ),
            (
                refusal("", "group_id=1,type=all", "in_port=1,actions=group:2"),
                StartFile::Flows,
                "line 1: group:2: no such group (--groups FILE defines groups at start)",
            ),
            (
                refusal("", "", "in_port=1,actions=meter:4,output:2"),
                StartFile::Flows,
                "line 1: meter:4: no such meter (--meters FILE defines meters at start)",
            ),
        ];
        for (error, file, message) in cases {
            assert_eq!((error.file, error.message.as_str()), (file, message));
        }
    }

    /// A flow or group no OpenFlow reply could hold is refused here as over OpenFlow.
    #[test]
    fn flows_and_groups_too_long_to_dump_are_refused() {
        let outputs = ["output:1"; 5000].join(",");
        let flow = refusal("", "", &format!("#\nin_port=2,actions={outputs}"));
        assert_eq!(
            (flow.file, flow.message),
            (StartFile::Flows, format!("line 2: {RULE_TOO_LONG}"))
        );
        let buckets = ["bucket=output:1"; 5000].join(",");
        let group = refusal("", &format!("group_id=1,type=all,{buckets}"), "");
        assert_eq!(group.file, StartFile::Groups);
        assert!(
            group.message.starts_with("line 1: too many buckets"),
            "{}",
            group.message
        );
    }
}
