//! The MAC address a command sends from: an interface's, or a stable made-up one.

use anyhow::Context;
use wirespeed_packet::MacAddr;
use wirespeed_port::PortSpec;

/// The source MAC address of frames sent on `spec`: its interface's, or for a port with no
/// interface (a pipe, capture files), a locally administered one made from the spec's place
/// (02:77:73 and three bytes of its hash), the same every run.
pub fn port_mac(spec: &PortSpec) -> anyhow::Result<MacAddr> {
    if spec.backend.has_interface() {
        return interface_mac(&spec.iface);
    }
    // FNV-1a: stable across runs and builds, unlike std's hasher.
    let hash = spec.iface.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let [_, x, y, z] = hash.to_be_bytes();
    Ok(MacAddr([0x02, 0x77, 0x73, x, y, z]))
}

/// The MAC address of an interface, from sysfs.
pub fn interface_mac(iface: &str) -> anyhow::Result<MacAddr> {
    let path = format!("/sys/class/net/{iface}/address");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        // Said as every tool's port says it (the file's absence is how it shows).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("{iface}: no such interface")
        }
        Err(e) => return Err(e).with_context(|| format!("{iface}: read {path}")),
    };
    text.trim()
        .parse()
        .map_err(|e| anyhow::anyhow!("{iface}: cannot read its MAC address from {path}: {e:?}"))
}
