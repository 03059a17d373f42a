//! The figures every tool exports the same way: a port queue's packets, bytes, drops by
//! reason and frames by place, and a receiving thread's time, bursts and packets.
//!
//! Labels follow node_exporter's where they fit: `device` is the interface, `queue` its
//! queue; the switch adds `port`, the port's number on the bridge.

use std::time::Duration;

use wirespeed_port::{FrameAudit, PortSpec, PortStats};

use crate::Exposition;

/// A port's `device` and `queue` labels from its spec: the interface, and the queue, the
/// range (`0-3`) or `all` it serves.
pub fn device_and_queue(spec: &str) -> (String, String) {
    match spec.parse::<PortSpec>() {
        Ok(s) => {
            let queue = match (s.all_queues, s.last_queue) {
                (true, _) => "all".to_string(),
                (false, Some(last)) => format!("{}-{last}", s.queue),
                (false, None) => s.queue.to_string(),
            };
            (s.iface, queue)
        }
        Err(_) => (spec.to_string(), "0".to_string()),
    }
}

/// A port queue's counters.
pub fn port_figures(e: &mut Exposition, labels: &[(&str, &str)], s: &PortStats) {
    e.counter(
        "wirespeed_port_receive_packets_total",
        "Packets received on the port queue.",
        labels,
        s.rx_packets,
    );
    e.counter(
        "wirespeed_port_receive_bytes_total",
        "Bytes received on the port queue.",
        labels,
        s.rx_bytes,
    );
    e.counter(
        "wirespeed_port_transmit_packets_total",
        "Packets handed to the port queue for sending.",
        labels,
        s.tx_packets,
    );
    e.counter(
        "wirespeed_port_transmit_bytes_total",
        "Bytes handed to the port queue for sending.",
        labels,
        s.tx_bytes,
    );
    e.counter(
        "wirespeed_port_copies_total",
        "Packets copied between buffer areas on the way in or out.",
        labels,
        s.copies,
    );
    for (reason, n) in s.drops.by_reason() {
        let mut with_reason = labels.to_vec();
        with_reason.push(("reason", reason));
        e.counter(
            "wirespeed_port_drops_total",
            "Packets lost at the port queue, by reason (fill_ring_empty, rx_ring_full, \
             kernel_dropped, rx_invalid_desc and tx_invalid_desc are the kernel's \
             XDP_STATISTICS; the others are counted in user space).",
            &with_reason,
            n,
        );
    }
}

/// Where the frames of a buffer area (a UMEM) are.
pub fn frame_figures(e: &mut Exposition, labels: &[(&str, &str)], a: &FrameAudit) {
    let places = [
        ("pool", a.pool),
        ("fill", a.fill),
        ("kernel", a.kernel),
        ("rx", a.rx),
        ("application", a.application),
        ("tx", a.tx),
        ("completion", a.completion),
        ("lost", a.lost),
    ];
    for (place, n) in places {
        let mut with_place = labels.to_vec();
        with_place.push(("place", place));
        e.gauge(
            "wirespeed_umem_frames",
            "Frames of the buffer area by place: free in the pool, in the fill ring, held by \
             the kernel, in the receive ring, with the application, in the transmit ring, in \
             the completion ring, lost with the socket of a deleted interface.",
            &with_place,
            n as f64,
        );
    }
}

/// What a receiving or poll-mode thread did with its time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadFigures {
    /// CPU time the thread used since it started.
    pub busy: Duration,
    /// Wall time since it started.
    pub wall: Duration,
    /// Bursts that moved packets (received, or sent by a tool that only sends), and their
    /// packets.
    pub bursts: u64,
    pub burst_packets: u64,
}

pub fn thread_figures(e: &mut Exposition, labels: &[(&str, &str)], t: &ThreadFigures) {
    e.seconds(
        "wirespeed_thread_busy_seconds_total",
        "CPU time the thread used.",
        labels,
        t.busy.as_secs_f64(),
    );
    e.seconds(
        "wirespeed_thread_idle_seconds_total",
        "Wall time the thread did not use the CPU (napping, sleeping in poll(), or \
         preempted).",
        labels,
        t.wall.saturating_sub(t.busy).as_secs_f64(),
    );
    e.counter(
        "wirespeed_thread_bursts_total",
        "Bursts that moved at least one packet: received, or sent by a tool that only sends \
         (gen, bench txpush).",
        labels,
        t.bursts,
    );
    e.counter(
        "wirespeed_thread_burst_packets_total",
        "Packets those bursts brought (over bursts_total: packets per burst).",
        labels,
        t.burst_packets,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_and_a_thread_in_the_text_format() {
        let mut e = Exposition::new();
        let stats = PortStats {
            rx_packets: 10,
            rx_bytes: 640,
            ..PortStats::default()
        };
        port_figures(&mut e, &[("device", "veth1"), ("queue", "0")], &stats);
        thread_figures(
            &mut e,
            &[("thread", "0")],
            &ThreadFigures {
                busy: Duration::from_millis(250),
                wall: Duration::from_secs(1),
                bursts: 3,
                burst_packets: 10,
            },
        );
        let text = e.render();
        assert!(
            text.contains(
                "wirespeed_port_receive_packets_total{device=\"veth1\",queue=\"0\"} 10\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "wirespeed_port_drops_total{device=\"veth1\",queue=\"0\",reason=\"link_down\"} 0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("wirespeed_thread_idle_seconds_total{thread=\"0\"} 0.75\n"),
            "{text}"
        );
        assert_eq!(text.matches("# TYPE wirespeed_port_drops_total").count(), 1);
    }

    #[test]
    fn labels_name_the_interface_and_its_queues() {
        let l = |s: &str| device_and_queue(s);
        assert_eq!(l("xdp:veth1@2"), ("veth1".into(), "2".into()));
        assert_eq!(l("xdp:veth1"), ("veth1".into(), "0".into()));
        assert_eq!(l("xdp:veth1@all"), ("veth1".into(), "all".into()));
        assert_eq!(l("xdp:veth1@0-3"), ("veth1".into(), "0-3".into()));
        assert_eq!(l("packet:eth0"), ("eth0".into(), "0".into()));
    }
}
