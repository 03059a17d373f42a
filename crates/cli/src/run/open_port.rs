//! A tool's port: opened with an error that names the spec once, and drained of its last
//! sends at the end.

use std::time::{Duration, Instant};

use wirespeed_port::{Port, PortError, PortOptions, PortSpec};

/// Opens the port of `spec`. A failure reads "open SPEC: why", unless the backend's message
/// already starts with the spec (the pcap and tap backends name it themselves). A signal
/// while it opens gives up (a large buffer area takes seconds to set up).
pub fn open_port(spec: &PortSpec, opts: &PortOptions) -> anyhow::Result<Box<dyn Port>> {
    let opts = cancellable(opts);
    Ok(wirespeed_port::open(spec, &opts).map_err(|e| name_spec(e, spec))?)
}

/// `opts`, given up on when a signal asks the tool to stop.
pub fn cancellable(opts: &PortOptions) -> PortOptions {
    PortOptions {
        cancel: crate::run::signals::flag(),
        ..opts.clone()
    }
}

/// Waits (at most a second) until every frame handed to the kernel for sending is back. A
/// failed flush is the run's error: the last packets did not go out (a pcap port's last
/// write to its file or pipe).
pub fn drain(port: &mut dyn Port) -> Result<(), PortError> {
    let until = Instant::now() + Duration::from_secs(1);
    while port.tx_pending() && Instant::now() < until {
        port.flush()?;
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

fn name_spec(e: PortError, spec: &PortSpec) -> anyhow::Error {
    let named = e.to_string().starts_with(&format!("{spec}: "));
    let e = anyhow::Error::new(e);
    match named {
        true => e,
        false => e.context(format!("open {spec}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_is_named_once() {
        let spec: PortSpec = "pcap:a.pcap".parse().unwrap();
        let own = PortError::Unsupported("pcap:a.pcap: no file for that".to_string());
        assert_eq!(
            format!("{:#}", name_spec(own, &spec)),
            "pcap:a.pcap: no file for that"
        );
        let bare = PortError::Unsupported("a.pcap: cannot open".to_string());
        assert_eq!(
            format!("{:#}", name_spec(bare, &spec)),
            "open pcap:a.pcap: a.pcap: cannot open"
        );
    }
}
