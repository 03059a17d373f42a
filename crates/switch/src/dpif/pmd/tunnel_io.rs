//! A poll-mode thread's tunnel work ([`crate::tunnel`]): what its underlays receive goes to
//! its [`TunnelPlane`] first, and an output to a tunnel port is pushed and queued on the
//! underlay, in place when the packet is its frame's last output, else as a copy.

use std::time::Duration;

use wirespeed_port::{MAX_SEGMENTS, PortError};

use super::{COPY_HEADROOM, COPY_MAX, Pmd, Round};
use crate::field::TunnelOut;
use crate::tunnel::endpoint::answer_echo_in_place;
use crate::tunnel::header::OUTER_LEN;
use crate::tunnel::{Landing, TunnelPlane};

/// The inner frame of an output to a tunnel port, where it lies.
#[derive(Clone, Copy)]
pub(super) enum Inner<'a> {
    /// In the UMEM: its frame, or a chain's frames, head first.
    Umem(&'a [(u64, u32)]),
    Bytes(&'a [u8]),
}

impl Pmd {
    /// Gives the thread its side of the bridge's tunnels.
    pub fn set_tunnels(&mut self, plane: TunnelPlane) {
        self.tunnels = Some(plane);
    }

    /// The tunnel index of output `port`, if it is a tunnel port.
    #[inline]
    pub(super) fn tunnel_of(&self, port: u32) -> Option<usize> {
        self.tunnels.as_ref()?.index_of(port)
    }

    /// Whether bridge port `in_port` carries tunnels.
    #[inline]
    pub(super) fn is_underlay(&self, in_port: u32) -> bool {
        self.tunnels
            .as_ref()
            .is_some_and(|t| t.is_underlay(in_port))
    }

    /// A packet an underlay received (`segments`, head first): popped into the pipeline on
    /// its tunnel port, taken by the tunnels (ARP), or the underlay's as any other.
    pub(super) fn receive_on_underlay(
        &mut self,
        in_port: u32,
        segments: &mut [(u64, u32)],
        now: Duration,
        round: &mut Round<'_>,
    ) -> Result<(), PortError> {
        let (addr, len) = segments[0];
        let head = self.ports.umem_packet(addr, len);
        let plane = self.tunnels.as_mut().expect("an underlay has tunnels");
        let landing = match segments.len() {
            1 => plane.arrive(in_port, head, &[], now),
            // A chain's later frames (read only for a GRE checksum), gathered only for a
            // chain: a single frame does not pay for the array.
            n => {
                let mut tail: [&[u8]; MAX_SEGMENTS] = [&[]; MAX_SEGMENTS];
                for (frame, &(addr, len)) in tail.iter_mut().zip(&segments[1..]) {
                    *frame = self.ports.umem_packet(addr, len);
                }
                plane.arrive(in_port, head, &tail[..n - 1], now)
            }
        };
        self.send_pending()?;
        match landing {
            Landing::Pipeline => self.forward_in_place(in_port, segments, None, now, round),
            Landing::Consumed => {
                self.ports.free_umem(segments);
                Ok(())
            }
            Landing::Echo => {
                let (frame, offset) = self.ports.umem_frame_mut(addr);
                let answered = answer_echo_in_place(&mut frame[offset..offset + len as usize]);
                match (answered, self.ports.member_of(in_port)) {
                    (true, Some(member)) => {
                        if !self.ports.queue_move(member, segments)? {
                            self.counters.no_frame += 1;
                            self.ports.free_umem(segments);
                        }
                    }
                    _ => self.ports.free_umem(segments),
                }
                Ok(())
            }
            Landing::Tunnel { port, popped } => {
                // The inner frame where it lies: a single frame ends where the outer IPv4
                // packet does (padding after it is not the inner frame's).
                let head_len = match segments.len() {
                    1 => popped.inner_len,
                    _ => len as usize - popped.inner_at,
                };
                segments[0] = (addr + popped.inner_at as u64, head_len as u32);
                self.forward_in_place(port, segments, Some(&popped.meta), now, round)
            }
        }
    }

    /// Output to tunnel `t` of the UMEM packet in `segments`; `last` when no other output
    /// comes after (the frame is this output's: pushed in its headroom, its descriptor
    /// moves to the underlay). Otherwise a copy, and the caller keeps the frames.
    pub(super) fn push_in_place(
        &mut self,
        t: usize,
        segments: &[(u64, u32)],
        last: bool,
        now: Duration,
    ) -> Result<(), PortError> {
        let tunnel = self.verdict.tunnel;
        if !last {
            return self.push_copy(t, Inner::Umem(segments), tunnel, now);
        }
        let (addr, len) = segments[0];
        let (frame, offset) = self.ports.umem_frame_mut(addr);
        if segments.len() > 1 || offset < OUTER_LEN {
            self.push_copy(t, Inner::Umem(segments), tunnel, now)?;
            self.ports.free_umem(segments);
            return Ok(());
        }
        let packet = &mut frame[offset - OUTER_LEN..offset + len as usize];
        let plane = self.tunnels.as_mut().expect("a tunnel output has tunnels");
        let pushed = plane.push(t, packet, tunnel, now);
        let underlay = plane.underlay_of(t);
        match (pushed, self.ports.member_of(underlay)) {
            (Ok(at), Some(member)) => {
                let outer = OUTER_LEN - at;
                let moved = [(addr - outer as u64, len + outer as u32)];
                if !self.ports.queue_move(member, &moved)? {
                    self.counters.no_frame += 1;
                    self.ports.free_umem(segments);
                }
            }
            _ => self.ports.free_umem(segments),
        }
        self.send_pending()
    }

    /// Output to tunnel `t` of a copy of `inner`, pushed in the thread's own buffer and
    /// copied onto the underlay; `tunnel` is the flow's when the output ran.
    pub(super) fn push_copy(
        &mut self,
        t: usize,
        inner: Inner<'_>,
        tunnel: TunnelOut,
        now: Duration,
    ) -> Result<(), PortError> {
        let mut packet = std::mem::take(&mut self.encap);
        packet.clear();
        packet.resize(OUTER_LEN, 0);
        match inner {
            Inner::Bytes(bytes) => packet.extend_from_slice(bytes),
            Inner::Umem(segments) => {
                for &(addr, len) in segments {
                    packet.extend_from_slice(self.ports.umem_packet(addr, len));
                }
            }
        }
        let plane = self.tunnels.as_mut().expect("a tunnel output has tunnels");
        let pushed = plane.push(t, &mut packet, tunnel, now);
        let underlay = plane.underlay_of(t);
        let queued = match (pushed, self.ports.member_of(underlay)) {
            (Ok(at), Some(member)) => self.ports.queue_copy(member, &packet[at..]),
            _ => Ok(true),
        };
        self.encap = packet;
        if !queued? {
            self.counters.no_frame += 1;
        }
        self.send_pending()
    }

    /// Takes in the answers to packets too big for a tunnel queued in the burst, each on its
    /// tunnel port as if its far end had sent it ([`crate::tunnel::pmtu`]).
    pub(super) fn send_too_big_answers(
        &mut self,
        now: Duration,
        round: &mut Round<'_>,
    ) -> Result<(), PortError> {
        let Some(plane) = self.tunnels.as_mut() else {
            return Ok(());
        };
        if plane.too_big_answers.is_empty() {
            return Ok(());
        }
        let mut answers = std::mem::take(&mut plane.too_big_answers);
        let mut sent = Ok(());
        for answer in answers.iter() {
            let len = answer.frame.len();
            if len > COPY_MAX {
                continue;
            }
            self.scratch[COPY_HEADROOM..COPY_HEADROOM + len].copy_from_slice(&answer.frame);
            sent = self.forward_scratch(answer.port, len, Some(&answer.meta), now, round);
            if sent.is_err() {
                break;
            }
        }
        answers.clear();
        if let Some(plane) = self.tunnels.as_mut() {
            plane.too_big_answers = answers;
        }
        sent
    }

    /// Queues the ARP frames the tunnels asked for (answers, and requests for a next hop).
    pub(super) fn send_pending(&mut self) -> Result<(), PortError> {
        let Some(plane) = self.tunnels.as_mut() else {
            return Ok(());
        };
        while let Some((port, frame)) = plane.take_pending() {
            if let Some(member) = self.ports.member_of(port)
                && !self.ports.queue_copy(member, &frame)?
            {
                self.counters.no_frame += 1;
            }
        }
        Ok(())
    }
}
