//! The place of a `pcap:` port spec: which file is replayed, which is written, and at what
//! pace. `-` is standard input for a replay, standard output for a recording.

use std::path::{Path, PathBuf};

/// A `pcap:` spec's place: its files and the replay's pace.
#[derive(Debug, Clone, PartialEq)]
pub struct PcapPlace {
    pub files: PcapFiles,
    /// `,pace=SPEED`: replay at the file's recorded pace times SPEED (1: as recorded, 2: twice
    /// as fast). None: as fast as the tool takes the packets.
    pub pace: Option<f64>,
}

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

/// The keys of a place. A file name may hold commas, but not a comma followed by one of these.
const KEYS: [&str; 3] = ["rx=", "tx=", "pace="];

/// The fastest pace a spec may ask for: beyond it, a replay is as fast as the tool anyway.
const MAX_PACE: f64 = 1e6;

impl PcapPlace {
    /// The files and pace of `place` (a spec without its `pcap:`), or what is wrong with it.
    pub fn parse(place: &str) -> Result<PcapPlace, String> {
        let mut file = None;
        let (mut rx, mut tx, mut pace) = (None, None, None);
        for (i, piece) in split_keys(place).into_iter().enumerate() {
            let Some(key) = KEYS.iter().find(|k| piece.starts_with(*k)) else {
                // Only the first piece can be a bare file: the others start with a key.
                debug_assert_eq!(i, 0);
                file = Some(PathBuf::from(piece));
                continue;
            };
            let value = &piece[key.len()..];
            if value.is_empty() {
                return Err(format!("{key} names nothing"));
            }
            let taken = match *key {
                "rx=" => rx.replace(PathBuf::from(value)).is_some(),
                "tx=" => tx.replace(PathBuf::from(value)).is_some(),
                _ => pace.replace(parse_pace(value)?).is_some(),
            };
            if taken {
                return Err(format!("{key} is given twice"));
            }
        }
        let files = match (file, rx.is_some() || tx.is_some()) {
            (Some(f), false) if !f.as_os_str().is_empty() => PcapFiles::Either(f),
            (Some(_), true) => return Err("a bare file and rx= or tx= together".to_string()),
            (None, true) => PcapFiles::Named { rx, tx },
            _ => return Err("no file named".to_string()),
        };
        Ok(PcapPlace { files, pace })
    }
}

/// `place` cut before each comma that starts a key; the commas go.
fn split_keys(place: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (at, _) in place.match_indices(',') {
        if KEYS.iter().any(|k| place[at + 1..].starts_with(k)) {
            pieces.push(&place[start..at]);
            start = at + 1;
        }
    }
    pieces.push(&place[start..]);
    pieces
}

fn parse_pace(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(p) if p > 0.0 && p <= MAX_PACE => Ok(p),
        _ => Err(format!(
            "pace={value}: a speed above 0 and at most {MAX_PACE}, the recorded pace times it \
             (1: as recorded, 2: twice as fast)"
        )),
    }
}

impl PcapFiles {
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

/// True for `-`: standard input as a replay, standard output as a recording.
pub fn is_std_stream(path: &Path) -> bool {
    path == Path::new("-")
}

/// True when `a` and `b` are one file (the same path, or links to one inode). `-` is never
/// the same file twice: standard input as a replay, standard output as a recording.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if is_std_stream(a) || is_std_stream(b) {
        return false;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(place: &str) -> Result<PcapFiles, String> {
        PcapPlace::parse(place).map(|p| p.files)
    }

    fn named(rx: Option<&str>, tx: Option<&str>) -> Result<PcapFiles, String> {
        Ok(PcapFiles::Named {
            rx: rx.map(PathBuf::from),
            tx: tx.map(PathBuf::from),
        })
    }

    #[test]
    fn parses_files_and_keys() {
        assert_eq!(files("in.pcap"), Ok(PcapFiles::Either("in.pcap".into())));
        assert_eq!(files("-"), Ok(PcapFiles::Either("-".into())));
        assert_eq!(
            files("/tmp/a:b@c,d.pcap"),
            Ok(PcapFiles::Either("/tmp/a:b@c,d.pcap".into()))
        );
        assert_eq!(files("rx=a.pcap"), named(Some("a.pcap"), None));
        assert_eq!(files("tx=b.pcapng"), named(None, Some("b.pcapng")));
        assert_eq!(
            files("rx=a,1.pcap,tx=b.pcap"),
            named(Some("a,1.pcap"), Some("b.pcap"))
        );
        assert_eq!(files("tx=b,rx=a"), named(Some("a"), Some("b")));
        assert_eq!(files("rx=-,tx=-"), named(Some("-"), Some("-")));
        let bad = [
            ("", "no file named"),
            ("rx=", "rx= names nothing"),
            ("rx=,tx=b", "rx= names nothing"),
            ("rx=a,tx=", "tx= names nothing"),
            ("rx=a,rx=b", "rx= is given twice"),
            ("tx=a,tx=b", "tx= is given twice"),
            ("in.pcap,tx=b", "a bare file and rx= or tx= together"),
            ("pace=2", "no file named"),
            (",pace=2", "no file named"),
        ];
        for (place, why) in bad {
            assert_eq!(files(place), Err(why.to_string()), "{place}");
        }
    }

    #[test]
    fn parses_a_pace() {
        let pace = |place: &str| PcapPlace::parse(place).map(|p| p.pace);
        assert_eq!(pace("in.pcap"), Ok(None));
        assert_eq!(pace("in.pcap,pace=1"), Ok(Some(1.0)));
        assert_eq!(pace("rx=in.pcap,pace=0.5,tx=o"), Ok(Some(0.5)));
        assert_eq!(pace("pace=2,rx=in.pcap"), Ok(Some(2.0)));
        assert_eq!(
            files("a,b.pcap,pace=2"),
            Ok(PcapFiles::Either("a,b.pcap".into()))
        );
        for bad in ["0", "-1", "abc", "inf", "NaN", "2000000", ""] {
            let e = pace(&format!("in.pcap,pace={bad}")).unwrap_err();
            assert!(e.starts_with(&format!("pace={bad}")), "{bad}: {e}");
        }
        assert_eq!(
            pace("in.pcap,pace=1,pace=2"),
            Err("pace= is given twice".to_string())
        );
    }

    #[test]
    fn resolves_by_direction() {
        let either = files("f.pcap").unwrap();
        let f = Some(Path::new("f.pcap"));
        assert_eq!(either.resolve(true, false), Ok((f, None)));
        assert_eq!(either.resolve(false, true), Ok((None, f)));
        assert!(
            either
                .resolve(true, true)
                .unwrap_err()
                .contains("rx=IN,tx=OUT")
        );
        let both = files("rx=a,tx=b").unwrap();
        let (a, b) = (Some(Path::new("a")), Some(Path::new("b")));
        assert_eq!(both.resolve(true, true), Ok((a, b)));
        assert_eq!(both.resolve(false, true), Ok((None, b)));
        let rx_only = files("rx=a").unwrap();
        assert_eq!(rx_only.resolve(true, true), Ok((a, None)));
    }
}
