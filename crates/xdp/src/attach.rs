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

/// The XDP program attached to `iface` now, as "MODE id N name NAME", if any. Asks
/// iproute2, which every system that has veths has.
pub fn attached_program(iface: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["-d", "-o", "link", "show", "dev", iface])
        .output()
        .ok()?;
    describe_program(&String::from_utf8_lossy(&out.stdout))
}

/// `attached_program` from the text of `ip -d -o link show`. MODE is the word after the MTU
/// (`xdp` native, `xdpgeneric` skb, `xdpoffload`, `xdpmulti` for a native and a generic
/// program at once); the details' `prog/xdp` names the mode only where several are attached
/// (`prog/xdpdrv`, `prog/xdpgeneric`), and is the fallback.
fn describe_program(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let pos = words.iter().position(|w| w.starts_with("prog/xdp"))?;
    let mode = words
        .iter()
        .position(|w| *w == "mtu")
        .and_then(|i| words.get(i + 2))
        .filter(|w| w.starts_with("xdp"))
        // Older iproute2 says "xdpgeneric/id:9" there.
        .map(|w| w.split('/').next().unwrap_or(w))
        .unwrap_or_else(|| words[pos].trim_start_matches("prog/"));
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
        // A capture's spill ring brings a program of its own, which no other process joins.
        Some(h) if existing.ends_with("name xsk_spill") => format!(
            "{iface}: process {} ({}) holds the interface with a capture's spill-ring program \
             ({existing}), which nothing else can join or replace; captures share an \
             interface by queue when each runs with --spill-mib 0",
            h.pid, h.name
        ),
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

#[cfg(test)]
mod tests {
    use super::{Holder, describe_program, foreign_text};

    #[test]
    fn a_spill_ring_s_holder_is_told_how_to_share() {
        let holder = Some(Holder {
            pid: 7,
            name: "wirespeed".to_string(),
        });
        let spill = foreign_text("veth1", "xdp id 5 name xsk_spill", &holder);
        assert!(spill.ends_with("each runs with --spill-mib 0"), "{spill}");
        let other = foreign_text("veth1", "xdp id 5 name other", &holder);
        assert!(other.ends_with("it goes when that process ends"), "{other}");
    }

    #[test]
    fn the_mode_is_the_word_after_the_mtu() {
        let line = |mode: &str, prog: &str| {
            format!(
                "3: v0@v1: <BROADCAST,UP> mtu 1500 {mode} qdisc noqueue state UP\\    \
                 link/ether 8e:91:fd:e2:f7:6d \\    veth numtxqueues 2 \\    {prog} id 24120 \
                 name xsk_redirect tag 548a968b70885879 jited"
            )
        };
        let d = |mode, prog| describe_program(&line(mode, prog));
        assert_eq!(
            d("xdpgeneric", "prog/xdp").as_deref(),
            Some("xdpgeneric id 24120 name xsk_redirect")
        );
        assert_eq!(
            d("xdp", "prog/xdp").as_deref(),
            Some("xdp id 24120 name xsk_redirect")
        );
        assert_eq!(
            d("xdpmulti", "prog/xdpdrv").as_deref(),
            Some("xdpmulti id 24120 name xsk_redirect")
        );
        let none = "3: v0@v1: <UP> mtu 1500 qdisc noqueue state UP";
        assert_eq!(describe_program(none), None);
        // An older iproute2 without the word: the details' own.
        let bare = "3: v0: <UP> mtu 1500 qdisc noqueue \\ prog/xdpgeneric id 9";
        assert_eq!(describe_program(bare).as_deref(), Some("xdpgeneric id 9"));
    }
}
