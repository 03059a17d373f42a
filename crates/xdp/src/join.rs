//! Sharing one interface by queue, as xdpsock's users do (one process per queue): a process
//! that finds wirespeed's plain redirect program already attached (by another wirespeed)
//! joins it instead of being refused. It registers its socket in the program's XSKMAP at its
//! queue, and holds a descriptor of the BPF link that attaches the program: the kernel
//! detaches it when the last descriptor closes, so the last process out removes the program,
//! on a crash too. Everything is found by global id (program, maps, link): no bpffs, so it
//! works under `ip netns exec`, which hides the host's.
//!
//! The spill variant, the fast path, the drop counter and anyone else's program are not
//! joined: they serve their process's own queues, or are not ours to use.

use std::os::fd::OwnedFd;

use aya::maps::{Map, MapData, MapType, XskMap};
use aya::programs::links::LinkType;
use aya::programs::{loaded_links, loaded_programs};

use crate::attach::{Holder, attached_program, link_holder};
use crate::{AttachMode, XdpError, error_chain};

/// The program a process may join: what `xsk_redirect.c` is loaded as, and its map.
pub(crate) const PROGRAM: &str = "xsk_redirect";
const MAP: &str = "xsks";

/// wirespeed's plain redirect program, attached to an interface by another process (or
/// another part of this one), which more processes can share by queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedProgram {
    pub iface: String,
    /// The program's id (as `bpftool prog show` lists it).
    pub id: u32,
    /// Where it runs: a process joining it binds in this mode.
    pub mode: AttachMode,
    /// A process holding its BPF link (one of them, when several share it already).
    pub holder: Option<Holder>,
}

impl SharedProgram {
    /// "process 1234 (wirespeed)", or what is known without one.
    pub fn holder_text(&self) -> String {
        match &self.holder {
            Some(h) => format!("process {} ({})", h.pid, h.name),
            None => "another process".to_string(),
        }
    }
}

/// The program attached to `iface` when it is wirespeed's plain redirect program, named so
/// by the kernel's own program info (the `ip` text alone could be anyone's program of that
/// name only in part). None for no program, or any other.
pub fn shared_program(iface: &str) -> Option<SharedProgram> {
    let text = attached_program(iface)?;
    let (mode, id) = parse_attached(&text)?;
    let info = loaded_programs().flatten().find(|p| p.id() == id)?;
    if info.name_as_str() != Some(PROGRAM) {
        return None;
    }
    Some(SharedProgram {
        iface: iface.to_string(),
        id,
        mode,
        holder: link_holder(&text),
    })
}

/// The attach mode and program id of `attached_program`'s "xdp id 12 name x": native for
/// `xdp`, skb for `xdpgeneric`; None for offload, or where a native and a generic program
/// are both attached (`xdpdrv`, then `xdpgeneric`): not a set-up ours to share.
fn parse_attached(text: &str) -> Option<(AttachMode, u32)> {
    let mut words = text.split_whitespace();
    let mode = match words.next()? {
        "xdp" => AttachMode::Native,
        "xdpgeneric" => AttachMode::Skb,
        _ => return None,
    };
    (words.next()? == "id").then_some(())?;
    Some((mode, words.next()?.parse().ok()?))
}

/// A process's share of another's redirect program: its XSKMAP, and a reference to the link
/// that keeps the program attached while this process lives.
pub(crate) struct Joined {
    pub(crate) shared: SharedProgram,
    pub(crate) xsks: XskMap<MapData>,
    _link: OwnedFd,
}

/// Joins the redirect program on `iface`, if wirespeed's plain one is there and a BPF link
/// attaches it. Ok(None) when there is none to join (nothing attached, another program, one
/// attached by netlink, or one that went away meanwhile): the caller attaches its own,
/// which refuses anyone else's.
pub(crate) fn join(iface: &str, ifindex: u32) -> Result<Option<Joined>, XdpError> {
    let Some(shared) = shared_program(iface) else {
        return Ok(None);
    };
    // The link first: once held, the program and its maps stay while we look them up.
    let Some(link) = link_of(shared.id, ifindex) else {
        return Ok(None);
    };
    let xsks = xsk_map_of(shared.id)?;
    Ok(Some(Joined {
        shared,
        xsks,
        _link: link,
    }))
}

/// A descriptor of the XDP link that attaches program `prog_id` to interface `ifindex`.
pub(crate) fn link_of(prog_id: u32, ifindex: u32) -> Option<OwnedFd> {
    let candidates: Vec<u32> = loaded_links()
        .flatten()
        .filter(|l| l.program_id() == prog_id && matches!(l.link_type(), Ok(LinkType::Xdp)))
        .map(|l| l.id())
        .collect();
    candidates.into_iter().find_map(|id| {
        // Checked again on the descriptor we keep: the same program, on this interface
        // still (a link whose interface went away reports ifindex 0).
        let (fd, info) = wirespeed_xsk::xdp_link_by_id(id).ok().flatten()?;
        (info.prog_id == prog_id && info.ifindex == ifindex).then_some(fd)
    })
}

/// The XSKMAP `xsks` of program `prog_id`.
fn xsk_map_of(prog_id: u32) -> Result<XskMap<MapData>, XdpError> {
    XskMap::try_from(Map::XskMap(xsk_map_data_of(prog_id)?)).map_err(|e| XdpError::Map {
        map: MAP,
        reason: error_chain(&e),
    })
}

/// The XSKMAP `xsks` of program `prog_id`, as the kernel's map (for its descriptor).
pub(crate) fn xsk_map_data_of(prog_id: u32) -> Result<MapData, XdpError> {
    let map_err = |reason: String| XdpError::Map { map: MAP, reason };
    let info = loaded_programs()
        .flatten()
        .find(|p| p.id() == prog_id)
        .ok_or_else(|| map_err(format!("program {prog_id} went away")))?;
    let ids = info
        .map_ids()
        .map_err(|e| map_err(error_chain(&e)))?
        .unwrap_or_default();
    for id in ids {
        let Ok(data) = MapData::from_id(id) else {
            continue;
        };
        let named = data.info().is_ok_and(|i| {
            i.name_as_str() == Some(MAP) && matches!(i.map_type(), Ok(MapType::XskMap))
        });
        if named {
            return Ok(data);
        }
    }
    Err(map_err(format!(
        "program {prog_id} ({PROGRAM}) has no map {MAP}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_and_id_come_from_ip_s_words() {
        let p = parse_attached;
        assert_eq!(
            p("xdp id 12 name xsk_redirect"),
            Some((AttachMode::Native, 12))
        );
        assert_eq!(
            p("xdpgeneric id 7 name xsk_redirect"),
            Some((AttachMode::Skb, 7))
        );
        assert_eq!(p("xdpdrv id 3"), None);
        assert_eq!(p("xdpoffload id 3"), None);
        assert_eq!(p("xdp"), None);
        assert_eq!(p("xdp id x"), None);
        assert_eq!(p(""), None);
    }
}
