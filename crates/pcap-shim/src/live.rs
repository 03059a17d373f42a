//! An activated handle: the port, its pending batch, the filter, and the descriptors a
//! program or a breakloop waits on. Everything that needs privileges happens here, in
//! `pcap_activate`: tcpdump gives up root right after (-Z), and the XDP program stays
//! attached by a BPF link that goes when the process goes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use wirespeed_capture::filter::Program;
use wirespeed_port::xdp::XdpMode;
use wirespeed_port::{Batch, Port, PortError, PortOptions, PortSpec};
use wirespeed_xdp::AttachMode;
use wirespeed_xdp::handover::Handover;

use crate::broker;
use crate::ffi::{
    PCAP_ERROR, PCAP_ERROR_IFACE_NOT_UP, PCAP_ERROR_NO_SUCH_DEVICE, PCAP_ERROR_PERM_DENIED,
    PCAP_ERROR_RFMON_NOTSUP, PCAP_WARNING_PROMISC_NOTSUP, PcapPkthdr,
};
use crate::handle::Handle;
use crate::options::ShimOptions;

/// Packets taken from the port at a time.
const BURST: usize = 64;

pub struct Live {
    pub port: Box<dyn Port + Send>,
    /// The last burst; packets from `next` on have not been handed to the program yet.
    pub batch: Batch,
    pub next: usize,
    /// When the burst was taken (ns since the epoch): AF_XDP gives no time stamps, and one
    /// clock read a burst keeps the system calls out of the per-packet path.
    pub stamp_ns: u64,
    pub filter: Option<Program>,
    /// For pcap_inject.
    pub tx: Batch,
    /// The port's descriptors and the wake eventfd: what a blocked read polls.
    pub wait_fds: Vec<RawFd>,
    pub wake: OwnedFd,
    /// What pcap_get_selectable_fd returns: an epoll set of the port's sockets and
    /// `pending`, readable when the program has packets to read.
    pub selectable: RawFd,
    _epoll: OwnedFd,
    /// An eventfd that is readable while packets taken from the rings wait in `batch`: a
    /// program that reads one packet a wake-up (dumpcap: pcap_dispatch(p, 1, ...) after
    /// each select) would otherwise sleep on the empty ring with packets in hand.
    pending: OwnedFd,
    pending_signalled: bool,
    _promisc: Option<OwnedFd>,
    pub ifindex: u32,
    /// Spinning, napping or ready to sleep (the tools' shared back-off), and what it said
    /// after the last burst.
    pub idle: wirespeed_port::Idle,
    pub step: wirespeed_port::Step,
    /// The interface's MTU when the port opened: what pcap_inject may send.
    pub mtu: Option<u32>,
    /// When an empty burst last asked whether the interface is still there.
    pub link_checked: std::time::Instant,
    /// Word of link changes, in the selectable set: a program that waits there (dumpcap)
    /// rather than in a read is woken when the interface goes, and its read finds it gone
    /// (an AF_XDP socket whose interface is deleted is told nothing poll() sees). None
    /// where rtnetlink cannot be listened to.
    pub link_events: Option<wirespeed_port::LinkEvents>,
    /// When `link_events` was last read.
    link_events_read: std::time::Instant,
    /// A packet of several frames (multi-buffer), gathered for the program: valid until the
    /// next one is, after the callback it was handed to returned.
    pub gathered: Vec<u8>,
    /// The packets a read picked to hand over next (kept for its room).
    pub run: Vec<crate::receive::Picked>,
    /// pcap_next's copy of the packet it returns, valid until the next call.
    pub one: Vec<u8>,
    pub one_hdr: PcapPkthdr,
    /// The BPF link of a handed-over program: it stays attached while we hold this (last,
    /// so the sockets close first).
    _program: Option<OwnedFd>,
}

/// A failed activation: libpcap's status code and the text for pcap_geterr.
pub struct Refused {
    pub code: i32,
    pub message: String,
}

/// The port open, and a warning to return (PCAP_WARNING_*) with its text.
pub struct Activated {
    pub live: Live,
    pub warning: Option<(i32, String)>,
}

impl Live {
    pub fn activate(h: &Handle) -> Result<Activated, Refused> {
        let settings = h.settings();
        let refused = |code, message: String| Refused { code, message };
        if settings.rfmon {
            return Err(refused(
                PCAP_ERROR_RFMON_NOTSUP,
                format!("{}: AF_XDP has no monitor mode", h.device),
            ));
        }
        let options = ShimOptions::from_env().map_err(|m| refused(PCAP_ERROR, m))?;
        check_place(&h.spec).map_err(|e| refused(status_of(&e), e.to_string()))?;
        // libpcap refuses an interface that is down (its bind fails with ENETDOWN), and
        // tcpdump says "That device is not up"; a port here would wait for it.
        if !admin_up(&h.spec.iface) {
            return Err(refused(
                PCAP_ERROR_IFACE_NOT_UP,
                format!("{}: That device is not up", h.device),
            ));
        }
        check_take(&h.spec.iface, options.take).map_err(|m| refused(PCAP_ERROR, m))?;
        // Under pcap-run the broker attaches the program and hands it over (the program
        // may have given up the privilege to load one: dumpcap has).
        let handed = match broker::broker() {
            Some(name) => Some(
                broker::ask(&name, &h.spec.iface, attach_preference(options.xdp_mode))
                    .map_err(|m| refused(status_of_text(&m), m))?,
            ),
            None => None,
        };
        let frame_size = wirespeed_port::frame_size_for(&h.spec.iface, 0);
        let port_options = PortOptions {
            program_attached: handed.as_ref().map(|handed| handed.mode),
            xdp_mode: options.xdp_mode,
            frame_count: options.frame_count(
                frame_size,
                settings.buffer_size,
                crate::options::lockable_bytes(),
            ),
            frame_size,
            ring_size: options.ring_size,
            batch: BURST as u32,
            rx: true,
            tx: true,
            // A packet larger than a frame (jumbo MTU) comes as a chain of frames, gathered
            // for the program; without it the kernel drops such packets.
            multi_buffer: true,
            ..PortOptions::default()
        };
        // The port's errors name the interface (and queue) already.
        let (port, frames) =
            open_within_memlock(&h.spec, port_options.clone()).map_err(|e| Refused {
                code: status_of(&e),
                message: e.to_string(),
            })?;
        if let Some(handed) = &handed {
            register(h, &*port, handed)?;
        }
        if options.verbose {
            let info = port.info();
            eprintln!(
                "wirespeed: {} open ({} mode, {} frames of {frame_size} bytes, ring {})",
                h.device, info.mode, frames, options.ring_size
            );
            for note in &info.notes {
                eprintln!("wirespeed: note: {note}");
            }
        }
        let wake =
            eventfd().map_err(|e| refused(PCAP_ERROR, format!("{}: eventfd: {e}", h.device)))?;
        let pending =
            eventfd().map_err(|e| refused(PCAP_ERROR, format!("{}: eventfd: {e}", h.device)))?;
        let port_fds = port.poll_fds();
        let link_events = wirespeed_port::LinkEvents::open(std::time::Duration::ZERO).ok();
        let mut watched = port_fds.clone();
        watched.push(pending.as_raw_fd());
        watched.extend(link_events.as_ref().map(wirespeed_port::LinkEvents::fd));
        let epoll = epoll_of(&watched)
            .map_err(|e| refused(PCAP_ERROR, format!("{}: epoll: {e}", h.device)))?;
        let selectable = epoll.as_raw_fd();
        let mut wait_fds = port_fds;
        wait_fds.push(wake.as_raw_fd());
        let ifindex = wirespeed_xsk::if_index(&h.spec.iface).unwrap_or(0);
        let (promisc, warning) = match settings.promisc {
            false => (None, None),
            true => match promiscuous(ifindex) {
                Ok(fd) => (Some(fd), None),
                Err(e) => (
                    None,
                    Some((
                        PCAP_WARNING_PROMISC_NOTSUP,
                        format!("{}: promiscuous mode: {e}", h.device),
                    )),
                ),
            },
        };
        h.slot.set_wake(wake.as_raw_fd());
        Ok(Activated {
            live: Live {
                port,
                batch: Batch::with_capacity(BURST),
                next: 0,
                stamp_ns: 0,
                filter: None,
                tx: Batch::with_capacity(1),
                wait_fds,
                wake,
                selectable,
                _epoll: epoll,
                pending,
                pending_signalled: false,
                _promisc: promisc,
                ifindex,
                idle: wirespeed_port::Idle::new(options.ring_size),
                step: wirespeed_port::Step::Spin,
                mtu: wirespeed_port::interface_mtu(&h.spec.iface),
                link_checked: std::time::Instant::now(),
                link_events,
                link_events_read: std::time::Instant::now(),
                gathered: Vec::new(),
                run: Vec::with_capacity(BURST),
                one: Vec::new(),
                one_hdr: PcapPkthdr::default(),
                _program: handed.map(|handed| handed.link),
            },
            warning,
        })
    }

    /// Whether word of a link change came since the last look (read, so the selectable
    /// set is quiet again); looked at once every `every` at most.
    pub fn link_changed(&mut self, every: std::time::Duration) -> bool {
        let Some(events) = self.link_events.as_mut() else {
            return false;
        };
        if self.link_events_read.elapsed() < every {
            return false;
        }
        self.link_events_read = std::time::Instant::now();
        events.take().unwrap_or(false)
    }

    /// Reads the wake eventfd empty (it is non-blocking).
    pub fn drain_wake(&self) {
        drain_eventfd(&self.wake);
    }

    /// Makes the selectable descriptor say whether packets wait in the batch: a system
    /// call only when that changes (twice a burst at most).
    pub fn signal_pending(&mut self) {
        let waiting = self.next < self.batch.len();
        if waiting == self.pending_signalled {
            return;
        }
        if waiting {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
            let _ = unsafe { libc::write(self.pending.as_raw_fd(), (&raw const one).cast(), 8) };
        } else {
            drain_eventfd(&self.pending);
        }
        self.pending_signalled = waiting;
    }
}

/// Reads a non-blocking eventfd empty.
fn drain_eventfd(fd: &OwnedFd) {
    let mut value = 0u64;
    // SAFETY: reads at most 8 bytes into a live u64 from an eventfd we own.
    let _ = unsafe { libc::read(fd.as_raw_fd(), (&raw mut value).cast(), 8) };
}

/// The fewest frames a port is cut down to when locked memory runs short.
const FEWEST_FRAMES: u32 = 256;

/// Opens the port, halving its frames while the kernel refuses the UMEM for want of
/// lockable memory (ENOBUFS). RLIMIT_MEMLOCK counts every UMEM of the user that lacks
/// CAP_IPC_LOCK, and the kernel gives a closed socket's UMEM back a little later (a work
/// queue): what is left is not known beforehand, and grows again shortly (tshark's
/// dumpcap opens the device once to ask what it can do, then again to capture).
fn open_within_memlock(
    spec: &PortSpec,
    mut opts: PortOptions,
) -> Result<(Box<dyn Port + Send>, u32), PortError> {
    loop {
        match wirespeed_port::open(spec, &opts) {
            Ok(port) => return Ok((port, opts.frame_count)),
            Err(PortError::Xsk(e))
                if e.os_error() == Some(libc::ENOBUFS) && opts.frame_count / 2 >= FEWEST_FRAMES =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
                opts.frame_count /= 2;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The attach mode to ask the broker for: None lets it try native, then skb.
fn attach_preference(mode: XdpMode) -> Option<AttachMode> {
    match mode {
        XdpMode::Auto => None,
        XdpMode::ZeroCopy | XdpMode::Copy | XdpMode::Native => Some(AttachMode::Native),
        XdpMode::Skb => Some(AttachMode::Skb),
    }
}

/// Registers the port's sockets in the handed-over program's map, each at its queue: the
/// port's descriptors come in queue order (`@all`: every queue from 0).
fn register(h: &Handle, port: &dyn Port, handed: &Handover) -> Result<(), Refused> {
    let queues = h.spec.queues(wirespeed_xsk::rx_queue_count(&h.spec.iface));
    for (fd, &queue) in port.poll_fds().into_iter().zip(&queues) {
        wirespeed_xdp::handover::register(&handed.xsks, queue, fd).map_err(|e| Refused {
            code: PCAP_ERROR,
            message: format!("{}: {e}", h.device),
        })?;
    }
    Ok(())
}

/// The interface and queue exist: checked before the broker attaches anything.
fn check_place(spec: &PortSpec) -> Result<(), PortError> {
    if wirespeed_xsk::if_index(&spec.iface).is_none() {
        return Err(PortError::NoInterface(spec.iface.clone()));
    }
    let count = wirespeed_xsk::queue_count(&spec.iface);
    if !spec.many_queues() && spec.queue >= count {
        return Err(PortError::NoQueue {
            iface: spec.iface.clone(),
            queue: spec.queue,
            count,
        });
    }
    Ok(())
}

/// An xdp: device takes every packet of its queues from the kernel's stack (whatever the
/// filter), which libpcap's devices never do: on an interface the host uses (one with an
/// address) that cuts the host off, so it is refused there without pcap-run --take, as
/// `wirespeed capture` refuses it. (Wireshark opens every listed device for its graphs.)
fn check_take(iface: &str, take: bool) -> Result<(), String> {
    let addrs = wirespeed_port::stack_addresses(iface);
    if take || addrs.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    Err(format!(
        "{iface} has addresses ({}): an xdp: device takes the packets it captures from the \
         kernel's stack, so this host would stop receiving on {iface} while it runs; capture \
         on {iface} (libpcap's own) to watch, or run with pcap-run --take",
        list.join(", ")
    ))
}

/// libpcap's status for the broker's error text.
fn status_of_text(text: &str) -> i32 {
    if is_permission(text) {
        PCAP_ERROR_PERM_DENIED
    } else if text.contains("no such interface") {
        PCAP_ERROR_NO_SUCH_DEVICE
    } else {
        PCAP_ERROR
    }
}

/// libpcap's status for a port that would not open: a missing interface or queue is "no such
/// device" (the device name names them), a refused privilege "permission denied".
fn status_of(e: &PortError) -> i32 {
    use wirespeed_xsk::XskError;
    match e {
        PortError::NoInterface(_) | PortError::NoQueue { .. } => PCAP_ERROR_NO_SUCH_DEVICE,
        PortError::Xsk(XskError::NoInterface(_) | XskError::NoQueue { .. }) => {
            PCAP_ERROR_NO_SUCH_DEVICE
        }
        PortError::Xdp(x) if is_permission(&x.to_string()) => PCAP_ERROR_PERM_DENIED,
        PortError::Xsk(x) if matches!(x.os_error(), Some(libc::EPERM | libc::EACCES)) => {
            PCAP_ERROR_PERM_DENIED
        }
        PortError::Umem { .. } | PortError::Io { .. } if is_permission(&e.to_string()) => {
            PCAP_ERROR_PERM_DENIED
        }
        _ => PCAP_ERROR,
    }
}

/// Whether `iface` is administratively up (IFF_UP), as its sysfs flags say: a carrier is
/// not asked for, as libpcap does not ask.
fn admin_up(iface: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/flags"))
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_none_or(|flags| flags & libc::IFF_UP as u32 != 0)
}

fn is_permission(text: &str) -> bool {
    text.contains("Operation not permitted") || text.contains("Permission denied")
}

fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An epoll set that is readable when any of `fds` is: one descriptor for select/poll on a
/// port of several sockets.
fn epoll_of(fds: &[RawFd]) -> std::io::Result<OwnedFd> {
    // SAFETY: no pointers; a non-negative result is a new descriptor we own.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: ep was just created and is owned by nothing else.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for &fd in fds {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `event` is a valid epoll_event for the duration of the call.
        let r = unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(ep)
}

/// Puts the interface in promiscuous mode for as long as the returned socket is open (a
/// packet socket's membership, as libpcap does it on Linux): the kernel takes it back when
/// the process ends, however it ends.
fn promiscuous(ifindex: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: no pointers; protocol 0 receives nothing, the socket only holds the mode.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as i32,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    // SAFETY: passes a live packet_mreq and its exact size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            (&raw const mreq).cast(),
            std::mem::size_of::<libc::packet_mreq>() as u32,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}
