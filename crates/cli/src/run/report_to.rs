//! Where a tool's closing report goes: standard output, unless a port records its packets
//! there (`pcap:-`); then standard error, so the recording stays a valid file.

use std::io::Write;

use anyhow::bail;
use wirespeed_port::PortSpec;

/// Checks that at most one of a tool's ports reads standard input and one writes standard
/// output, before any opens (a recording writes its header at once); true when one writes
/// it, so the report goes to standard error. `rx` and `tx`: the tool receives and sends.
pub fn check_std_streams(specs: &[&PortSpec], rx: bool, tx: bool) -> anyhow::Result<bool> {
    let streams: Vec<(bool, bool)> = specs.iter().map(|s| s.std_streams(rx, tx)).collect();
    let readers = streams.iter().filter(|s| s.0).count();
    let writers = streams.iter().filter(|s| s.1).count();
    if readers > 1 {
        bail!("{readers} ports read standard input ('-'); one at most can");
    }
    if writers > 1 {
        bail!("{writers} ports write standard output ('-'); one at most can");
    }
    Ok(writers == 1)
}

/// Writes `text` to standard output, or to standard error when `to_stderr`.
pub fn report(text: &str, to_stderr: bool) {
    // A closed pipe downstream is no reason to fail the run that was measured.
    let _ = match to_stderr {
        true => std::io::stderr().lock().write_all(text.as_bytes()),
        false => std::io::stdout().lock().write_all(text.as_bytes()),
    };
}
