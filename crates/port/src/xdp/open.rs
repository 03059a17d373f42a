//! Opening AF_XDP ports: checking the place, mapping the UMEM, attaching our redirect program,
//! binding and sizing the sockets, filling their fill rings and registering them with the
//! program. Set-up only, once per port; the per-burst path is in `group.rs` (as `xsk` splits
//! `socket.rs` from `datapath.rs`).

use wirespeed_umem::{Umem, UmemConfig, UmemError};
use wirespeed_xdp::{AttachMode, XskProgram};
use wirespeed_xsk::{BindMode, Socket, SocketConfig, SpillLevels};

use super::MAX_QUEUES;
use super::group::{Member, XdpGroup};
use super::spill::Spill;
use crate::{Backend, PortError, PortInfo, PortOptions, PortSpec, PortStats};

impl XdpGroup {
    /// Opens one port per spec on a UMEM of `opts.frame_count` frames per port. The first
    /// spec picks the mode (see `XdpMode`); the others share it.
    pub fn open(specs: &[PortSpec], opts: &PortOptions) -> Result<XdpGroup, PortError> {
        XdpGroup::open_on(specs, opts, None)
    }

    /// One group per queue `0..queues` of the interfaces of `specs` (whose own queue numbers
    /// are ignored): group `q` has a socket on queue `q` of every interface, on a UMEM of its
    /// own, so each group can be owned by a different thread (a poll-mode thread per
    /// receive queue). The redirect programs are attached once, by group 0, and send each
    /// queue's packets to its group's socket; the mode is group 0's.
    pub fn open_queues(
        specs: &[PortSpec],
        queues: u32,
        opts: &PortOptions,
    ) -> Result<Vec<XdpGroup>, PortError> {
        let on_queue = |q: u32| -> Vec<PortSpec> { specs.iter().map(|s| s.on_queue(q)).collect() };
        let mut first = XdpGroup::open_on(&on_queue(0), opts, None)?;
        let mut rest = Vec::new();
        for q in 1..queues.max(1) {
            rest.push(XdpGroup::open_on(&on_queue(q), opts, Some(&mut first))?);
        }
        rest.insert(0, first);
        Ok(rest)
    }

    /// `open`, for queues whose redirect program `serving` attached (one per interface):
    /// bind in its mode and register there.
    pub fn open_served(
        specs: &[PortSpec],
        opts: &PortOptions,
        serving: &mut XdpGroup,
    ) -> Result<XdpGroup, PortError> {
        XdpGroup::open_on(specs, opts, Some(serving))
    }

    /// `open`, or with `programs_of` a group whose redirect programs (one per member, same
    /// interfaces in the same order) already run: bind in its mode and register there.
    fn open_on(
        specs: &[PortSpec],
        opts: &PortOptions,
        programs_of: Option<&mut XdpGroup>,
    ) -> Result<XdpGroup, PortError> {
        check_options(specs, opts)?;
        let umem = map_umem(specs, opts)?;
        let mut programs_of = programs_of;
        let attach_mode = programs_of.as_ref().map(|g| g.attach_mode);
        let Bound {
            mut members,
            serving,
            attach_mode,
        } = bind_members(specs, opts, &umem, attach_mode, programs_of.is_none())?;
        let spill = match opts.spill_bytes > 0 && opts.rx {
            true => {
                let program = match programs_of.as_deref_mut() {
                    // A group served by another's program spills to its ring there.
                    Some(serving) => serving.program_on(&specs[0].iface),
                    None => members[0]._program.as_mut(),
                };
                Some(open_spill(specs, program, opts.spill_ring, &umem)?)
            }
            false => None,
        };
        let mut group = XdpGroup {
            pool: umem.frame_pool(),
            umem,
            members,
            app_held: 0,
            burst: opts.batch.max(1),
            attach_mode: attach_mode.unwrap_or(AttachMode::Native),
            tx_reserve: (opts.frame_count / 4) as usize,
            spill,
            opts: opts.clone(),
            lost: 0,
        };
        if opts.rx {
            group.fill_rings(opts);
        }
        // Only now does a program send packets to the sockets: their fill rings are full
        // and the spill program's counts start from here.
        group.register(specs, &serving, programs_of)?;
        Ok(group)
    }

    /// Gives each member's fill ring its first frames.
    fn fill_rings(&mut self, opts: &PortOptions) {
        let n = first_fill(opts);
        for (i, m) in self.members.iter_mut().enumerate() {
            let given = m.socket.refill(&mut self.pool, n);
            // Later refills may go as far as the pool's reserve allows a port on its own.
            m.rx_share = opts.frame_count - opts.frame_count / 4;
            m.rx_outstanding = given;
            if let Some(spill) = self.spill.as_mut() {
                spill.enable(i, &m.socket, opts.ring_size, given as u64, opts.spill_ring);
            }
        }
    }

    /// Registers each member's socket with the program that serves its queue.
    fn register(
        &mut self,
        specs: &[PortSpec],
        serving: &[Server],
        mut programs_of: Option<&mut XdpGroup>,
    ) -> Result<(), PortError> {
        for (i, spec) in specs.iter().enumerate() {
            let fd = self.members[i].socket.raw_fd();
            let program = match serving[i] {
                Server::Own => self.members[i]._program.as_mut(),
                Server::Member(j) => self.members[j]._program.as_mut(),
                // The member of the other group that attached to this interface.
                Server::Other => programs_of
                    .as_deref_mut()
                    .and_then(|g| g.program_on(&spec.iface)),
            };
            if let Some(p) = program {
                p.register(spec.queue, fd)?;
            }
        }
        Ok(())
    }
}

/// Checks the options and that every spec's interface and queue exist, before anything is
/// created.
fn check_options(specs: &[PortSpec], opts: &PortOptions) -> Result<(), PortError> {
    if opts.frame_size != 2048 && opts.frame_size != 4096 {
        return Err(PortError::FrameSize(opts.frame_size));
    }
    if !opts.ring_size.is_power_of_two() || !(64..=65536).contains(&opts.ring_size) {
        return Err(PortError::RingSize(opts.ring_size));
    }
    for spec in specs {
        check_place(spec)?;
    }
    Ok(())
}

/// The group's UMEM: `opts.frame_count` frames per member.
fn map_umem(specs: &[PortSpec], opts: &PortOptions) -> Result<Umem, PortError> {
    let first = specs.first().map_or("", |s| s.iface.as_str());
    let config = UmemConfig {
        frame_count: opts.frame_count * specs.len().max(1) as u32,
        frame_size: opts.frame_size,
        headroom: opts.headroom,
        hugepages: opts.hugepages,
    };
    Umem::new_cancellable(config, opts.cancel.as_deref()).map_err(|source| match source {
        UmemError::Cancelled => PortError::Cancelled(first.to_string()),
        source => PortError::Umem {
            what: format!("{first}: UMEM"),
            source,
        },
    })
}

/// Binds a socket for each spec on `umem` (the first owns it, the others share it), each
/// attaching our program where it is the first on its interface and `attach_programs` (no
/// other group's or the caller's program serves it). Returns the members, whose program
/// serves each, and the attach mode they got (`attach_mode`: one an earlier group chose).
fn bind_members(
    specs: &[PortSpec],
    opts: &PortOptions,
    umem: &Umem,
    mut attach_mode: Option<AttachMode>,
    attach_programs: bool,
) -> Result<Bound, PortError> {
    let note = umem.note().map(str::to_string);
    let mut members: Vec<Member> = Vec::with_capacity(specs.len());
    // Whose program sends each member its packets.
    let mut serving: Vec<Server> = Vec::with_capacity(specs.len());
    for spec in specs {
        if opts.cancelled() {
            return Err(PortError::Cancelled(spec.to_string()));
        }
        let mut notes: Vec<String> = note.iter().cloned().collect();
        // Another queue of an interface an earlier member attached to: its program serves
        // this queue too (one program per interface).
        let earlier = members
            .iter()
            .position(|m| m._program.as_ref().is_some_and(|p| p.iface() == spec.iface));
        let place = Placement {
            owner: members.first().map(|m| &m.socket),
            attach: attach_mode,
            attach_program: attach_programs && opts.program_attached.is_none() && earlier.is_none(),
        };
        let place_owner_less = place.owner.is_none();
        let (program, socket, attach) = bind_member(spec, opts, umem, place, &mut notes)?;
        if let Some(why) = multi_buffer_off(opts, &socket, place_owner_less) {
            notes.push(why);
        }
        if opts.busy_poll && !socket.busy_polls() {
            notes.push(format!(
                "busy poll: the kernel busy-polls zero-copy sockets only (Linux 6.13 and \
                 later), and this one is in {} mode: polling as without it",
                mode_name(&socket, attach)
            ));
        }
        attach_mode = Some(attach);
        serving.push(match (&program, earlier) {
            (Some(_), _) => Server::Own,
            (None, Some(j)) => Server::Member(j),
            (None, None) => Server::Other,
        });
        members.push(Member {
            info: PortInfo {
                spec: spec.to_string(),
                backend: Backend::Xdp,
                mode: mode_name(&socket, attach).to_string(),
                notes,
                busy_poll: socket.busy_polls(),
                multi_buffer: socket
                    .multi_buffer()
                    .then_some(wirespeed_xsk::TX_MAX_SEGMENTS as u32),
            },
            _program: program,
            socket,
            stats: PortStats::default(),
            tx_in_flight: 0,
            ifindex: wirespeed_xsk::if_index(&spec.iface).unwrap_or(0),
            rx_outstanding: 0,
            rx_share: 0,
            queue: spec.queue,
            spec: spec.clone(),
            retired: Default::default(),
        });
    }
    Ok(Bound {
        members,
        serving,
        attach_mode,
    })
}

/// A group's members as bound: whose program serves each, and the attach mode they got.
struct Bound {
    members: Vec<Member>,
    serving: Vec<Server>,
    attach_mode: Option<AttachMode>,
}

/// Whose redirect program serves a member: its own, an earlier member's on the same
/// interface, or another group's (or the caller's).
#[derive(Clone, Copy)]
enum Server {
    Own,
    Member(usize),
    Other,
}

/// Spill ring `ring` of `program` (the first member's, or that of the group serving this
/// one), for members all on its interface.
fn open_spill(
    specs: &[PortSpec],
    program: Option<&mut XskProgram>,
    ring: u32,
    umem: &Umem,
) -> Result<Spill, PortError> {
    let first = &specs[0];
    if specs.iter().any(|s| s.iface != first.iface) {
        return Err(PortError::Unsupported(format!(
            "{first}: a spill ring serves the queues of one interface, not a group of several"
        )));
    }
    let program = program.ok_or_else(|| {
        PortError::Unsupported(format!(
            "{first}: a spill ring needs wirespeed's own XDP program on the interface"
        ))
    })?;
    let (ring, levels_fd) = program.take_spill(ring)?;
    let levels = SpillLevels::map(levels_fd, MAX_QUEUES).map_err(|source| PortError::Io {
        iface: first.to_string(),
        what: "map the spill levels",
        source,
    })?;
    let queues: Vec<u32> = specs.iter().map(|s| s.queue).collect();
    if let Some(q) = queues.iter().find(|&&q| q >= MAX_QUEUES) {
        return Err(PortError::Unsupported(format!(
            "{first}: queue {q}: a spill ring serves queues below {MAX_QUEUES}"
        )));
    }
    Ok(Spill::new(ring, levels, &queues, umem))
}

/// Checks that the interface and queue of `spec` exist, before anything is created.
pub(super) fn check_place(spec: &PortSpec) -> Result<(), PortError> {
    if wirespeed_xsk::if_index(&spec.iface).is_none() {
        return Err(PortError::NoInterface(spec.iface.clone()));
    }
    let count = wirespeed_xsk::queue_count(&spec.iface);
    if spec.queue >= count {
        return Err(PortError::NoQueue {
            iface: spec.iface.clone(),
            queue: spec.queue,
            count,
        });
    }
    Ok(())
}

/// The frames a member's fill ring starts with. Half of each port's frames wait there, the
/// rest serve transmit. A port that only receives starts with all but the reserve there,
/// where rx_burst's refills would take it anyway: the frames waiting in the fill ring are
/// how long the kernel can go on delivering while we are not looking, from the first packet
/// on. The reserve stays even then, since fewer frames in flight stay in the caches (rxdrop
/// with every frame in flight: 3% slower in 3 interleaved runs).
pub(super) fn first_fill(opts: &PortOptions) -> u32 {
    let share = if opts.tx {
        opts.frame_count / 2
    } else {
        opts.frame_count - opts.frame_count / 4
    };
    share.min(socket_config(opts).fill_size)
}

/// The largest ring of any kind (entries).
const MAX_RING: u32 = 65536;

/// The ring sizes and options of a member socket.
fn socket_config(opts: &PortOptions) -> SocketConfig {
    SocketConfig {
        rx_size: if opts.rx { opts.ring_size } else { 0 },
        tx_size: if opts.tx { opts.ring_size } else { 0 },
        // Twice the RX ring (frames wait there while the RX ring holds a backlog), up to the
        // largest ring we map.
        fill_size: if opts.rx {
            (opts.ring_size * 2).min(MAX_RING)
        } else {
            64
        },
        completion_size: opts.ring_size,
        mode: BindMode::Any,
        need_wakeup: true,
        busy_poll_budget: opts.busy_poll.then_some(opts.batch),
        // The spill ring copies packets into single frames (bpf/xsk_spill.c).
        multi_buffer: opts.multi_buffer && opts.spill_bytes == 0,
    }
}

/// Why a port asked for multi-buffer has it off, said once, by the UMEM's owner (the
/// sockets sharing its UMEM inherit its answer).
fn multi_buffer_off(opts: &PortOptions, socket: &Socket, owner: bool) -> Option<String> {
    if !opts.multi_buffer || socket.multi_buffer() || !owner {
        return None;
    }
    Some(match opts.spill_bytes > 0 {
        true => "multi-buffer off: packets larger than a frame do not pass a spill ring; \
                  they are dropped and counted"
            .to_string(),
        false => "multi-buffer off: the kernel refused XDP_USE_SG (Linux 6.6 or later, and \
                  in zero-copy mode a driver with multi-buffer): packets larger than a frame \
                  are dropped and counted"
            .to_string(),
    })
}

/// Where a member socket goes: on whose UMEM, in which attach mode, with a program of its own.
pub(super) struct Placement<'a> {
    /// The UMEM's first socket, for later members (XDP_SHARED_UMEM).
    pub(super) owner: Option<&'a Socket>,
    /// The attach mode already chosen (by an earlier member or another group).
    pub(super) attach: Option<AttachMode>,
    /// Attach our redirect program (false: another group's program serves this queue).
    pub(super) attach_program: bool,
}

/// Attaches the program (for receiving) and binds a socket for `spec`, not yet registered
/// with the program (the caller does that once the socket is ready). The first member of
/// a UMEM tries the attach/bind pairs of the mode in order and returns the first that works;
/// later members share the owner's UMEM, attach mode and bind mode. A foreign program or a
/// missing interface ends the search at once.
pub(super) fn bind_member(
    spec: &PortSpec,
    opts: &PortOptions,
    umem: &Umem,
    place: Placement<'_>,
    notes: &mut Vec<String>,
) -> Result<(Option<XskProgram>, Socket, AttachMode), PortError> {
    let config = socket_config(opts);
    let mut last_err = None;
    let mut tried: Vec<String> = Vec::new();
    let attempts = bind_attempts(&place, opts);
    for &(attach, bind) in &attempts {
        let program = if opts.rx && place.attach_program {
            match attach_program(spec, opts, attach) {
                // Another process's program, joined: it runs where it runs.
                Ok(p) if p.mode() != attach => match attempts.iter().any(|a| a.0 == p.mode()) {
                    // An attempt of the XDP mode asked for binds in its mode.
                    true => continue,
                    false => return Err(mode_mismatch(spec, opts, attach, &p)),
                },
                Ok(p) => Some(p),
                Err(e) if is_final(&e) => return Err(e),
                Err(e) => {
                    // zc and copy both attach in native mode: say a failure once.
                    let failure = format!("{} XDP: {e}", attach.name());
                    if !tried.contains(&failure) {
                        tried.push(failure);
                    }
                    last_err = Some(e);
                    continue;
                }
            }
        } else {
            None
        };
        let cfg = SocketConfig {
            mode: bind,
            ..config
        };
        let socket = match place.owner {
            Some(o) => Socket::new_shared(umem, o, &spec.iface, spec.queue, &cfg),
            None => Socket::new(umem, &spec.iface, spec.queue, &cfg),
        };
        match socket {
            Ok(socket) => {
                if !tried.is_empty() {
                    notes.push(format!("fell back after: {}", tried.join("; ")));
                }
                if let Some(shared) = program.as_ref().and_then(|p| p.shared()) {
                    notes.push(shared_note(shared));
                }
                return Ok((program, socket, attach));
            }
            // Another socket has the queue: no mode gets past that.
            Err(e @ wirespeed_xsk::XskError::QueueTaken { .. }) => return Err(e.into()),
            Err(e) => {
                tried.push(format!("{} bind: {}", bind.name(), e));
                last_err = Some(e.into());
                // `program` drops here: detached before the next attempt.
            }
        }
    }
    // Every attempt was skipped for another mode (a program that changed meanwhile).
    Err(last_err.unwrap_or_else(|| {
        PortError::Unsupported(format!(
            "{spec}: the XDP program on {} changed while the port was opening",
            spec.iface
        ))
    }))
}

/// The note of a port that joined another process's redirect program.
fn shared_note(shared: &wirespeed_xdp::SharedProgram) -> String {
    format!(
        "{}: shares the XDP program {} holds there (id {}, {} mode): each process serves \
         its own queues, and the last one to exit detaches it",
        shared.iface,
        shared.holder_text(),
        shared.id,
        shared.mode.name()
    )
}

/// Why a port cannot join the redirect program `joined` found running on its interface:
/// it runs in another mode than the `asked` one of `--xdp-mode`, and one interface's queues
/// share one program.
fn mode_mismatch(
    spec: &PortSpec,
    opts: &PortOptions,
    asked: AttachMode,
    joined: &XskProgram,
) -> PortError {
    let holder = joined
        .shared()
        .map_or_else(|| "another process".to_string(), |s| s.holder_text());
    let runs = joined.mode().name();
    PortError::Unsupported(format!(
        "{spec}: {}'s queues share the XDP program {holder} holds, which runs in {runs} mode, \
         and --xdp-mode {} asks for {} XDP: use --xdp-mode auto (or {runs}) to share it",
        spec.iface,
        opts.xdp_mode.name(),
        asked.name(),
    ))
}

/// The (attach, bind) pairs to try for a member, in order: the mode already chosen; with the
/// caller's program running in `attach` mode, the binds the XDP mode asks for there; else
/// the XDP mode's own list.
fn bind_attempts(place: &Placement<'_>, opts: &PortOptions) -> Vec<(AttachMode, BindMode)> {
    match (place.attach, opts.program_attached) {
        (Some(attach), _) => vec![(attach, BindMode::Any)],
        (None, Some(attach)) => {
            let asked: Vec<_> = opts
                .xdp_mode
                .attempts()
                .iter()
                .copied()
                .filter(|&(a, _)| a == attach)
                .collect();
            if asked.is_empty() {
                vec![(attach, BindMode::Any)]
            } else {
                asked
            }
        }
        (None, None) => opts.xdp_mode.attempts().to_vec(),
    }
}

/// Attaches our redirect program (the spilling one when asked) to `spec`'s interface.
fn attach_program(
    spec: &PortSpec,
    opts: &PortOptions,
    attach: AttachMode,
) -> Result<XskProgram, PortError> {
    let attached = if opts.spill_bytes > 0 {
        // The spill program's ring and levels serve one process: it is not shared, and
        // cannot be attached where a shared one runs.
        if let Some(shared) = wirespeed_xdp::shared_program(&spec.iface) {
            return Err(PortError::Unsupported(format!(
                "{spec}: a spill ring needs the XDP program to itself, and {} holds \
                 wirespeed's redirect program on {}, shared by queue (id {}): open the port \
                 without a spill ring (capture: --spill-mib 0) to share it",
                shared.holder_text(),
                spec.iface,
                shared.id
            )));
        }
        XskProgram::attach_spilling(
            &spec.iface,
            attach,
            opts.force,
            opts.spill_bytes,
            opts.spill_rings.max(1),
        )
    } else {
        XskProgram::attach(&spec.iface, attach, opts.force)
    };
    Ok(attached?)
}

/// An attach failure another mode would not get past: a foreign program, a failed force, a
/// missing interface.
fn is_final(e: &PortError) -> bool {
    matches!(
        e,
        PortError::Xdp(
            wirespeed_xdp::XdpError::ForeignProgram { .. }
                | wirespeed_xdp::XdpError::ForceFailed { .. }
                | wirespeed_xdp::XdpError::NoInterface(_)
        )
    )
}

/// The name of the mode a socket got.
pub(super) fn mode_name(socket: &Socket, attach: AttachMode) -> &'static str {
    if socket.is_zerocopy() {
        "zerocopy"
    } else if attach == AttachMode::Skb {
        "skb"
    } else {
        "copy"
    }
}
