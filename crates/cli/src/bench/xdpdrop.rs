//! xdpdrop: our XDP program drops every packet in the driver and counts it. No socket, no
//! copy: the ceiling an AF_XDP receiver on this interface can approach.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use wirespeed_port::PortSpec;
use wirespeed_port::xdp::XdpMode;
use wirespeed_xdp::{AttachMode, DropCounter};

use super::report::{Summary, summary_for};
use super::{BenchArgs, Mode};
use crate::run::meter::{Meter, RunLimit};

pub fn run(args: &BenchArgs, spec: &PortSpec, stop: &AtomicBool) -> anyhow::Result<Summary> {
    let mode = match args.port_flags.xdp_mode {
        XdpMode::Skb => AttachMode::Skb,
        _ => AttachMode::Native,
    };
    let (counter, mode) = match DropCounter::attach(&spec.iface, mode, args.port_flags.force) {
        Ok(c) => (c, mode),
        // auto: fall back to generic XDP where the driver has no native XDP.
        Err(e)
            if args.port_flags.xdp_mode == XdpMode::Auto
                && matches!(e, wirespeed_xdp::XdpError::Attach { .. }) =>
        {
            (
                DropCounter::attach(&spec.iface, AttachMode::Skb, args.port_flags.force)?,
                AttachMode::Skb,
            )
        }
        Err(e) => return Err(e.into()),
    };
    let attached = mode.name();
    eprintln!(
        "wirespeed bench xdpdrop: {} ready (XDP drop program, {attached} mode)",
        spec
    );
    let (start_packets, start_bytes) = counter.read()?;
    let mut run = RunLimit::new(args.duration(), args.count, stop, 1);
    let mut meter = Meter::new("drop", args.quiet, 1);
    let mut packets = 0;
    while run.running(packets) {
        std::thread::sleep(Duration::from_millis(50));
        let (p, b) = counter.read()?;
        packets = p - start_packets;
        meter.tick(packets, b - start_bytes, String::new);
    }
    let seconds = meter.elapsed().as_secs_f64();
    let (p, b) = counter.read()?;
    let mut s = summary_for(Mode::Xdpdrop, args, None, spec);
    s.xdp_mode = attached.to_string();
    s.set_measured(seconds, &meter, p - start_packets, b - start_bytes);
    s.rx_packets = s.packets;
    Ok(s.finish())
}
