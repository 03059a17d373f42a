//! `--meters`, `--groups` and `--flows`: the files read and parsed, checked on an empty
//! bridge of the same ports before anything is opened, and loaded once the bridge is up.

use std::path::PathBuf;

use anyhow::Context;
use wirespeed_switch::Bridge;
use wirespeed_switch::bridge::start_tables::{StartError, StartFile, StartTables};
use wirespeed_switch::ofctl::port_names::PortNames;

use super::SwitchArgs;

/// The three files, parsed (an empty set where none is given); the flows may name the
/// ports `names` has.
pub fn read(args: &SwitchArgs, names: &PortNames) -> anyhow::Result<StartTables> {
    let text = |file| -> anyhow::Result<Option<String>> {
        let Some(path) = path_of(args, file) else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{} {}", flag(file), path.display()))?;
        Ok(Some(text))
    };
    let (meters, groups, flows) = (
        text(StartFile::Meters)?,
        text(StartFile::Groups)?,
        text(StartFile::Flows)?,
    );
    StartTables::parse(
        meters.as_deref(),
        groups.as_deref(),
        flows.as_deref(),
        names,
    )
    .map_err(|e| in_file(args, e))
}

/// What a bridge of `ports` would refuse of them, before it is opened.
pub fn check(args: &SwitchArgs, tables: &StartTables, ports: &[u32]) -> anyhow::Result<()> {
    tables.check(ports).map_err(|e| in_file(args, e))
}

/// Into the bridge: meters, groups, then flows.
pub fn load(args: &SwitchArgs, tables: &StartTables, bridge: &mut Bridge) -> anyhow::Result<()> {
    let now = bridge.now();
    bridge
        .edit(|dp| tables.load(dp, now))
        .map_err(|e| in_file(args, e))
}

fn flag(file: StartFile) -> &'static str {
    match file {
        StartFile::Meters => "--meters",
        StartFile::Groups => "--groups",
        StartFile::Flows => "--flows",
    }
}

fn path_of(args: &SwitchArgs, file: StartFile) -> Option<&PathBuf> {
    match file {
        StartFile::Meters => args.meters.as_ref(),
        StartFile::Groups => args.groups.as_ref(),
        StartFile::Flows => args.flows.as_ref(),
    }
}

/// The refusal, after the flag and file it is about: `--groups g.txt: line 3: ...`.
fn in_file(args: &SwitchArgs, e: StartError) -> anyhow::Error {
    let path = path_of(args, e.file).map_or(String::new(), |p| p.display().to_string());
    anyhow::anyhow!("{} {path}: {e}", flag(e.file))
}
