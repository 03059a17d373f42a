//! The ready line a port-opening command prints once set-up is done (scripts and tests wait
//! for the word "ready"), with the port's notes after it.

use wirespeed_port::PortInfo;

/// `wirespeed TOOL: SPEC ready (BACKEND backend, MODE mode, batch N[, EXTRA])`, then one
/// line per note the port has about how it opened.
pub fn announce_ready(tool: &str, info: &PortInfo, batch: u32, extra: Option<&str>) {
    let mut extra = extra.map(|e| format!(", {e}")).unwrap_or_default();
    if let Some(n) = info.multi_buffer {
        extra.push_str(&format!(", multi-buffer: packets of up to {n} frames"));
    }
    eprintln!(
        "wirespeed {tool}: {} ready ({} backend, {} mode, batch {batch}{extra})",
        info.spec,
        info.backend.name(),
        info.mode
    );
    for n in &info.notes {
        eprintln!("wirespeed: note: {n}");
    }
}
