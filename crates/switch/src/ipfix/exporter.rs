//! The exporting process: flow records from the [`FlowTable`] packed into IPFIX messages and
//! sent over UDP to one collector, the templates first and again every template interval,
//! each message numbered by the data records sent before it.

use core::time::Duration;
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::ipfix::IpfixError;
use crate::ipfix::flow_table::{FlowTable, Observation, Timeouts};
use crate::ipfix::message::{Message, MessageHeader};
use crate::ipfix::record::{FlowRecord, UnixNanos};
use crate::ipfix::template::template_message;

/// What the exporter is told.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ExportConfig {
    pub collector: SocketAddr,
    pub timeouts: Timeouts,
    /// One flow in this many is reported (1: all).
    pub sampling: u32,
    pub domain: u32,
    /// Templates are sent at start and again this often (a collector started later, or
    /// one that lost them over UDP, decodes records from then on).
    pub template_interval: Duration,
}

/// What the exporter has done, for `dump-cache` and `--json`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ExportStats {
    /// Flow records sent: in messages the socket took.
    pub records: u64,
    /// Messages sent (template messages included).
    pub messages: u64,
    /// Template messages sent.
    pub templates: u64,
    /// Messages the socket refused (the sequence numbers tell the collector of the gap).
    pub send_errors: u64,
    /// Flow records in the messages the socket refused: lost.
    pub lost_records: u64,
    /// Flows the exporter knows now.
    pub flows: u64,
    /// Packets of flows sampling left out.
    pub sampled_out_packets: u64,
    /// Megaflows emptied out (a full cache) whose counts could not be kept for a record.
    pub lost_megaflows: u64,
}

pub struct FlowExporter {
    config: ExportConfig,
    socket: UdpSocket,
    table: FlowTable,
    /// Data records sent so far (modulo 2^32).
    sequence: u32,
    /// When the templates were last sent (the bridge's clock).
    templates_sent: Option<Duration>,
    stats: ExportStats,
    /// The last error the socket gave, for the log.
    last_error: Option<String>,
    /// The socket is connected to the collector (`send`, not `send_to`).
    connected: bool,
    /// Messages the socket had no room for yet, in order (a burst of reports over a link
    /// slower than the host: a stop, or many flows idle at once), sent before any other.
    waiting: VecDeque<Waiting>,
    waiting_bytes: usize,
}

/// A message numbered and made, waiting for room in the socket's send buffer.
struct Waiting {
    bytes: Vec<u8>,
    flow_records: u64,
    template: bool,
}

/// The most bytes of messages that wait for room; a message past it is lost (counted).
const MAX_WAITING_BYTES: usize = 4 << 20;

/// How long a stop waits for the messages still waiting to go.
const FINISH_WAIT: Duration = Duration::from_secs(2);

impl FlowExporter {
    /// An exporter to `config.collector` from a UDP socket of its own; `epoch` is the
    /// Unix time of the bridge clock's zero (what the datapath's times count from).
    pub fn new(config: ExportConfig, epoch: SystemTime) -> Result<FlowExporter, IpfixError> {
        let local: SocketAddr = match config.collector {
            SocketAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::bind(local).map_err(IpfixError::Socket)?;
        socket.set_nonblocking(true).map_err(IpfixError::Socket)?;
        // Connected, a send fails once the collector's host has said no one listens there
        // (ICMP port unreachable), so a wrong port shows. Where there is no route yet, each
        // send says so instead.
        let connected = socket.connect(config.collector).is_ok();
        Ok(FlowExporter {
            connected,
            table: FlowTable::new(config.timeouts, config.sampling, unix_nanos(epoch)),
            config,
            socket,
            sequence: 0,
            templates_sent: None,
            stats: ExportStats::default(),
            last_error: None,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
        })
    }

    pub fn config(&self) -> &ExportConfig {
        &self.config
    }

    pub fn stats(&self) -> ExportStats {
        ExportStats {
            flows: self.table.len() as u64,
            sampled_out_packets: self.table.sampled_out_packets,
            ..self.stats
        }
    }

    /// The socket's last error since the last call, if any (said once on the log).
    pub fn take_error(&mut self) -> Option<String> {
        self.last_error.take()
    }

    pub fn observe(&mut self, seen: Observation) {
        self.table.observe(seen);
    }

    /// Counts megaflows whose counts were lost before they reached the exporter.
    pub fn count_lost(&mut self, megaflows: u64) {
        self.stats.lost_megaflows += megaflows;
    }

    /// Sends the templates if they are due, then the reports due at `now` (after those
    /// still waiting for room).
    pub fn tick(&mut self, now: Duration) {
        self.send_waiting();
        let due = self
            .templates_sent
            .is_none_or(|at| now.saturating_sub(at) >= self.config.template_interval);
        if due {
            self.send_templates(now);
        }
        let mut records = Vec::new();
        self.table.expire(now, &mut records);
        self.send_records(&records);
    }

    /// Reports every flow with packets not yet reported (the switch stops).
    pub fn finish(&mut self, now: Duration) {
        if self.templates_sent.is_none() {
            self.send_templates(now);
        }
        let mut records = Vec::new();
        self.table.drain(now, &mut records);
        self.send_records(&records);
        // What waits for room goes as the link takes it, for a while; the rest is lost.
        let since = Instant::now();
        while !self.waiting.is_empty() && since.elapsed() < FINISH_WAIT {
            std::thread::sleep(Duration::from_millis(5));
            self.send_waiting();
        }
        while let Some(w) = self.waiting.pop_front() {
            self.refused(
                &w,
                "the link did not take it before the switch stopped".to_string(),
            );
        }
        self.waiting_bytes = 0;
    }

    fn send_templates(&mut self, now: Duration) {
        let message = template_message(self.config.domain, self.config.sampling);
        // Refused, they go again at the next tick: a collector back gets them at once.
        if self.send(message, 0, true) {
            self.templates_sent = Some(now);
        }
    }

    /// Packs `records` into as few messages as fit, IPv4 then IPv6 (one data set each).
    fn send_records(&mut self, records: &[FlowRecord]) {
        let mut sorted: Vec<&FlowRecord> = records.iter().collect();
        sorted.sort_by_key(|r| r.template_id());
        let mut message = Message::new();
        for record in sorted {
            let bytes = record.encode();
            if !message.fits(record.template_id(), bytes.len()) {
                let full = std::mem::take(&mut message);
                let records = u64::from(full.data_records());
                self.send(full, records, false);
            }
            message.push(record.template_id(), &bytes, true);
        }
        if !message.is_empty() {
            let records = u64::from(message.data_records());
            self.send(message, records, false);
        }
    }

    /// Sends one message, numbered by the data records before it (those of a message the
    /// socket refused too, so the collector sees the gap); false when the socket refused
    /// it. A message the socket has no room for yet waits, after any waiting already.
    /// `flow_records`: the flows' records in it (a template message's options record is
    /// numbered, but not a flow's).
    fn send(&mut self, message: Message, flow_records: u64, template: bool) -> bool {
        let records = message.data_records();
        let header = MessageHeader {
            export_time: (unix_nanos(SystemTime::now()) / 1_000_000_000) as u32,
            sequence: self.sequence,
            domain: self.config.domain,
        };
        self.sequence = self.sequence.wrapping_add(records);
        let message = Waiting {
            bytes: message.finish(&header),
            flow_records,
            template,
        };
        if self.waiting_bytes + message.bytes.len() > MAX_WAITING_BYTES {
            self.refused(
                &message,
                format!("{MAX_WAITING_BYTES} bytes of messages wait for the link already"),
            );
            return false;
        }
        self.waiting_bytes += message.bytes.len();
        self.waiting.push_back(message);
        let mut went = true;
        // Only the new message can be refused now: those before it were tried already.
        let last = self.waiting.len();
        self.send_waiting_until(last, &mut went);
        went
    }

    /// Sends what waits, in order, until the socket has no room.
    fn send_waiting(&mut self) {
        let mut went = true;
        self.send_waiting_until(self.waiting.len(), &mut went);
    }

    /// [`FlowExporter::send_waiting`]; `went` false if the `nth` (1-based) was refused.
    fn send_waiting_until(&mut self, nth: usize, went: &mut bool) {
        let mut tried = 0;
        while let Some(w) = self.waiting.pop_front() {
            tried += 1;
            let sent = match self.connected {
                true => self.socket.send(&w.bytes),
                false => self.socket.send_to(&w.bytes, self.config.collector),
            };
            match sent {
                Ok(_) => {
                    self.waiting_bytes -= w.bytes.len();
                    self.stats.messages += 1;
                    self.stats.records += w.flow_records;
                    self.stats.templates += u64::from(w.template);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.waiting.push_front(w);
                    return;
                }
                Err(e) => {
                    self.waiting_bytes -= w.bytes.len();
                    *went &= tried != nth;
                    // Templates that waited and were then refused go again at the next
                    // tick, as those refused at once do.
                    if w.template {
                        self.templates_sent = None;
                    }
                    self.refused(&w, e.to_string());
                    // Connected again (or for the first time, where there was no route at
                    // start): the source address is chosen anew, as the host's may have
                    // changed.
                    self.connected = self.socket.connect(self.config.collector).is_ok();
                }
            }
        }
    }

    /// Counts message `w` as refused, its records lost, for `why`.
    fn refused(&mut self, w: &Waiting, why: String) {
        self.stats.send_errors += 1;
        self.stats.lost_records += w.flow_records;
        self.last_error = Some(why);
    }
}

fn unix_nanos(at: SystemTime) -> UnixNanos {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipfix::record::{Addresses, FlowKey};
    use std::net::Ipv4Addr;

    const S: Duration = Duration::from_secs(1);

    /// An exporter to a socket of the test's own on loopback, and that socket.
    fn exporter(template_interval: Duration) -> (FlowExporter, UdpSocket) {
        let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
        collector
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let config = ExportConfig {
            collector: collector.local_addr().unwrap(),
            timeouts: Timeouts {
                active: 60 * S,
                idle: 15 * S,
            },
            sampling: 1,
            domain: 77,
            template_interval,
        };
        (FlowExporter::new(config, UNIX_EPOCH).unwrap(), collector)
    }

    fn seen(src_port: u16, packets: u64) -> Observation {
        Observation {
            key: FlowKey {
                addresses: Addresses::V4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
                protocol: 17,
                src_port,
                dst_port: 9,
                vlan: 0,
                ingress: 1,
                tunnel: None,
            },
            egress: 2,
            packets,
            frame_bytes: packets * 60,
            l2_header: 14,
            tcp_flags: 0,
            first: S,
            last: S,
        }
    }

    /// (sequence number, length, domain) of the next message.
    fn receive(collector: &UdpSocket) -> (u32, usize, u32) {
        let mut buffer = [0u8; 2048];
        let n = collector.recv(&mut buffer).unwrap();
        let word = |at: usize| u32::from_be_bytes(buffer[at..at + 4].try_into().unwrap());
        assert_eq!(&buffer[..2], &[0, 10]);
        assert_eq!(usize::from(u16::from_be_bytes([buffer[2], buffer[3]])), n);
        (word(8), n, word(12))
    }

    #[test]
    fn sequence_numbers_count_the_data_records_before_each_message() {
        let (mut exporter, collector) = exporter(10 * S);
        exporter.tick(S);
        // Templates first: no data record before; the sampling options record is one.
        let (sequence, _, domain) = receive(&collector);
        assert_eq!((sequence, domain), (0, 77));
        // 40 flows of 82-byte records: 16 fit one message (16 + 4 + 16 * 82 = 1332).
        for port in 0..40 {
            exporter.observe(seen(port, 3));
        }
        exporter.finish(2 * S);
        let messages: Vec<_> = (0..3).map(|_| receive(&collector)).collect();
        assert_eq!(
            messages.iter().map(|m| m.0).collect::<Vec<_>>(),
            [1, 17, 33]
        );
        assert_eq!(messages[0].1, 16 + 4 + 16 * 82);
        assert_eq!(messages[2].1, 16 + 4 + 8 * 82);
        let stats = exporter.stats();
        assert_eq!((stats.records, stats.messages, stats.templates), (40, 4, 1));
        assert_eq!(stats.send_errors, 0);
    }

    /// Nobody at the collector's address: the host's "port unreachable" fails a later send,
    /// counted and said, rather than every message counting as sent.
    #[test]
    fn a_collector_port_nobody_listens_on_is_an_error() {
        let (mut exporter, collector) = exporter(S);
        drop(collector);
        for second in 0..3 {
            exporter.tick(second * S);
            std::thread::sleep(Duration::from_millis(50));
        }
        let stats = exporter.stats();
        assert!(stats.send_errors >= 1, "{stats:?}");
        // What the socket refused is not counted sent.
        assert_eq!(stats.messages + stats.send_errors, 3, "{stats:?}");
        assert_eq!(stats.templates, stats.messages, "{stats:?}");
        // The records of a refused message are lost, and counted so. (The last send drew
        // the host's "port unreachable": the next one fails.)
        for port in 0..5 {
            exporter.observe(seen(port, 3));
        }
        exporter.finish(3 * S);
        let stats = exporter.stats();
        assert_eq!((stats.records, stats.lost_records), (0, 5), "{stats:?}");
        let error = exporter.take_error().expect("the failure, for the log");
        assert!(error.contains("Connection refused"), "{error}");
    }

    /// A template message the socket refused goes again at the next tick, not an interval
    /// later: a collector back meanwhile gets templates at once.
    #[test]
    fn refused_templates_go_again_at_the_next_tick() {
        let (mut exporter, collector) = exporter(10 * S);
        drop(collector);
        // Sent; the host's "port unreachable" fails the next send.
        exporter.tick(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(50));
        // Due again (10 s on), refused; then tried at the next tick, a tenth of a second on.
        exporter.tick(10 * S);
        exporter.tick(10 * S + S / 10);
        let stats = exporter.stats();
        assert_eq!((stats.messages, stats.send_errors), (2, 1), "{stats:?}");
        assert_eq!(stats.templates, 2, "{stats:?}");
    }

    #[test]
    fn templates_are_sent_again_every_interval() {
        let (mut exporter, collector) = exporter(10 * S);
        for second in 0..=25 {
            exporter.tick(second * S);
        }
        // At 0, 10 and 20 s, each counting the sampling record before it.
        let sequences: Vec<u32> = (0..3).map(|_| receive(&collector).0).collect();
        assert_eq!(sequences, [0, 1, 2]);
        assert_eq!(exporter.stats().templates, 3);
    }
}
