//! `--controller-pcap FILE`: packets the rules send to the controller are written to a pcap
//! file (nanosecond timestamps; `-` is standard output) by the capture tool's writer thread,
//! so a poll-mode thread never waits on the disk. What came is handed to the writer every
//! control tick (`tick`), so the file grows while the switch runs. A write that fails (a
//! full disk) is said at the next tick, and the switch goes on without the file.

use wirespeed_capture::LINKTYPE_ETHERNET;
use wirespeed_capture::output::{FileOutput, StdoutOutput};
use wirespeed_capture::recorder::{CHUNK_SIZE, Outcome, Recorder, RecorderConfig};
use wirespeed_capture::rotate::Rotation;
use wirespeed_capture::spool::{Output, WriterReport};
use wirespeed_capture::write::{Format, Interface};
use wirespeed_switch::PacketInSink;
use wirespeed_switch::rule::PacketInOrigin;

/// Writes each packet-in to a pcap file.
pub struct PacketInPcap {
    path: String,
    recorder: Option<Recorder>,
    /// Packets the writer had no room for.
    dropped: u64,
    /// The writer's report once a write failed; packet-ins after it are not written.
    failed: Option<WriterReport>,
    /// Packet-ins that came after the failure.
    after_failure: u64,
}

impl PacketInPcap {
    /// Creates the file now, so a bad path fails before the switch starts.
    pub fn create(path: &str) -> std::io::Result<PacketInPcap> {
        let output: Box<dyn Output> = match path {
            "-" => Box::new(StdoutOutput::new()),
            _ => Box::new(FileOutput::new()),
        };
        let config = RecorderConfig {
            format: Format::Pcap,
            interface: Interface {
                link_type: LINKTYPE_ETHERNET,
                snaplen: 65535,
                name: None,
            },
            rotation: Rotation::default(),
            pattern: path.to_string(),
            buffer_bytes: 4 * CHUNK_SIZE,
            chunk_size: CHUNK_SIZE,
            wait_for_writer: false,
        };
        let recorder = Recorder::start(config, output, crate::run::clock::now_ns())?;
        Ok(PacketInPcap {
            path: path.to_string(),
            recorder: Some(recorder),
            dropped: 0,
            failed: None,
            after_failure: 0,
        })
    }

    /// Where the packets go, as the lines say it.
    fn place(&self) -> &str {
        match self.path.as_str() {
            "-" => "standard output",
            path => path,
        }
    }

    /// What a failed writer's report says: the error, and what the file holds.
    fn failure_line(&self, report: &WriterReport) -> String {
        format!(
            "--controller-pcap {}: {}; the file holds the first {} packets, each whole",
            self.path,
            report.error.as_deref().unwrap_or("the writer failed"),
            report.written
        )
    }
}

impl PacketInSink for PacketInPcap {
    fn packet_in(&mut self, _in_port: u32, _origin: PacketInOrigin, data: &[u8], len: usize) {
        let Some(r) = self.recorder.as_mut() else {
            self.after_failure += 1;
            return;
        };
        if r.record(crate::run::clock::now_ns(), data, len as u32) != Outcome::Queued {
            self.dropped += 1;
        }
    }

    fn tick(&mut self) {
        let Some(r) = self.recorder.as_mut() else {
            return;
        };
        r.flush();
        if r.failed()
            && let Some(r) = self.recorder.take()
        {
            let report = r.finish();
            eprintln!(
                "wirespeed switch: {}; packet-ins are no longer written (the switch goes on)",
                self.failure_line(&report)
            );
            self.failed = Some(report);
        }
    }

    fn close(&mut self) -> Result<String, String> {
        if let Some(report) = self.failed.take() {
            return Err(format!(
                "{} ({} packet-ins came after the failure, {} were in the writer's hands)",
                self.failure_line(&report),
                self.after_failure,
                report.lost
            ));
        }
        let Some(recorder) = self.recorder.take() else {
            return Ok(String::new());
        };
        let report = recorder.finish();
        match report.error {
            Some(_) => Err(self.failure_line(&report)),
            None => Ok(format!(
                "controller: {} packets written to {}, {} dropped by the writer",
                report.written,
                self.place(),
                self.dropped
            )),
        }
    }
}
