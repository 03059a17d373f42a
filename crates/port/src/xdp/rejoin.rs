//! A member whose interface was deleted binds again to the interface made since under its
//! name (a container restarted deletes its veth and makes another): the frames its old rings
//! still hold go back to the pool, and a new socket on the same UMEM takes its place, with
//! our redirect program attached to the new interface (or joined, where another group of
//! this process attached it first). Its counters go on from where they were.

use wirespeed_xsk::LinkState;

use super::group::XdpGroup;
use super::open::{Placement, bind_member, check_place, first_fill, mode_name};
use crate::PortError;

impl XdpGroup {
    /// Binds member `port`, whose interface is gone, to the interface of its name now.
    /// Refused (and the member left as it was) where its old interface still exists, none
    /// has its name, the new one lacks its queue, or it has a spill ring; the caller's own
    /// program (`PortOptions::program_attached`) must register the new socket
    /// (`socket_fd`).
    pub fn rejoin(&mut self, port: usize) -> Result<(), PortError> {
        let spec = self.members[port].spec.clone();
        if wirespeed_xsk::link_state(self.members[port].ifindex) != LinkState::Gone {
            return Err(PortError::Unsupported(format!(
                "{spec}: its interface is still there: nothing to bind again"
            )));
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
            .find(|&(i, m)| i != port && wirespeed_xsk::link_state(m.ifindex) != LinkState::Gone)
            .map(|(_, m)| &m.socket);
        let place = Placement {
            owner,
            attach: Some(self.attach_mode),
            attach_program: opts.rx && opts.program_attached.is_none(),
        };
        let mut notes = Vec::new();
        let (program, socket, attach) = bind_member(&spec, &opts, &self.umem, place, &mut notes)?;
        let m = &mut self.members[port];
        let (_, lost) = m.socket.take_back_frames(&self.umem, &mut self.pool);
        self.lost += lost;
        m.stats.tx_stranded += m.tx_in_flight;
        m.tx_in_flight = 0;
        if let Ok(k) = m.socket.statistics() {
            m.retired = m.retired.plus(k);
        }
        // The old program went with its interface; the old socket closes after it.
        m._program = program;
        m.socket = socket;
        m.ifindex = wirespeed_xsk::if_index(&spec.iface).unwrap_or(0);
        m.info.mode = mode_name(&m.socket, attach).to_string();
        m.rx_outstanding = 0;
        if opts.rx {
            // As many as when the group opened, as far as the pool has them.
            m.rx_outstanding = m.socket.refill(&mut self.pool, first_fill(&opts));
        }
        let fd = m.socket.raw_fd();
        if let Some(program) = m._program.as_mut() {
            program.register(spec.queue, fd)?;
        }
        Ok(())
    }
}
