//! `--expect`: the sequence numbers each generator used, 0 to N-1, so the numbers never
//! received are lost, also after the last one that came. `N` holds for every generator;
//! `ID=N,ID=N` gives each its own, as gen `--cpus` sends a series per CPU under ids of
//! their own (gen's text summary and its `stamped` say which).

use std::fmt;

use wirespeed_packet::DEFAULT_GENERATOR_ID;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    Every(u64),
    Each(Vec<(u16, u64)>),
}

impl Expect {
    /// `N`, or `ID=N` pairs separated by commas.
    pub fn parse(text: &str) -> Result<Expect, String> {
        let number = |t: &str, what: &str| {
            t.trim()
                .parse::<u64>()
                .map_err(|_| format!("'{t}' is not a number of {what}"))
        };
        if !text.contains('=') {
            return number(text, "sequence numbers").map(Expect::Every);
        }
        let mut each = Vec::new();
        for pair in text.split(',') {
            let (id, n) = pair
                .split_once('=')
                .ok_or_else(|| format!("'{pair}': give ID=N for each generator"))?;
            let id = id
                .trim()
                .parse::<u16>()
                .map_err(|_| format!("'{id}' is not a generator id (0-65535)"))?;
            if each.iter().any(|&(seen, _)| seen == id) {
                return Err(format!("generator {id} is named twice"));
            }
            each.push((id, number(n, "sequence numbers")?));
        }
        Ok(Expect::Each(each))
    }

    /// Whether it gives some generator no numbers at all (N = 0).
    pub fn of_any_zero(&self) -> bool {
        match self {
            Expect::Every(n) => *n == 0,
            Expect::Each(each) => each.iter().any(|&(_, n)| n == 0),
        }
    }

    /// The numbers `generator` used; None where this --expect says nothing of it.
    pub fn of(&self, generator: u16) -> Option<u64> {
        match self {
            Expect::Every(n) => Some(*n),
            Expect::Each(each) => each
                .iter()
                .find(|&&(id, _)| id == generator)
                .map(|&(_, n)| n),
        }
    }

    /// The generators expected that not one packet came from (none were `seen`), with
    /// their numbers: each listed one; for `N`, gen's default generator when none came
    /// at all (a run where nothing came is not a clean one).
    pub fn missing(&self, seen: &[u16]) -> Vec<(u16, u64)> {
        match self {
            Expect::Every(n) if *n > 0 && seen.is_empty() => vec![(DEFAULT_GENERATOR_ID, *n)],
            Expect::Every(_) => Vec::new(),
            Expect::Each(each) => each
                .iter()
                .filter(|&&(id, n)| n > 0 && !seen.contains(&id))
                .copied()
                .collect(),
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Every(n) => write!(f, "{n}"),
            Expect::Each(each) => {
                let pairs: Vec<String> = each.iter().map(|(id, n)| format!("{id}={n}")).collect();
                f.write_str(&pairs.join(","))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_count_for_all_or_one_for_each() {
        assert_eq!(Expect::parse("1000"), Ok(Expect::Every(1000)));
        let each = Expect::parse("1=3, 2=2").unwrap();
        assert_eq!(each, Expect::Each(vec![(1, 3), (2, 2)]));
        assert_eq!(
            (each.of(1), each.of(2), each.of(3)),
            (Some(3), Some(2), None)
        );
        assert_eq!(each.to_string(), "1=3,2=2");
        assert_eq!(Expect::Every(5).of(9), Some(5));
        for (bad, says) in [
            ("ten", "'ten' is not a number"),
            ("1=3,x=2", "'x' is not a generator id"),
            ("1=3,2", "'2': give ID=N"),
            ("1=3,1=4", "generator 1 is named twice"),
            ("70000=1", "is not a generator id"),
        ] {
            let e = Expect::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_missing_are_those_expected_that_sent_nothing() {
        assert_eq!(Expect::Every(10).missing(&[]), [(DEFAULT_GENERATOR_ID, 10)]);
        assert!(Expect::Every(10).missing(&[5]).is_empty());
        assert!(Expect::Every(0).missing(&[]).is_empty());
        let each = Expect::Each(vec![(1, 3), (2, 2)]);
        assert_eq!(each.missing(&[1]), [(2, 2)]);
        assert_eq!(each.missing(&[]), [(1, 3), (2, 2)]);
    }
}
