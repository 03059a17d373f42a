//! Where a tunnel's packets go on the underlay: the route to the far end (the host's routing
//! table), the next hop's MAC address (the host's neighbour table, else learned from ARP the
//! switch sends and answers itself: the redirect program gives every packet of an underlay
//! to the switch, so the host's stack never sees ARP there).
//!
//! What the switch learned ages as the kernel's neighbour entries do: fresh for [`FRESH`]
//! after it was last confirmed, then asked for again while still used, and forgotten after
//! [`FORGOTTEN`] unanswered. ARP from a known neighbour confirms it, whoever it is for: a
//! gratuitous ARP announcing a new address is followed, at most once a [`LOCKTIME`].
//!
//! An underlay is a network others send on, so what ARP tells unasked is bounded: such an
//! entry moves no thread's headers (only an address a tunnel asked for does), and past
//! [`MAX_NEIGHBOURS`] entries it is not taken. A flood of ARP from made-up senders costs
//! one lookup each, where each used to make every thread read the host's tables again.
//!
//! The host's tables are read from procfs (`/proc/net/route`, `/proc/net/arp`: the same
//! tables netlink dumps, for the namespace the switch runs in), and only while a tunnel has
//! no neighbour: never per packet.

use core::time::Duration;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use wirespeed_packet::MacAddr;

/// A neighbour's address is used without question this long after it was last confirmed
/// (learned, or heard from: an ARP from it); the kernel's own base reachable time.
pub const FRESH: Duration = Duration::from_secs(30);
/// ...then used while the tunnel asks again (an ARP request every time it revalidates),
/// and forgotten unconfirmed this long after: three requests unanswered.
pub const FORGOTTEN: Duration = Duration::from_secs(45);
/// Entries kept at most, and addresses asked for at most; past it, what ARP tells unasked
/// is not taken (the kernel's own hard limit, `gc_thresh3`, is 1024 too).
pub const MAX_NEIGHBOURS: usize = 1024;
/// A neighbour's address changes at most this often (the kernel's `locktime`): ARP that
/// says two things in turn moves the threads' headers once a second at most.
pub const LOCKTIME: Duration = Duration::from_secs(1);
/// How often a full table is swept of what went unconfirmed for [`FORGOTTEN`] at most.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The next hops' addresses the bridge knows, shared by its threads; `generation` moves on
/// each change so a thread's own copy of a tunnel's headers knows to look again.
#[derive(Default, Debug)]
pub struct Neighbours {
    table: Mutex<Table>,
    generation: AtomicU64,
}

#[derive(Default, Debug)]
struct Table {
    entries: HashMap<Ipv4Addr, Entry>,
    /// Addresses a tunnel asked for and has no entry of yet, and when it asked.
    wanted: HashMap<Ipv4Addr, Duration>,
    /// When a full table was last swept.
    swept: Option<Duration>,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    mac: MacAddr,
    /// The bridge's clock when it was last learned or heard from.
    confirmed: Duration,
    /// ...and when its address last changed, if it did.
    changed: Option<Duration>,
    /// A tunnel asked for it or looked it up: a change moves the threads' headers.
    used: bool,
}

impl Table {
    /// Makes room when full, at most every [`SWEEP_EVERY`]: forgets entries unconfirmed for
    /// [`FORGOTTEN`] (true when some went) and addresses asked for that long ago.
    fn sweep(&mut self, now: Duration) -> bool {
        if self.swept.is_some_and(|at| now < at + SWEEP_EVERY) {
            return false;
        }
        self.swept = Some(now);
        let before = self.entries.len();
        self.entries
            .retain(|_, e| now.saturating_sub(e.confirmed) < FORGOTTEN);
        self.wanted
            .retain(|_, at| now.saturating_sub(*at) < FORGOTTEN);
        self.entries.len() < before
    }
}

/// What the bridge knows of a neighbour at a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    Fresh(MacAddr),
    /// Use it, and ask again: it may have moved.
    Stale(MacAddr),
    Unknown,
}

impl Neighbours {
    /// What is known of `ip` at `now`; an entry unconfirmed for [`FORGOTTEN`] is forgotten
    /// here (the generation moves on).
    pub fn get(&self, ip: Ipv4Addr, now: Duration) -> Known {
        let mut table = self.lock();
        let Some(entry) = table.entries.get_mut(&ip) else {
            return Known::Unknown;
        };
        entry.used = true;
        let entry = *entry;
        let age = now.saturating_sub(entry.confirmed);
        if age < FRESH {
            Known::Fresh(entry.mac)
        } else if age < FORGOTTEN {
            Known::Stale(entry.mac)
        } else {
            table.entries.remove(&ip);
            self.generation.fetch_add(1, Ordering::Release);
            Known::Unknown
        }
    }

    /// Whether `ip` has an entry, of any age.
    pub fn knows(&self, ip: Ipv4Addr) -> bool {
        self.lock().entries.contains_key(&ip)
    }

    /// Notes that a tunnel asked for `ip` at `now` (it has no entry): its answer is taken
    /// however full the table is, and moves the generation on.
    pub fn want(&self, ip: Ipv4Addr, now: Duration) {
        let mut table = self.lock();
        if table.wanted.len() >= MAX_NEIGHBOURS && table.sweep(now) {
            self.generation.fetch_add(1, Ordering::Release);
        }
        if table.wanted.len() < MAX_NEIGHBOURS || table.wanted.contains_key(&ip) {
            table.wanted.insert(ip, now);
        }
    }

    /// Records `ip` at `mac`, confirmed at `now`. A known neighbour's address changes once
    /// a [`LOCKTIME`] at most after its last change. A new entry for an address a tunnel
    /// asked for ([`Neighbours::want`]), or a change of one a tunnel looked up, moves the
    /// generation on; a new one nobody asked for moves nothing and is not taken into a full
    /// table.
    pub fn learn(&self, ip: Ipv4Addr, mac: MacAddr, now: Duration) {
        if mac.is_multicast() || mac == MacAddr([0; 6]) {
            return;
        }
        let mut table = self.lock();
        let asked = table.wanted.remove(&ip).is_some();
        if let Some(e) = table.entries.get_mut(&ip) {
            // Asked for (its answer is what a tunnel uses), whatever told it first.
            e.used |= asked;
        }
        let moved = match table.entries.get_mut(&ip) {
            Some(e) if e.mac == mac => {
                e.confirmed = now;
                false
            }
            Some(e)
                if e.changed
                    .is_some_and(|at| now.saturating_sub(at) < LOCKTIME) =>
            {
                false
            }
            Some(e) => {
                e.mac = mac;
                e.confirmed = now;
                e.changed = Some(now);
                e.used
            }
            None => {
                let swept = table.entries.len() >= MAX_NEIGHBOURS && table.sweep(now);
                let room = table.entries.len() < MAX_NEIGHBOURS;
                if asked || room {
                    let entry = Entry {
                        mac,
                        confirmed: now,
                        changed: None,
                        used: asked,
                    };
                    table.entries.insert(ip, entry);
                }
                asked || swept
            }
        };
        if moved {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The host's route to an address: the interface, and the gateway unless on-link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub iface: String,
    pub gateway: Option<Ipv4Addr>,
}

impl Route {
    /// The address whose MAC the packets go to.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Ipv4Addr {
        self.gateway.unwrap_or(dst)
    }
}

/// The host's route to `dst` (longest prefix, then lowest metric), from `/proc/net/route`.
pub fn route_to(dst: Ipv4Addr) -> Option<Route> {
    let table = std::fs::read_to_string("/proc/net/route").ok()?;
    best_route(&table, dst)
}

/// [`route_to`] over the text of `/proc/net/route`: addresses in hex, in the host's (little
/// endian) byte order.
fn best_route(table: &str, dst: Ipv4Addr) -> Option<Route> {
    const RTF_UP: u32 = 0x1;
    const RTF_GATEWAY: u32 = 0x2;
    let hex = |text: &str| u32::from_str_radix(text, 16).ok();
    let address = |text: &str| hex(text).map(|v| Ipv4Addr::from(v.swap_bytes()));
    let mut best: Option<(u32, u32, Route)> = None;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let (Some(net), Some(gateway), Some(flags), Some(metric), Some(mask)) = (
            address(f[1]),
            address(f[2]),
            hex(f[3]),
            f[6].parse::<u32>().ok(),
            address(f[7]),
        ) else {
            continue;
        };
        let mask = u32::from(mask);
        if flags & RTF_UP == 0 || u32::from(dst) & mask != u32::from(net) & mask {
            continue;
        }
        let better = best
            .as_ref()
            .is_none_or(|&(m, metric_best, _)| mask > m || (mask == m && metric < metric_best));
        if better {
            let gateway = (flags & RTF_GATEWAY != 0).then_some(gateway);
            let iface = f[0].to_string();
            best = Some((mask, metric, Route { iface, gateway }));
        }
    }
    best.map(|(_, _, route)| route)
}

/// The host's neighbour entry for `ip` on `iface`, if complete, from `/proc/net/arp`.
pub fn kernel_neighbour(ip: Ipv4Addr, iface: &str) -> Option<KernelNeighbour> {
    let table = std::fs::read_to_string("/proc/net/arp").ok()?;
    neighbour_in(&table, ip, iface)
}

/// A complete entry of the host's neighbour table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelNeighbour {
    pub mac: MacAddr,
    /// Set by hand (`nud permanent`): never stale. Another "complete" entry may be one the
    /// kernel keeps as STALE, no longer checked.
    pub permanent: bool,
}

fn neighbour_in(table: &str, ip: Ipv4Addr, iface: &str) -> Option<KernelNeighbour> {
    const ATF_COM: u32 = 0x2;
    const ATF_PERM: u32 = 0x4;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let flags = f
            .get(2)
            .and_then(|flags| u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0);
        (f.len() >= 6 && f[0].parse() == Ok(ip) && f[5] == iface && flags & ATF_COM != 0)
            .then(|| f[3].parse().ok())
            .flatten()
            .map(|mac| KernelNeighbour {
                mac,
                permanent: flags & ATF_PERM != 0,
            })
    })
}

/// An ARP request or reply on Ethernet, 42 bytes (the port pads it).
pub fn arp_frame(
    operation: u16,
    src_mac: MacAddr,
    src_ip: Ipv4Addr,
    dst_mac: MacAddr,
    target_mac: MacAddr,
    target_ip: Ipv4Addr,
) -> [u8; 42] {
    let mut frame = [0u8; 42];
    frame[0..6].copy_from_slice(&dst_mac.0);
    frame[6..12].copy_from_slice(&src_mac.0);
    frame[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    frame[14..22].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 0]);
    frame[20..22].copy_from_slice(&operation.to_be_bytes());
    frame[22..28].copy_from_slice(&src_mac.0);
    frame[28..32].copy_from_slice(&src_ip.octets());
    frame[32..38].copy_from_slice(&target_mac.0);
    frame[38..42].copy_from_slice(&target_ip.octets());
    frame
}

/// An ARP packet on Ethernet/IPv4, as far as the tunnels care.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Arp {
    pub operation: u16,
    pub sender_mac: MacAddr,
    pub sender_ip: Ipv4Addr,
    pub target_ip: Ipv4Addr,
}

/// The ARP packet in `frame`, if it is one (untagged, Ethernet and IPv4 addresses).
pub fn parse_arp(frame: &[u8]) -> Option<Arp> {
    if frame.len() < 42 || frame[12..14] != [0x08, 0x06] || frame[14..20] != [0, 1, 8, 0, 6, 4] {
        return None;
    }
    let mac = |at: usize| MacAddr(frame[at..at + 6].try_into().expect("six bytes"));
    let ip = |at: usize| Ipv4Addr::new(frame[at], frame[at + 1], frame[at + 2], frame[at + 3]);
    Some(Arp {
        operation: u16::from_be_bytes([frame[20], frame[21]]),
        sender_mac: mac(22),
        sender_ip: ip(28),
        target_ip: ip(38),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTES: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
eth0\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n\
ul0\t0032A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";

    #[test]
    fn the_longest_prefix_wins_and_a_gateway_is_the_next_hop() {
        let on_link = best_route(ROUTES, Ipv4Addr::new(192, 168, 50, 2)).unwrap();
        assert_eq!(on_link.iface, "ul0");
        assert_eq!(on_link.gateway, None);
        assert_eq!(
            on_link.next_hop(Ipv4Addr::new(192, 168, 50, 2)),
            Ipv4Addr::new(192, 168, 50, 2)
        );
        let default = best_route(ROUTES, Ipv4Addr::new(198, 51, 100, 7)).unwrap();
        assert_eq!(default.iface, "eth0");
        assert_eq!(default.gateway, Some(Ipv4Addr::new(10, 0, 0, 1)));
        let local = best_route(ROUTES, Ipv4Addr::new(10, 0, 0, 9)).unwrap();
        assert_eq!(local.iface, "eth0");
        assert_eq!(local.gateway, None);
        assert_eq!(best_route("Iface\n", Ipv4Addr::new(10, 0, 0, 9)), None);
    }

    #[test]
    fn only_complete_neighbours_on_the_interface_count() {
        let table = "IP address       HW type     Flags       HW address            Mask     Device\n\
192.168.50.2     0x1         0x2         02:00:00:00:00:0b     *        ul0\n\
192.168.50.3     0x1         0x0         00:00:00:00:00:00     *        ul0\n\
192.168.50.4     0x1         0x2         02:00:00:00:00:0c     *        eth0\n\
192.168.50.5     0x1         0x6         02:00:00:00:00:0d     *        ul0\n";
        let ip = |last| Ipv4Addr::new(192, 168, 50, last);
        assert_eq!(
            neighbour_in(table, ip(2), "ul0"),
            Some(KernelNeighbour {
                mac: MacAddr([2, 0, 0, 0, 0, 0xb]),
                permanent: false
            })
        );
        assert_eq!(
            neighbour_in(table, ip(5), "ul0"),
            Some(KernelNeighbour {
                mac: MacAddr([2, 0, 0, 0, 0, 0xd]),
                permanent: true
            })
        );
        assert_eq!(neighbour_in(table, ip(3), "ul0"), None);
        assert_eq!(neighbour_in(table, ip(4), "ul0"), None);
    }

    #[test]
    fn arp_frames_parse_back() {
        let me = MacAddr([2, 0, 0, 0, 0, 0xa]);
        let frame = arp_frame(
            1,
            me,
            Ipv4Addr::new(192, 168, 50, 1),
            MacAddr::BROADCAST,
            MacAddr([0; 6]),
            Ipv4Addr::new(192, 168, 50, 2),
        );
        let arp = parse_arp(&frame).unwrap();
        assert_eq!(arp.operation, 1);
        assert_eq!(arp.sender_mac, me);
        assert_eq!(arp.sender_ip, Ipv4Addr::new(192, 168, 50, 1));
        assert_eq!(arp.target_ip, Ipv4Addr::new(192, 168, 50, 2));
        assert_eq!(parse_arp(&frame[..41]), None);
    }

    #[test]
    fn learning_moves_the_generation_only_on_a_change() {
        let neighbours = Neighbours::default();
        let ip = Ipv4Addr::new(192, 168, 50, 2);
        let start = neighbours.generation();
        let now = Duration::from_secs(1);
        neighbours.want(ip, now);
        neighbours.learn(ip, MacAddr([2, 0, 0, 0, 0, 1]), now);
        let first = neighbours.generation();
        assert_eq!(first, start + 1, "asked for, and learned");
        neighbours.learn(ip, MacAddr([2, 0, 0, 0, 0, 1]), now);
        assert_eq!(neighbours.generation(), first);
        let now = now + LOCKTIME;
        neighbours.learn(ip, MacAddr([2, 0, 0, 0, 0, 2]), now);
        assert_eq!(neighbours.generation(), first + 1);
        assert_eq!(
            neighbours.get(ip, now),
            Known::Fresh(MacAddr([2, 0, 0, 0, 0, 2]))
        );
        neighbours.learn(ip, MacAddr::BROADCAST, now);
        assert_eq!(
            neighbours.get(ip, now),
            Known::Fresh(MacAddr([2, 0, 0, 0, 0, 2]))
        );
    }

    /// A flood of ARP from made-up senders (the review's: "who-has LOCAL tell RANDOM"):
    /// the table takes no more than its limit and no thread's headers move; an address a
    /// tunnel asked for is still taken, and moves them; once the flood's entries went
    /// unconfirmed for [`FORGOTTEN`], a full table is swept to make room.
    #[test]
    fn what_arp_tells_unasked_fills_a_bounded_table_and_moves_nothing() {
        let neighbours = Neighbours::default();
        let ip = |i: u32| Ipv4Addr::from(0x0a00_0000 + i);
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let t0 = Duration::from_secs(1);
        let generation = neighbours.generation();
        let flood = MAX_NEIGHBOURS as u32 + 100;
        for i in 0..flood {
            neighbours.learn(ip(i), mac, t0);
        }
        assert_eq!(neighbours.generation(), generation);
        assert!(neighbours.knows(ip(MAX_NEIGHBOURS as u32 - 1)));
        assert!(!neighbours.knows(ip(MAX_NEIGHBOURS as u32)));
        let next_hop = Ipv4Addr::new(192, 0, 2, 2);
        neighbours.want(next_hop, t0);
        neighbours.learn(next_hop, mac, t0);
        assert_eq!(neighbours.get(next_hop, t0), Known::Fresh(mac));
        assert_eq!(neighbours.generation(), generation + 1);
        // The flood's entries, unconfirmed since: swept when the next one comes.
        let later = t0 + FORGOTTEN;
        let newcomer = ip(flood);
        neighbours.learn(newcomer, mac, later);
        assert!(neighbours.knows(newcomer));
        assert!(!neighbours.knows(ip(0)));
        assert_eq!(neighbours.generation(), generation + 2);
    }

    /// A next hop told unasked first (its ARP for us came while a tunnel looked it up in the
    /// host's table, which says the same): the tunnel uses it, so its later move moves the
    /// threads' headers.
    #[test]
    fn an_address_asked_for_counts_as_used_whoever_told_it_first() {
        let neighbours = Neighbours::default();
        let ip = Ipv4Addr::new(192, 0, 2, 2);
        let (a, b) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
        let now = Duration::from_secs(1);
        assert_eq!(neighbours.get(ip, now), Known::Unknown);
        neighbours.learn(ip, a, now);
        neighbours.want(ip, now);
        neighbours.learn(ip, a, now);
        let generation = neighbours.generation();
        neighbours.learn(ip, b, now);
        assert_eq!(neighbours.generation(), generation + 1);
    }

    /// ARP that gives a neighbour two addresses in turn moves it once a [`LOCKTIME`] at
    /// most after its first change (which is taken at once, however new the entry): each
    /// move of one a tunnel uses makes every thread look again. A change of one no tunnel
    /// looked up moves nothing.
    #[test]
    fn a_neighbours_address_changes_once_a_locktime_at_most() {
        let neighbours = Neighbours::default();
        let ip = Ipv4Addr::new(192, 0, 2, 2);
        let (a, b) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
        let at = |ms: u64| Duration::from_millis(10_000 + ms);
        neighbours.learn(ip, a, at(0));
        neighbours.learn(ip, b, at(100));
        let generation = neighbours.generation();
        assert_eq!(generation, 0, "no tunnel looked it up");
        assert_eq!(neighbours.get(ip, at(100)), Known::Fresh(b));
        for ms in [400, 999, 1099] {
            neighbours.learn(ip, a, at(ms));
            neighbours.learn(ip, b, at(ms));
        }
        assert_eq!(neighbours.get(ip, at(1099)), Known::Fresh(b));
        assert_eq!(neighbours.generation(), generation);
        neighbours.learn(ip, a, at(1100));
        assert_eq!(neighbours.get(ip, at(1100)), Known::Fresh(a));
        assert_eq!(neighbours.generation(), generation + 1);
        neighbours.learn(ip, b, at(1500));
        assert_eq!(neighbours.get(ip, at(1500)), Known::Fresh(a));
    }

    #[test]
    fn an_entry_goes_stale_then_is_forgotten_unless_confirmed() {
        let neighbours = Neighbours::default();
        let ip = Ipv4Addr::new(192, 168, 50, 2);
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let at = |s: u64| Duration::from_secs(100 + s);
        neighbours.learn(ip, mac, at(0));
        assert_eq!(neighbours.get(ip, at(29)), Known::Fresh(mac));
        assert_eq!(neighbours.get(ip, at(30)), Known::Stale(mac));
        // Heard from again: fresh for another 30 s, and no change to look at.
        let generation = neighbours.generation();
        neighbours.learn(ip, mac, at(40));
        assert_eq!(neighbours.generation(), generation);
        assert_eq!(neighbours.get(ip, at(69)), Known::Fresh(mac));
        assert_eq!(neighbours.get(ip, at(84)), Known::Stale(mac));
        assert!(neighbours.knows(ip));
        // Unanswered 45 s: forgotten, and the threads' headers made with it look again.
        assert_eq!(neighbours.get(ip, at(85)), Known::Unknown);
        assert!(!neighbours.knows(ip));
        assert_eq!(neighbours.generation(), generation + 1);
    }
}
