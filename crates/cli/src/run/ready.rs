//! The ready line a port-opening command prints once set-up is done (scripts and tests wait
//! for the word "ready"), with the port's notes after it.

use wirespeed_port::PortInfo;

/// `wirespeed TOOL: SPEC ready (BACKEND backend, MODE mode, batch N[, EXTRA])`, then one
/// line per note the port has about how it opened.
pub fn announce_ready(tool: &str, info: &PortInfo, batch: u32, extra: Option<&str>) {
    let mut extra = extra.map(|e| format!(", {e}")).unwrap_or_default();
    extra.push_str(&multi_buffer_text(info));
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

/// `, multi-buffer: packets of up to N frames` for a port that takes packets larger than a
/// frame, else nothing: a part of every ready line.
pub fn multi_buffer_text(info: &PortInfo) -> String {
    info.multi_buffer
        .map(|n| format!(", multi-buffer: packets of up to {n} frames"))
        .unwrap_or_default()
}
