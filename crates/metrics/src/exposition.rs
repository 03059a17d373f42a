//! Prometheus' text exposition format, version 0.0.4: each metric family once, its
//! `# HELP` and `# TYPE` lines, then its samples, one a line.

use std::fmt::Write;

/// A family's type, as its `# TYPE` line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (a restart starts it again); the name ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations counted into buckets: `_bucket{le=...}` (cumulative), `_sum`, `_count`.
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: String,
}

/// The families of one scrape, in the order they were first given samples.
#[derive(Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// A counter's value now; `name` ends in `_total`.
    pub fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: u64,
    ) {
        debug_assert!(name.ends_with("_total"), "{name}: a counter ends in _total");
        self.sample(name, help, Kind::Counter, labels, &value.to_string());
    }

    /// A counter of seconds (CPU time, say); `name` ends in `_seconds_total`.
    pub fn seconds(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        debug_assert!(name.ends_with("_seconds_total"), "{name}");
        self.sample(name, help, Kind::Counter, labels, &number(value));
    }

    pub fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        debug_assert!(
            !name.ends_with("_total"),
            "{name}: a gauge does not end in _total"
        );
        self.sample(name, help, Kind::Gauge, labels, &number(value));
    }

    /// A histogram of `count` observations adding up to `sum`: `buckets` gives, for each
    /// upper bound in increasing order, how many observations were at most that (the
    /// `+Inf` bucket, `count`, is added here).
    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) {
        debug_assert!(
            buckets
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1)
        );
        let at = self.family(name, help, Kind::Histogram);
        let out = &mut self.families[at].samples;
        for (le, n) in buckets
            .iter()
            .map(|&(le, n)| (number(le), n))
            .chain([("+Inf".to_string(), count)])
        {
            let mut with_le: Vec<(&str, &str)> = labels.to_vec();
            with_le.push(("le", &le));
            write_sample(out, name, "_bucket", &with_le, &n.to_string());
        }
        write_sample(out, name, "_sum", labels, &number(sum));
        write_sample(out, name, "_count", labels, &count.to_string());
    }

    fn sample(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: Kind,
        labels: &[(&str, &str)],
        value: &str,
    ) {
        let at = self.family(name, help, kind);
        write_sample(&mut self.families[at].samples, name, "", labels, value);
    }

    /// The place of `name`'s family, made now if it has no sample yet.
    fn family(&mut self, name: &'static str, help: &'static str, kind: Kind) -> usize {
        match self.families.iter().position(|f| f.name == name) {
            Some(at) => at,
            None => {
                self.families.push(Family {
                    name,
                    help,
                    kind,
                    samples: String::new(),
                });
                self.families.len() - 1
            }
        }
    }

    /// The text a scrape answers.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help));
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
            out.push_str(&f.samples);
        }
        out
    }
}

/// One sample line: the family's name and `suffix`, its labels, its value.
fn write_sample(out: &mut String, name: &str, suffix: &str, labels: &[(&str, &str)], value: &str) {
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{label}=\"{}\"", escape_label(value));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A float as the format writes it: `NaN`, `+Inf`, `-Inf`, or a plain number.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{v}")
    }
}

/// A label value: backslash, double quote and newline escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// Help text: backslash and newline escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', r"\\").replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_come_once_with_their_samples_in_order() {
        let mut e = Exposition::new();
        e.counter("a_total", "Things.", &[("x", "1")], 5);
        e.gauge("b", "Level.", &[], 0.5);
        e.counter("a_total", "Things.", &[("x", "2")], 7);
        e.seconds("c_seconds_total", "Time.", &[("t", "0")], 1.25);
        assert_eq!(
            e.render(),
            "# HELP a_total Things.\n# TYPE a_total counter\na_total{x=\"1\"} 5\n\
             a_total{x=\"2\"} 7\n# HELP b Level.\n# TYPE b gauge\nb 0.5\n\
             # HELP c_seconds_total Time.\n# TYPE c_seconds_total counter\n\
             c_seconds_total{t=\"0\"} 1.25\n"
        );
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_then_inf_sum_and_count() {
        let mut e = Exposition::new();
        e.histogram(
            "h_seconds",
            "Waits.",
            &[("g", "1")],
            &[(0.001, 2), (0.01, 5)],
            0.03,
            6,
        );
        assert_eq!(
            e.render(),
            "# HELP h_seconds Waits.\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{g=\"1\",le=\"0.001\"} 2\nh_seconds_bucket{g=\"1\",le=\"0.01\"} 5\n\
             h_seconds_bucket{g=\"1\",le=\"+Inf\"} 6\nh_seconds_sum{g=\"1\"} 0.03\n\
             h_seconds_count{g=\"1\"} 6\n"
        );
    }

    #[test]
    fn label_values_and_help_are_escaped_and_odd_floats_named() {
        let mut e = Exposition::new();
        e.gauge("g", "A \\ b\nc", &[("p", "a\"b\\c\nd")], f64::NAN);
        e.gauge("g", "", &[("p", "i")], f64::INFINITY);
        e.gauge("g", "", &[("p", "j")], 1e-7);
        assert_eq!(
            e.render(),
            "# HELP g A \\\\ b\\nc\n# TYPE g gauge\ng{p=\"a\\\"b\\\\c\\nd\"} NaN\n\
             g{p=\"i\"} +Inf\ng{p=\"j\"} 0.0000001\n"
        );
    }
}
