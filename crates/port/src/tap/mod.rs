//! The tap backend (`tap:NAME`): a port onto the host's own network stack, as Open vSwitch's
//! internal ports and netmap's host rings give one. What the host sends out of the tap
//! device arrives here; what is sent here, the host receives on it. The device is made when
//! there is none, and then goes away with the port.
//!
//! A tap device has no ring to share: each packet is one read or one write on its file
//! descriptor, into frames of a buffer area of our own. It is the way to the host, not a
//! fast path, and whatever forwards to or from it copies (and counts the copies). Several
//! ports can be on one device (one per thread, `TapDevice`): each writes, one reads.

mod sys;

use std::fs::File;
use std::io::{ErrorKind, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use crate::heap_frames::{HeapFrames, unused_option_notes};
use crate::{
    Backend, Batch, FrameAudit, LinkState, Port, PortError, PortInfo, PortOptions, PortSpec,
    PortStats,
};

/// How long an empty device is left alone before the next read: a read is a system call,
/// and an application polling several ports (the switch) would otherwise pay one every
/// round. The host's packets wait at most this much longer.
const EMPTY_BACKOFF: Duration = Duration::from_micros(20);

/// An open tap device, for the ports on it to share: a device takes one reader, and the
/// kernel refuses a second open of a device without queues.
pub struct TapDevice {
    name: String,
    file: File,
}

impl TapDevice {
    pub fn open(spec: &PortSpec) -> Result<TapDevice, PortError> {
        let name = spec.iface.as_str();
        let file = sys::open_tap(name).map_err(|source| open_error(name, source))?;
        Ok(TapDevice {
            name: name.to_string(),
            file,
        })
    }
}

/// A port on a tap device, and the frames its packets are read into and written from.
pub struct TapPort {
    info: PortInfo,
    /// The device's name.
    name: String,
    /// Its index when the port opened: what `link` asks about.
    ifindex: u32,
    file: File,
    frames: HeapFrames,
    receives: bool,
    sends: bool,
    stats: PortStats,
    /// The device's count of packets it dropped for want of room towards us, at open (the
    /// receiving port on a device counts them).
    kernel_drops_at_open: u64,
    /// No read before this: the last one found the device empty.
    empty_until: Option<Instant>,
}

impl TapPort {
    /// A port on tap device `spec` (made if there is none), alone on it.
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<TapPort, PortError> {
        TapPort::on(&TapDevice::open(spec)?, opts)
    }

    /// A port on an open device, next to the others on it. At most one of them receives
    /// (`opts.rx`): the kernel hands each packet to one reader.
    pub fn on(device: &TapDevice, opts: &PortOptions) -> Result<TapPort, PortError> {
        let (spec, name) = (format!("tap:{}", device.name), device.name.as_str());
        if opts.frame_size != 2048 && opts.frame_size != 4096 {
            return Err(PortError::FrameSize(opts.frame_size));
        }
        if opts.frame_count == 0 {
            return Err(PortError::Unsupported(format!("{spec}: no frames")));
        }
        let file = device.file.try_clone().map_err(|source| PortError::Io {
            iface: name.to_string(),
            what: "share the tap device's descriptor",
            source,
        })?;
        let mut notes = unused_option_notes(opts, "tap");
        if !is_up(name) {
            notes.push(format!(
                "{name} is down: the host neither sends on it nor takes what is sent to it \
                 (ip link set {name} up)"
            ));
        }
        Ok(TapPort {
            info: PortInfo {
                spec,
                backend: Backend::Tap,
                mode: "tap".to_string(),
                notes,
                busy_poll: false,
                multi_buffer: None,
            },
            name: name.to_string(),
            ifindex: wirespeed_xsk::if_index(name).unwrap_or(0),
            file,
            frames: HeapFrames::new(opts.frame_count, opts.frame_size),
            receives: opts.rx,
            sends: opts.tx,
            stats: PortStats::default(),
            kernel_drops_at_open: device_counter(name, "tx_dropped"),
            empty_until: None,
        })
    }

    fn io_error(&self, what: &'static str, source: std::io::Error) -> PortError {
        PortError::Io {
            iface: self.name.clone(),
            what,
            source,
        }
    }
}

impl Port for TapPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        if !self.receives {
            return Ok(0);
        }
        if let Some(until) = self.empty_until {
            if Instant::now() < until {
                return Ok(0);
            }
            self.empty_until = None;
        }
        let size = self.frames.frame_size();
        let mut count = 0;
        while batch.room() > 0 {
            let Some(addr) = self.frames.take() else {
                break;
            };
            // One byte past the frame: the kernel cuts a longer packet to fit what it is
            // given and says nothing, so a packet that reaches that byte is too long.
            let mut past = [0u8; 1];
            let mut bufs = [
                IoSliceMut::new(self.frames.packet_mut(addr, size)),
                IoSliceMut::new(&mut past),
            ];
            match self.file.read_vectored(&mut bufs) {
                Ok(n) if n > size as usize => {
                    self.frames.give_back(addr);
                    self.stats.drops.rx_invalid_desc += 1;
                }
                Ok(n) => {
                    batch.push(addr, n as u32);
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += n as u64;
                    count += 1;
                }
                Err(e) => {
                    self.frames.give_back(addr);
                    match e.kind() {
                        ErrorKind::WouldBlock => {
                            self.empty_until = Some(Instant::now() + EMPTY_BACKOFF);
                            break;
                        }
                        ErrorKind::Interrupted => break,
                        // A device deleted under us reads EBADFD: gone, not a failure.
                        _ => {
                            return Err(PortError::of_link(
                                &self.info.spec,
                                self.ifindex,
                                "read",
                                e,
                            ));
                        }
                    }
                }
            }
        }
        Ok(count)
    }

    fn tx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        // Queued, as the trait counts: handed to the kernel, which may still refuse it (as it
        // may fail a queued AF_XDP frame), counted then as tx_error.
        let mut queued = 0;
        for (addr, len) in batch.iter() {
            if self.frames.range(addr, len).is_none() {
                // Not a frame of ours: the caller broke the contract; count it, send nothing.
                self.stats.drops.tx_invalid_desc += 1;
                continue;
            }
            queued += 1;
            // A tap takes every write at once or refuses it (down, say): nothing waits.
            match self.file.write(self.frames.packet(addr, len)) {
                Ok(_) => {
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += u64::from(len);
                }
                Err(_) => self.stats.drops.tx_error += 1,
            }
            self.frames.give_back(addr);
        }
        batch.clear();
        Ok(queued)
    }

    fn release(&mut self, batch: &mut Batch) {
        self.frames.release(batch);
    }

    fn alloc_tx(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        match self.sends {
            true => self.frames.alloc(batch, n, len),
            false => 0,
        }
    }

    fn packet(&self, addr: u64, len: u32) -> &[u8] {
        self.frames.packet(addr, len)
    }

    fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        self.frames.packet_mut(addr, len)
    }

    fn max_packet_len(&self) -> u32 {
        self.frames.frame_size()
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError> {
        // Whatever poll() says, the next rx_burst reads.
        self.empty_until = None;
        crate::poll_any(&self.poll_fds(), timeout)
            .map(|_| ())
            .map_err(|e| self.io_error("poll", e))
    }

    fn poll_fds(&self) -> Vec<RawFd> {
        self.receives
            .then(|| self.file.as_raw_fd())
            .into_iter()
            .collect()
    }

    fn tx_pending(&self) -> bool {
        false
    }

    fn stats(&mut self) -> PortStats {
        // What the host sent while our side of the device had no room: the reader's count.
        if self.receives {
            let dropped = device_counter(&self.name, "tx_dropped");
            self.stats.drops.rx_ring_full = dropped.saturating_sub(self.kernel_drops_at_open);
        }
        self.stats
    }

    fn audit(&self) -> Option<FrameAudit> {
        Some(self.frames.audit())
    }

    fn link(&self) -> LinkState {
        wirespeed_xsk::link_state(self.ifindex)
    }
}

/// What went wrong attaching to the device, in words: the kernel's errors are terse.
fn open_error(name: &str, source: std::io::Error) -> PortError {
    let why = match source.raw_os_error() {
        Some(libc::EINVAL) => format!("tap:{name}: {name} exists and is not a tap device"),
        Some(libc::EBUSY) => format!("tap:{name}: tap device {name} is open in another program"),
        Some(libc::EPERM) => {
            format!("tap:{name}: a tap device needs CAP_NET_ADMIN (run as root)")
        }
        _ => {
            return PortError::Io {
                iface: name.to_string(),
                what: "open a tap device (/dev/net/tun)",
                source,
            };
        }
    };
    PortError::Unsupported(why)
}

/// A counter of the device from sysfs; 0 when it cannot be read.
fn device_counter(name: &str, counter: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/{counter}"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// True when the device is administratively up (IFF_UP in sysfs's flags).
fn is_up(name: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{name}/flags"))
        .ok()
        .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|flags| flags & libc::IFF_UP as u32 != 0)
}
