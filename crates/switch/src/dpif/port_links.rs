//! Whether each port's interface is up. A thread of its own ([`watch`]) asks the kernel
//! about the ports' interfaces whenever the kernel says a link changed (rtnetlink), and the
//! control side asks once a second besides ([`PortLinks::read`]); a poll-mode thread whose
//! send or receive fails because the interface is down or gone says so at once
//! ([`PortLinks::report`]). Each poll-mode thread reads the states every round and stops
//! using a port that is not up: what is meant for it is counted as `link_down`, and it
//! forwards again when it is back up. A port whose interface was deleted stays gone until
//! the bridge binds it to the interface made since under its name ([`PortLinks::rebound`]).
//! The control side reports each change once ([`PortLinks::changes`]). Ports without an
//! interface (pipes, capture files) are always up. Each read also takes each interface's
//! MTU: a packet longer than it allows is not sent ([`PortLinks::longest`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use wirespeed_port::{LinkEvents, LinkState};

const UP: u8 = 0;
const DOWN: u8 = 1;
const GONE: u8 = 2;

fn encode(state: LinkState) -> u8 {
    match state {
        LinkState::Up => UP,
        LinkState::Down => DOWN,
        LinkState::Gone => GONE,
    }
}

fn decode(value: u8) -> LinkState {
    match value {
        UP => LinkState::Up,
        DOWN => LinkState::Down,
        _ => LinkState::Gone,
    }
}

/// A port's interface index (0: none) and its state, in one word: a reader that asked
/// about one interface never writes its answer over a port bound to another since.
fn pack(ifindex: u32, state: u8) -> u64 {
    u64::from(ifindex) << 8 | u64::from(state)
}

fn state_of(link: u64) -> u8 {
    link as u8
}

fn ifindex_of(link: u64) -> u32 {
    (link >> 8) as u32
}

/// The bridge's ports' link states, in the bridge's port order.
pub struct PortLinks {
    /// Each port's interface index when it opened or was bound again, and its state (`pack`).
    link: Vec<AtomicU64>,
    /// The state `refresh` last reported for each port (it reports each change once,
    /// whoever found it).
    announced: Vec<AtomicU8>,
    /// The longest frame each port's interface sends, as its MTU last read allows
    /// (u32::MAX: no limit known).
    longest: Vec<AtomicU32>,
}

/// What a frame may have beyond the MTU: an Ethernet header and one VLAN tag, as the kernel
/// lets through (is_skb_forwardable). Open vSwitch drops a packet longer than its output
/// device's MTU; so does a veth whose peer has the same MTU, unseen, once it took it.
const FRAME_OVER_MTU: u32 = 14 + 4;

/// The longest frame `ifindex` sends now (u32::MAX when it cannot be asked).
fn longest_frame(ifindex: Option<u32>) -> u32 {
    ifindex
        .and_then(wirespeed_port::link_mtu)
        .map_or(u32::MAX, |mtu| mtu.saturating_add(FRAME_OVER_MTU))
}

/// A port whose state changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkChange {
    /// Index in the bridge's port order.
    pub port: usize,
    pub was: LinkState,
    pub now: LinkState,
}

impl PortLinks {
    /// Every port up; `refresh` finds out otherwise.
    pub fn new(ifindex: Vec<Option<u32>>) -> PortLinks {
        PortLinks {
            announced: ifindex.iter().map(|_| AtomicU8::new(UP)).collect(),
            longest: ifindex
                .iter()
                .map(|&i| AtomicU32::new(longest_frame(i)))
                .collect(),
            link: ifindex
                .iter()
                .map(|i| AtomicU64::new(pack(i.unwrap_or(0), UP)))
                .collect(),
        }
    }

    /// `port`'s interface index (None: it has no interface).
    pub fn ifindex(&self, port: usize) -> Option<u32> {
        Some(ifindex_of(self.link[port].load(Ordering::Relaxed))).filter(|&i| i != 0)
    }

    /// `port`, gone, is bound to interface `ifindex` now (made under its name since): it
    /// takes that interface's state, and `changes` reports it out of gone.
    pub fn rebound(&self, port: usize, ifindex: u32) {
        self.longest[port].store(longest_frame(Some(ifindex)), Ordering::Relaxed);
        let now = encode(wirespeed_port::link_state(ifindex));
        self.link[port].store(pack(ifindex, now), Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.link.len()
    }

    pub fn is_empty(&self) -> bool {
        self.link.is_empty()
    }

    #[inline]
    pub fn get(&self, port: usize) -> LinkState {
        decode(state_of(self.link[port].load(Ordering::Relaxed)))
    }

    /// `port`'s state and its interface's index (0: none), read together.
    #[inline]
    pub fn get_with_index(&self, port: usize) -> (LinkState, u32) {
        let link = self.link[port].load(Ordering::Relaxed);
        (decode(state_of(link)), ifindex_of(link))
    }

    /// The longest frame `port` sends (u32::MAX: no limit known), as its MTU was last read.
    #[inline]
    pub fn longest(&self, port: usize) -> u32 {
        self.longest[port].load(Ordering::Relaxed)
    }

    /// A thread found `port` down or gone (a send failed): the others stop using it now,
    /// not at the next refresh. A port gone stays gone.
    pub fn report(&self, port: usize, state: LinkState) {
        let _ = self.link[port].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |link| {
            let worse = state_of(link).max(encode(state));
            Some(pack(ifindex_of(link), worse))
        });
    }

    /// Asks the kernel about every interface (a few system calls each: its name, flags and
    /// MTU). A port gone stays gone: its interface's index is never its again, whatever is
    /// made under its name (until `rebound`).
    pub fn read(&self) {
        for port in 0..self.link.len() {
            let link = self.link[port].load(Ordering::Relaxed);
            let ifindex = ifindex_of(link);
            if ifindex == 0 || state_of(link) == GONE {
                continue;
            }
            self.longest[port].store(longest_frame(Some(ifindex)), Ordering::Relaxed);
            let now = encode(wirespeed_port::link_state(ifindex));
            // Never out of gone, whoever found it meanwhile (another reader, a thread), and
            // only about the interface asked: the port may be bound to another since.
            let _ = self.link[port].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |link| {
                (ifindex_of(link) == ifindex && state_of(link) != GONE)
                    .then_some(pack(ifindex, now))
            });
        }
    }

    /// The ports whose state changed since the last call (each change said once, whoever
    /// found it).
    pub fn changes(&self) -> Vec<LinkChange> {
        let mut changes = Vec::new();
        for port in 0..self.link.len() {
            let now = self.get(port);
            let was = decode(self.announced[port].swap(encode(now), Ordering::Relaxed));
            if now != was {
                changes.push(LinkChange { port, was, now });
            }
        }
        changes
    }

    /// `read`, then `changes`.
    pub fn refresh(&self) -> Vec<LinkChange> {
        self.read();
        self.changes()
    }

    /// Sets every port's state (for tests).
    pub fn set(&self, port: usize, state: LinkState) {
        let ifindex = self.ifindex(port).unwrap_or(0);
        self.link[port].store(pack(ifindex, encode(state)), Ordering::Relaxed);
    }
}

/// Keeps `links` fresh from the kernel's word of link changes, on a thread of its own that
/// ends when `links` is dropped elsewhere (within a second). An error: rtnetlink cannot be
/// listened to here (the caller then reads the states more often itself).
pub fn watch(links: &Arc<PortLinks>) -> std::io::Result<()> {
    let mut events = LinkEvents::open(Duration::from_secs(1))?;
    let links = Arc::downgrade(links);
    std::thread::Builder::new()
        .name("link-watch".to_string())
        .spawn(move || {
            loop {
                let changed = events.wait();
                let Some(links) = links.upgrade() else { return };
                match changed {
                    Ok(true) => links.read(),
                    Ok(false) => {}
                    Err(_) => return,
                }
            }
        })?;
    Ok(())
}

/// How a state is written in `show`, `dump-ports`, `--json` and the log.
pub fn link_name(state: LinkState) -> &'static str {
    match state {
        LinkState::Up => "up",
        LinkState::Down => "down",
        LinkState::Gone => "gone",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_makes_a_port_worse_never_better_and_gone_sticks() {
        let links = PortLinks::new(vec![None, Some(u32::MAX - 3)]);
        assert_eq!(links.get(1), LinkState::Up);
        links.report(1, LinkState::Down);
        assert_eq!(links.get(1), LinkState::Down);
        links.report(1, LinkState::Up);
        assert_eq!(links.get(1), LinkState::Down);
        // No interface has that index: gone (reported as a change from what was last
        // reported, up), and a port without one is left alone.
        let changes = links.refresh();
        assert_eq!(
            changes,
            [LinkChange {
                port: 1,
                was: LinkState::Up,
                now: LinkState::Gone
            }]
        );
        assert_eq!(links.get(0), LinkState::Up);
        assert!(links.refresh().is_empty());
        assert_eq!(links.get(1), LinkState::Gone);
    }

    #[test]
    fn a_port_gone_comes_back_only_when_rebound() {
        let links = PortLinks::new(vec![Some(u32::MAX - 3)]);
        links.refresh();
        assert_eq!(links.get(0), LinkState::Gone);
        // Loopback's index, 1, as the interface made since under the port's name.
        links.rebound(0, 1);
        assert_eq!(links.ifindex(0), Some(1));
        assert_eq!(
            links.refresh(),
            [LinkChange {
                port: 0,
                was: LinkState::Gone,
                now: LinkState::Up
            }]
        );
        assert!(links.longest(0) < u32::MAX, "loopback's MTU is read");
    }
}
