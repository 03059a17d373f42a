//! Opening a tool's port, with an error that names the spec once.

use wirespeed_port::{Port, PortError, PortOptions, PortSpec};

/// Opens the port of `spec`. A failure reads "open SPEC: why", unless the backend's message
/// already starts with the spec (the pcap and tap backends name it themselves).
pub fn open_port(spec: &PortSpec, opts: &PortOptions) -> anyhow::Result<Box<dyn Port>> {
    wirespeed_port::open(spec, opts).map_err(|e| name_spec(e, spec))
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
