//! A member whose interface was deleted binds again to the interface made since under its
//! name (a container restarted deletes its veth and makes another): a new socket on the
//! same UMEM takes its place, with our redirect program attached to the new interface (or
//! joined, where another group of this process attached it first), and the frames the old
//! socket's rings still hold go back to the pool. Its counters go on from where they were.

use super::group::XdpGroup;
use super::open::{Placement, bind_member, check_place, first_fill, mode_name};
use crate::PortError;

impl XdpGroup {
    /// Binds member `port`, whose socket the kernel unbound (its interface deleted, or moved
    /// to another network namespace), to interface `ifindex`, which has its name now. Done
    /// already when it is bound there (asking again is harmless). Refused, the member left
    /// as it was, where it is bound elsewhere, the interface of its name is another by now
    /// or lacks its queue, or the member has a spill ring. The caller's own program
    /// (`PortOptions::program_attached`) must register the new socket (`socket_fd`).
    pub fn rejoin(&mut self, port: usize, ifindex: u32) -> Result<(), PortError> {
        let spec = self.members[port].spec.clone();
        let bound_to = self.members[port].ifindex;
        if self.members[port].socket.is_bound() {
            return match bound_to == ifindex {
                true => Ok(()),
                false => Err(PortError::Unsupported(format!(
                    "{spec}: still bound to the interface of index {bound_to}"
                ))),
            };
        }
        if self.spill.is_some() {
            return Err(PortError::Unsupported(format!(
                "{spec}: a port with a spill ring is not bound again"
            )));
        }
        check_place(&spec)?;
        self.reclaim(port);
        let opts = self.opts.clone();
        // A socket of the UMEM still bound, to share it through; with none (every member's
        // interface deleted), the new socket registers the same memory again.
        let owner = self
            .members
            .iter()
            .enumerate()
            .find(|&(i, m)| i != port && m.socket.is_bound())
            .map(|(_, m)| &m.socket);
        let place = Placement {
            owner,
            attach: Some(self.attach_mode),
            attach_program: opts.rx && opts.program_attached.is_none(),
        };
        let mut notes = Vec::new();
        let (mut program, mut socket, attach) =
            bind_member(&spec, &opts, &self.umem, place, &mut notes)?;
        if socket.ifindex() != ifindex {
            return Err(PortError::Unsupported(format!(
                "{spec}: {} was made again meanwhile (index {}, not {ifindex})",
                spec.iface,
                socket.ifindex()
            )));
        }
        // Registered before it has frames, so a failure leaves none with it (a zero-copy
        // driver takes fill entries as soon as the socket binds).
        if let Some(program) = program.as_mut() {
            program.register(spec.queue, socket.raw_fd())?;
        }
        let m = &mut self.members[port];
        let (_, lost) = m.socket.take_back_frames(&self.umem, &mut self.pool);
        self.lost += lost;
        if let Ok(k) = m.socket.statistics() {
            m.retired = m.retired.plus(k);
        }
        m.stats.tx_stranded += m.tx_in_flight;
        m.tx_in_flight = 0;
        let spare = self.pool.len().saturating_sub(self.tx_reserve) as u32;
        m.rx_outstanding = match opts.rx {
            true => socket.refill(&mut self.pool, first_fill(&opts).min(spare)),
            false => 0,
        };
        m.ifindex = ifindex;
        m.info.mode = mode_name(&socket, attach).to_string();
        m.info.busy_poll = socket.busy_polls();
        m.info.multi_buffer = socket
            .multi_buffer()
            .then_some(wirespeed_xsk::TX_MAX_SEGMENTS as u32);
        // The old program went with its interface; the old socket closes after it.
        m._program = program;
        m.socket = socket;
        Ok(())
    }
}
