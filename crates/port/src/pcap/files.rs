//! The place of a `pcap:` port spec: which file is replayed, which is written.

use std::path::{Path, PathBuf};

/// The files a `pcap:` spec names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PcapFiles {
    /// `pcap:FILE`: read when the tool receives on the port, written when it sends.
    Either(PathBuf),
    /// `pcap:rx=IN`, `pcap:tx=OUT` or `pcap:rx=IN,tx=OUT` (either order).
    Named {
        rx: Option<PathBuf>,
        tx: Option<PathBuf>,
    },
}

const KEYS: [&str; 2] = ["rx=", "tx="];

impl PcapFiles {
    /// The files of `place` (a spec without its `pcap:`); none when it is malformed: empty,
    /// a key named twice or given no file.
    pub fn parse(place: &str) -> Option<PcapFiles> {
        if place.is_empty() {
            return None;
        }
        if !KEYS.iter().any(|k| place.starts_with(k)) {
            return Some(PcapFiles::Either(PathBuf::from(place)));
        }
        let (mut rx, mut tx) = (None, None);
        let mut rest = place;
        while !rest.is_empty() {
            // `rest` starts with a key: the first time by the check above, then by `find`.
            let (key, after) = rest.split_at(3);
            let end = [",rx=", ",tx="]
                .iter()
                .filter_map(|sep| after.find(sep))
                .min()
                .unwrap_or(after.len());
            let slot = if key == "rx=" { &mut rx } else { &mut tx };
            if end == 0 || slot.is_some() {
                return None;
            }
            *slot = Some(PathBuf::from(&after[..end]));
            rest = after.get(end + 1..).unwrap_or("");
        }
        Some(PcapFiles::Named { rx, tx })
    }

    /// The file to replay and the file to record in, for a tool that receives (`rx`) and
    /// sends (`tx`) on the port; an error in words when `pcap:FILE` cannot say which.
    pub fn resolve(&self, rx: bool, tx: bool) -> Result<(Option<&Path>, Option<&Path>), String> {
        match self {
            PcapFiles::Either(_) if rx && tx => Err(
                "this tool both receives and sends on the port: name its files, \
                 pcap:rx=IN,tx=OUT (or one of them alone)"
                    .to_string(),
            ),
            PcapFiles::Either(f) if tx => Ok((None, Some(f))),
            PcapFiles::Either(f) => Ok((Some(f), None)),
            PcapFiles::Named { rx: r, tx: t } => {
                Ok((r.as_deref().filter(|_| rx), t.as_deref().filter(|_| tx)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(rx: Option<&str>, tx: Option<&str>) -> Option<PcapFiles> {
        Some(PcapFiles::Named {
            rx: rx.map(PathBuf::from),
            tx: tx.map(PathBuf::from),
        })
    }

    #[test]
    fn parses_files_and_keys() {
        assert_eq!(
            PcapFiles::parse("in.pcap"),
            Some(PcapFiles::Either("in.pcap".into()))
        );
        assert_eq!(
            PcapFiles::parse("/tmp/a:b@c,d.pcap"),
            Some(PcapFiles::Either("/tmp/a:b@c,d.pcap".into()))
        );
        assert_eq!(PcapFiles::parse("rx=a.pcap"), named(Some("a.pcap"), None));
        assert_eq!(
            PcapFiles::parse("tx=b.pcapng"),
            named(None, Some("b.pcapng"))
        );
        assert_eq!(
            PcapFiles::parse("rx=a,1.pcap,tx=b.pcap"),
            named(Some("a,1.pcap"), Some("b.pcap"))
        );
        assert_eq!(PcapFiles::parse("tx=b,rx=a"), named(Some("a"), Some("b")));
        for bad in ["", "rx=", "rx=,tx=b", "rx=a,tx=", "rx=a,rx=b", "tx=a,tx=b"] {
            assert_eq!(PcapFiles::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn resolves_by_direction() {
        let either = PcapFiles::parse("f.pcap").unwrap();
        let f = Some(Path::new("f.pcap"));
        assert_eq!(either.resolve(true, false), Ok((f, None)));
        assert_eq!(either.resolve(false, true), Ok((None, f)));
        assert!(
            either
                .resolve(true, true)
                .unwrap_err()
                .contains("rx=IN,tx=OUT")
        );
        let both = PcapFiles::parse("rx=a,tx=b").unwrap();
        let (a, b) = (Some(Path::new("a")), Some(Path::new("b")));
        assert_eq!(both.resolve(true, true), Ok((a, b)));
        assert_eq!(both.resolve(false, true), Ok((None, b)));
        let rx_only = PcapFiles::parse("rx=a").unwrap();
        assert_eq!(rx_only.resolve(true, true), Ok((a, None)));
    }
}
