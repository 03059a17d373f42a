//! Port spec strings: `xdp:veth0`, `xdp:veth0@3`, `xdp:veth0@all`, `packet:veth0`, `tap:ws0`,
//! `pipe:p0`, `pcap:in.pcap`, `pcap:rx=in.pcap,tx=out.pcapng`.

use std::fmt;
use std::str::FromStr;

use crate::pcap::{PcapPlace, is_std_stream};

/// Which backend a port uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// AF_XDP through our XDP program.
    Xdp,
    /// AF_PACKET with TPACKET_V3 rings.
    Packet,
    /// A tap device: the host's own stack.
    Tap,
    /// A shared-memory pipe to another process.
    Pipe,
    /// Capture files: packets replayed from one, sent packets recorded in another.
    Pcap,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Xdp => "xdp",
            Backend::Packet => "packet",
            Backend::Tap => "tap",
            Backend::Pipe => "pipe",
            Backend::Pcap => "pcap",
        }
    }

    /// True when the spec's place is a network interface (false: a pipe's name, files).
    pub fn has_interface(self) -> bool {
        matches!(self, Backend::Xdp | Backend::Packet | Backend::Tap)
    }
}

/// A parsed port spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub backend: Backend,
    /// The interface; for a pipe its name, for pcap the files as written (`PcapPlace`).
    pub iface: String,
    /// The queue (xdp); 0 when the spec names none or names them all.
    pub queue: u32,
    /// `xdp:IFACE@all`: every receive queue of the interface, served by one owner.
    pub all_queues: bool,
    /// `xdp:IFACE@FIRST-LAST`: the queues `queue..=last_queue`.
    pub last_queue: Option<u32>,
}

impl PortSpec {
    /// True when a port of this spec receives on several queues (`@all`, `@FIRST-LAST`).
    pub fn many_queues(&self) -> bool {
        self.all_queues || self.last_queue.is_some()
    }

    /// The queues a port of this spec serves, `queue_count` being the interface's receive
    /// queues (what `@all` means).
    pub fn queues(&self, queue_count: u32) -> Vec<u32> {
        match (self.all_queues, self.last_queue) {
            (true, _) => (0..queue_count).collect(),
            (false, Some(last)) => (self.queue..=last).collect(),
            (false, None) => vec![self.queue],
        }
    }

    /// The spec of one of its queues (`xdp:IFACE@Q`).
    pub fn on_queue(&self, queue: u32) -> PortSpec {
        PortSpec {
            queue,
            all_queues: false,
            last_queue: None,
            ..self.clone()
        }
    }

    /// True when the spec names a queue (`@N`, `@FIRST-LAST` or `@all`), false for
    /// `xdp:IFACE`.
    pub fn names_queue(spec: &str) -> bool {
        spec.contains('@')
    }

    /// Whether a port of this spec reads standard input and whether it writes standard
    /// output (`pcap:-`, `pcap:rx=-`, `pcap:tx=-`), in a tool that receives (`rx`) and sends
    /// (`tx`) on it. A tool's own report must then stay off standard output.
    pub fn std_streams(&self, rx: bool, tx: bool) -> (bool, bool) {
        if self.backend != Backend::Pcap {
            return (false, false);
        }
        let files = PcapPlace::parse(&self.iface).map(|p| p.files);
        match files.as_ref().map(|f| f.resolve(rx, tx)) {
            Ok(Ok((input, output))) => (
                input.is_some_and(is_std_stream),
                output.is_some_and(is_std_stream),
            ),
            _ => (false, false),
        }
    }

    /// True when a port of this spec and one of `other` would be one interface (any queues,
    /// any of the interface backends) or one pipe. Capture files are checked where they
    /// are opened.
    pub fn same_place(&self, other: &PortSpec) -> bool {
        self.iface == other.iface
            && self.backend != Backend::Pcap
            && (self.backend == other.backend
                || (self.backend.has_interface() && other.backend.has_interface()))
    }

    /// The spec with its queue always written out (`xdp:eth0@0`), for a tool in which
    /// `xdp:IFACE` means more than queue 0 (capture: every queue).
    pub fn with_queue(&self) -> String {
        match self.backend {
            Backend::Xdp if !self.many_queues() => {
                format!("xdp:{}@{}", self.iface, self.queue)
            }
            _ => self.to_string(),
        }
    }
}

/// What is wrong with a port spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "port spec '{0}': expected BACKEND:IFACE[@QUEUE], e.g. xdp:veth0, packet:eth1 or tap:ws0"
    )]
    NoBackend(String),
    #[error(
        "port spec '{spec}': unknown backend '{backend}' (known: xdp, packet, tap, pipe, pcap)"
    )]
    UnknownBackend { spec: String, backend: String },
    #[error("port spec '{0}': interface name is empty or longer than 15 bytes")]
    BadInterface(String),
    #[error(
        "port spec '{0}': a pipe's name is 1 to 32 letters, digits, '-', '_' or '.' (not . or ..)"
    )]
    BadPipeName(String),
    #[error(
        "port spec '{spec}': {why}; expected pcap:FILE or pcap:rx=IN,tx=OUT (either alone too), \
         FILE '-' for standard input or output, and ',pace=SPEED' to replay at the recorded pace"
    )]
    BadPcap { spec: String, why: String },
    #[error("port spec '{spec}': queue '{queue}' is not a number, a range FIRST-LAST or 'all'")]
    BadQueue { spec: String, queue: String },
    #[error(
        "port spec '{spec}': the {backend} backend takes no queue (it sees the whole interface)"
    )]
    QueueNotSupported { spec: String, backend: &'static str },
}

impl FromStr for PortSpec {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<PortSpec, SpecError> {
        let (backend, place) = spec
            .split_once(':')
            .ok_or_else(|| SpecError::NoBackend(spec.to_string()))?;
        let backend = parse_backend(spec, backend)?;
        if backend == Backend::Pcap {
            // File names may hold ':' and '@': the place is taken whole.
            if let Err(why) = PcapPlace::parse(place) {
                return Err(SpecError::BadPcap {
                    spec: spec.to_string(),
                    why,
                });
            }
            return Ok(PortSpec {
                backend,
                iface: place.to_string(),
                queue: 0,
                all_queues: false,
                last_queue: None,
            });
        }
        let (iface, queues) = split_queue(spec, backend, place)?;
        check_name(spec, backend, iface)?;
        Ok(PortSpec {
            backend,
            iface: iface.to_string(),
            queue: queues.first,
            all_queues: queues.all,
            last_queue: queues.last,
        })
    }
}

/// The backend a spec's prefix names.
fn parse_backend(spec: &str, name: &str) -> Result<Backend, SpecError> {
    Ok(match name {
        "xdp" => Backend::Xdp,
        "packet" => Backend::Packet,
        "tap" => Backend::Tap,
        "pipe" => Backend::Pipe,
        "pcap" => Backend::Pcap,
        other => {
            return Err(SpecError::UnknownBackend {
                spec: spec.to_string(),
                backend: other.to_string(),
            });
        }
    })
}

/// The queues a spec names: one, a range, or all.
#[derive(Default)]
struct QueuesNamed {
    first: u32,
    last: Option<u32>,
    all: bool,
}

/// `IFACE[@QUEUE]` into the interface and its queues (`@N`, `@FIRST-LAST`, `@all`; xdp only).
fn split_queue<'a>(
    spec: &str,
    backend: Backend,
    place: &'a str,
) -> Result<(&'a str, QueuesNamed), SpecError> {
    let Some((iface, queue)) = place.split_once('@') else {
        return Ok((place, QueuesNamed::default()));
    };
    if backend != Backend::Xdp {
        return Err(SpecError::QueueNotSupported {
            spec: spec.to_string(),
            backend: backend.name(),
        });
    }
    if queue == "all" {
        let all = QueuesNamed {
            all: true,
            ..QueuesNamed::default()
        };
        return Ok((iface, all));
    }
    let bad = || SpecError::BadQueue {
        spec: spec.to_string(),
        queue: queue.to_string(),
    };
    let number = |s: &str| s.parse::<u32>().map_err(|_| bad());
    let named = match queue.split_once('-') {
        Some((first, last)) => {
            let (first, last) = (number(first)?, number(last)?);
            if first >= last {
                return Err(bad());
            }
            QueuesNamed {
                first,
                last: Some(last),
                all: false,
            }
        }
        None => QueuesNamed {
            first: number(queue)?,
            ..QueuesNamed::default()
        },
    };
    Ok((iface, named))
}

/// Checks a pipe's name, or an interface's.
fn check_name(spec: &str, backend: Backend, name: &str) -> Result<(), SpecError> {
    if backend == Backend::Pipe {
        // A pipe's name becomes part of a file name under /dev/shm.
        let pipe_name_ok = (1..=32).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && name != "."
            && name != "..";
        if !pipe_name_ok {
            return Err(SpecError::BadPipeName(spec.to_string()));
        }
        return Ok(());
    }
    // IFNAMSIZ is 16 with the terminating NUL; '/' and whitespace never appear in names.
    if name.is_empty()
        || name.len() > 15
        || name.contains(['/', ' ', ':', '@'])
        || name == "."
        || name == ".."
    {
        return Err(SpecError::BadInterface(spec.to_string()));
    }
    Ok(())
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.backend {
            Backend::Xdp if self.all_queues => write!(f, "xdp:{}@all", self.iface),
            Backend::Xdp if let Some(last) = self.last_queue => {
                write!(f, "xdp:{}@{}-{last}", self.iface, self.queue)
            }
            Backend::Xdp if self.queue != 0 => write!(f, "xdp:{}@{}", self.iface, self.queue),
            b => write!(f, "{}:{}", b.name(), self.iface),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_backends_and_queues() {
        let s: PortSpec = "xdp:veth0@3".parse().unwrap();
        assert_eq!(
            (s.backend, s.iface.as_str(), s.queue),
            (Backend::Xdp, "veth0", 3)
        );
        let s: PortSpec = "xdp:veth0".parse().unwrap();
        assert_eq!(s.queue, 0);
        assert_eq!(s.to_string(), "xdp:veth0");
        let s: PortSpec = "packet:eth1".parse().unwrap();
        assert_eq!(s.backend, Backend::Packet);
        let s: PortSpec = "tap:ws0".parse().unwrap();
        assert_eq!((s.backend, s.iface.as_str()), (Backend::Tap, "ws0"));
        assert_eq!(s.to_string(), "tap:ws0");
        let s: PortSpec = "pipe:gen-to-switch.0".parse().unwrap();
        assert_eq!(
            (s.backend, s.iface.as_str(), s.to_string()),
            (
                Backend::Pipe,
                "gen-to-switch.0",
                "pipe:gen-to-switch.0".into()
            )
        );
        let s: PortSpec = "xdp:eth1@all".parse().unwrap();
        assert!(s.all_queues);
        assert_eq!(s.to_string(), "xdp:eth1@all");
        assert!(!"xdp:eth1@2".parse::<PortSpec>().unwrap().all_queues);
        let s: PortSpec = "xdp:eth1@2-5".parse().unwrap();
        assert_eq!((s.queue, s.last_queue), (2, Some(5)));
        assert_eq!(
            (s.to_string(), s.with_queue()),
            ("xdp:eth1@2-5".into(), "xdp:eth1@2-5".into())
        );
        assert_eq!(s.queues(8), vec![2, 3, 4, 5]);
        assert!(s.many_queues() && !"xdp:eth1@2".parse::<PortSpec>().unwrap().many_queues());
        assert_eq!(
            "xdp:eth1@all".parse::<PortSpec>().unwrap().queues(3),
            vec![0, 1, 2]
        );
        assert_eq!(s.on_queue(4).to_string(), "xdp:eth1@4");
        assert!(PortSpec::names_queue("xdp:eth1@0") && !PortSpec::names_queue("xdp:eth1"));
        let s: PortSpec = "xdp:eth1@0".parse().unwrap();
        assert_eq!(
            (s.to_string(), s.with_queue()),
            ("xdp:eth1".into(), "xdp:eth1@0".into())
        );
    }

    #[test]
    fn one_interface_or_pipe_is_one_place() {
        let spec = |s: &str| s.parse::<PortSpec>().unwrap();
        for (a, b) in [
            ("xdp:v0", "xdp:v0"),
            ("xdp:v0", "xdp:v0@1"),
            ("packet:v0", "xdp:v0"),
            ("tap:v0", "packet:v0"),
            ("pipe:p", "pipe:p"),
        ] {
            assert!(spec(a).same_place(&spec(b)), "{a} {b}");
        }
        for (a, b) in [
            ("xdp:v0", "xdp:v1"),
            ("pipe:v0", "xdp:v0"),
            ("pcap:f.pcap", "pcap:f.pcap"),
        ] {
            assert!(!spec(a).same_place(&spec(b)), "{a} {b}");
        }
    }

    #[test]
    fn rejects_malformed_specs() {
        assert!(matches!(
            "veth0".parse::<PortSpec>(),
            Err(SpecError::NoBackend(_))
        ));
        assert!(matches!(
            "dpdk:veth0".parse::<PortSpec>(),
            Err(SpecError::UnknownBackend { .. })
        ));
        assert!(matches!(
            "xdp:".parse::<PortSpec>(),
            Err(SpecError::BadInterface(_))
        ));
        assert!(matches!(
            "xdp:averyveryverylongname".parse::<PortSpec>(),
            Err(SpecError::BadInterface(_))
        ));
        for bad in [
            "xdp:veth0@x",
            "xdp:veth0@3-3",
            "xdp:veth0@4-2",
            "xdp:veth0@1-",
            "xdp:veth0@-2",
        ] {
            assert!(
                matches!(bad.parse::<PortSpec>(), Err(SpecError::BadQueue { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            "packet:veth0@1".parse::<PortSpec>(),
            Err(SpecError::QueueNotSupported { .. })
        ));
        assert!(matches!(
            "packet:veth0@all".parse::<PortSpec>(),
            Err(SpecError::QueueNotSupported { .. })
        ));
        let e = "tap:ws0@1".parse::<PortSpec>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "port spec 'tap:ws0@1': the tap backend takes no queue (it sees the whole interface)"
        );
        for bad in [
            "pipe:",
            "pipe:a/b",
            "pipe:..",
            "pipe:a b",
            &format!("pipe:{}", "p".repeat(33)),
        ] {
            assert!(
                matches!(bad.parse::<PortSpec>(), Err(SpecError::BadPipeName(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            "pipe:p0@1".parse::<PortSpec>(),
            Err(SpecError::QueueNotSupported { .. })
        ));
        assert!(matches!(
            "xdp:veth0@All".parse::<PortSpec>(),
            Err(SpecError::BadQueue { .. })
        ));
    }

    #[test]
    fn knows_which_pcap_specs_use_stdin_and_stdout() {
        let streams = |s: &str, rx, tx| s.parse::<PortSpec>().unwrap().std_streams(rx, tx);
        assert_eq!(streams("pcap:-", false, true), (false, true));
        assert_eq!(streams("pcap:-", true, false), (true, false));
        assert_eq!(streams("pcap:-", true, true), (false, false), "refused");
        assert_eq!(streams("pcap:rx=in.pcap,tx=-", true, true), (false, true));
        assert_eq!(streams("pcap:rx=-,tx=out.pcap", true, true), (true, false));
        assert_eq!(streams("pcap:rx=-,tx=-", true, false), (true, false));
        assert_eq!(streams("pcap:out.pcap", false, true), (false, false));
        assert_eq!(streams("pipe:p0", true, true), (false, false));
        let e = "pcap:in.pcap,pace=0".parse::<PortSpec>().unwrap_err();
        assert!(
            e.to_string().starts_with(
                "port spec 'pcap:in.pcap,pace=0': pace=0: a speed above 0 and at most 1000000"
            ),
            "{e}"
        );
    }
}
