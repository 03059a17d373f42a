//! Attaching our programs to an interface without clobbering anyone else's.

use std::process::Command;

use aya::programs::{ProgramError, Xdp, XdpMode, xdp::XdpLinkId};

use crate::{XdpError, error_chain};

/// Where in the receive path the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (native XDP).
    Native,
    /// After the stack allocated an skb (generic XDP): works on every interface, slower.
    Skb,
}

impl AttachMode {
    pub fn name(self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Skb => "skb",
        }
    }

    fn aya(self) -> XdpMode {
        match self {
            AttachMode::Native => XdpMode::Driver,
            AttachMode::Skb => XdpMode::Skb,
        }
    }
}

/// The XDP program attached to `iface` now, as "id N name NAME mode M", if any. Asks
/// iproute2, which every system that has veths has.
pub fn attached_program(iface: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["-d", "-o", "link", "show", "dev", iface])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    let pos = words.iter().position(|w| w.starts_with("prog/xdp"))?;
    let mode = words[pos].trim_start_matches("prog/");
    let id = words
        .get(pos + 1..pos + 3)
        .map(|w| w.join(" "))
        .unwrap_or_default();
    let name = words
        .iter()
        .skip(pos)
        .position(|w| *w == "name")
        .and_then(|i| words.get(pos + i + 1))
        .map(|n| format!(" name {n}"))
        .unwrap_or_default();
    Some(format!("{mode} {id}{name}").trim().to_string())
}

/// A process holding an XDP program on an interface by a BPF link: its pid and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub name: String,
}

/// Who holds the program `existing` (as `attached_program` gives it) by a BPF link, found
/// by the link's fdinfo in /proc (a program id is the same in every namespace). None for
/// a program attached by netlink, which `--force` can replace.
pub(crate) fn link_holder(existing: &str) -> Option<Holder> {
    let mut words = existing.split_whitespace();
    words.find(|w| *w == "id")?;
    let id = words.next()?;
    let wanted = format!("prog_id:\t{id}\n");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let is_link =
                std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:bpf_link");
            if !is_link {
                continue;
            }
            let info = entry.path().join("fdinfo").join(fd.file_name());
            let text = std::fs::read_to_string(info).unwrap_or_default();
            if text.contains("link_type:\txdp\n") && text.contains(&wanted) {
                let name = std::fs::read_to_string(entry.path().join("comm"))
                    .map_or_else(|_| "?".to_string(), |c| c.trim().to_string());
                return Some(Holder { pid, name });
            }
        }
    }
    None
}

/// What `XdpError::ForeignProgram` says: the way out depends on who holds the program.
pub(crate) fn foreign_text(iface: &str, existing: &str, holder: &Option<Holder>) -> String {
    match holder {
        Some(h) => format!(
            "{iface}: process {} ({}) holds an XDP program there ({existing}) by a BPF \
             link, which nothing else can replace; it goes when that process ends",
            h.pid, h.name
        ),
        None => format!(
            "{iface}: another XDP program is attached ({existing}); wirespeed will not replace \
             it (detach it, or pass --force)"
        ),
    }
}

/// Attaches `prog` to `iface`. When another program is there: with `force`, remove it first
/// (netlink-attached programs only; a BPF link someone holds cannot be taken away); without,
/// fail with `ForeignProgram`.
pub(crate) fn attach(
    prog: &mut Xdp,
    name: &'static str,
    iface: &str,
    mode: AttachMode,
    force: bool,
) -> Result<XdpLinkId, XdpError> {
    let existing = attached_program(iface);
    if let Some(existing) = existing {
        let holder = link_holder(&existing);
        if !force || holder.is_some() {
            return Err(XdpError::ForeignProgram {
                iface: iface.to_string(),
                existing,
                holder,
            });
        }
        remove_foreign(iface, &existing)?;
    }
    prog.attach(iface, mode.aya()).map_err(|e| match &e {
        ProgramError::UnknownInterface { .. } => XdpError::NoInterface(iface.to_string()),
        ProgramError::SyscallError(s) if s.io_error.raw_os_error() == Some(libc::EBUSY) => {
            let existing = attached_program(iface).unwrap_or_else(|| "unknown".to_string());
            XdpError::ForeignProgram {
                iface: iface.to_string(),
                holder: link_holder(&existing),
                existing,
            }
        }
        _ => XdpError::Attach {
            iface: iface.to_string(),
            program: name,
            mode: mode.name(),
            reason: error_chain(&e),
        },
    })
}

fn remove_foreign(iface: &str, existing: &str) -> Result<(), XdpError> {
    for kind in ["xdpgeneric", "xdpdrv", "xdpoffload"] {
        let _ = Command::new("ip")
            .args(["link", "set", "dev", iface, kind, "off"])
            .output();
    }
    match attached_program(iface) {
        None => Ok(()),
        Some(_) => Err(XdpError::ForceFailed {
            iface: iface.to_string(),
            existing: existing.to_string(),
            reason: "it is held by a BPF link of another process; stop that process".to_string(),
        }),
    }
}
