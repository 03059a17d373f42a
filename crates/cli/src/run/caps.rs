//! Which capabilities the process has, so a missing one is named before anything is set up.

use wirespeed_port::Backend;

/// Linux capability numbers (linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

fn effective() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
}

/// What `what` on ports of these backends needs: AF_XDP loads a BPF program; AF_PACKET and
/// tap need a raw socket or a device; pipes and capture files are files and need nothing.
pub fn require_for(what: &str, backends: &[Backend]) -> anyhow::Result<()> {
    if !backends.iter().any(|b| b.has_interface()) {
        return Ok(());
    }
    require(what, backends.contains(&Backend::Xdp))
}

/// The capabilities `what` needs that this process lacks, as an error naming them.
pub fn require(what: &str, needs_bpf: bool) -> anyhow::Result<()> {
    let eff = effective();
    let has = |c: u32| eff & (1u64 << c) != 0;
    let mut missing = Vec::new();
    if !has(CAP_NET_RAW) {
        missing.push("CAP_NET_RAW");
    }
    if needs_bpf {
        if !has(CAP_NET_ADMIN) {
            missing.push("CAP_NET_ADMIN");
        }
        if !has(CAP_BPF) && !has(CAP_SYS_ADMIN) {
            missing.push("CAP_BPF");
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "{what} needs {} which this process does not have; run it as root (sudo) or grant them \
         (setcap cap_net_raw,cap_net_admin,cap_bpf+ep)",
        missing.join(", ")
    )
}
