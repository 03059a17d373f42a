//! Prometheus' text exposition format 0.0.4, read: `name{label="value",...} value [timestamp]`
//! a line, `#` lines (HELP, TYPE, comments) skipped. Only what `top` needs: samples, not types.

/// One sample: a metric name, its labels in the order written, its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A line that is not a sample: which one (from 1) and what is wrong with it.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

/// Every sample of `text`, in order; the first line that is not a sample, a comment or blank
/// is an error (an HTML page or a JSON answer is not mistaken for an empty scrape).
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut samples = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let sample = parse_line(line).map_err(|reason| ParseError {
            line: i + 1,
            reason: format!("{reason}: {}", clip(line)),
        })?;
        samples.push(sample);
    }
    Ok(samples)
}

/// At most the first 80 characters of `line`, for an error message.
fn clip(line: &str) -> String {
    match line.char_indices().nth(80) {
        Some((cut, _)) => format!("'{}...'", &line[..cut]),
        None => format!("'{line}'"),
    }
}

fn parse_line(line: &str) -> Result<Sample, &'static str> {
    let name_end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("not a metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = parse_labels(inner, &mut labels)?;
    }
    if !rest.starts_with([' ', '\t']) {
        return Err("no space before the value");
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or("no value")?;
    let value = parse_value(value).ok_or("value is not a number")?;
    // An optional timestamp (milliseconds); nothing after it.
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| "timestamp is not a number")?;
    }
    if fields.next().is_some() {
        return Err("more than a value and a timestamp");
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Reads `l="v",...}` into `labels`; returns what follows the `}`.
fn parse_labels<'a>(
    mut s: &'a str,
    labels: &mut Vec<(String, String)>,
) -> Result<&'a str, &'static str> {
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
        let name = &s[..end];
        if name.is_empty() {
            return Err("bad label name");
        }
        s = s[end..].trim_start();
        s = s.strip_prefix('=').ok_or("no '=' after a label name")?;
        s = s
            .trim_start()
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let (value, rest) = parse_quoted(s)?;
        labels.push((name.to_string(), value));
        s = rest.trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err("no ',' or '}' after a label");
        }
    }
}

/// A label value after its opening quote, with the format's escapes (`\\`, `\"`, `\n`);
/// returns it and what follows the closing quote.
fn parse_quoted(s: &str) -> Result<(String, &str), &'static str> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, c @ ('\\' | '"'))) => value.push(c),
                _ => return Err("bad escape in a label value"),
            },
            c => value.push(c),
        }
    }
    Err("label value not closed")
}

/// A sample value: a float, or Go's `NaN`, `+Inf`, `-Inf`.
fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn samples_with_and_without_labels() {
        let text = "# HELP wirespeed_switch_upcalls_total Upcalls.\n\
                    # TYPE wirespeed_switch_upcalls_total counter\n\
                    wirespeed_switch_upcalls_total 17\n\
                    \n\
                    wirespeed_port_receive_packets_total{device=\"veth0\",queue=\"0\",port=\"1\"} 1234567 1700000000000\n\
                    wirespeed_thread_busy_seconds_total{thread=\"pmd0\", cpu=\"3\" , } 0.25\n";
        let samples = parse(text).unwrap();
        assert_eq!(
            samples,
            vec![
                Sample {
                    name: "wirespeed_switch_upcalls_total".into(),
                    labels: vec![],
                    value: 17.0
                },
                Sample {
                    name: "wirespeed_port_receive_packets_total".into(),
                    labels: labels(&[("device", "veth0"), ("queue", "0"), ("port", "1")]),
                    value: 1234567.0
                },
                Sample {
                    name: "wirespeed_thread_busy_seconds_total".into(),
                    labels: labels(&[("thread", "pmd0"), ("cpu", "3")]),
                    value: 0.25
                },
            ]
        );
        assert_eq!(samples[1].label("port"), Some("1"));
        assert_eq!(samples[1].label("reason"), None);
    }

    #[test]
    fn escapes_and_special_values() {
        let samples =
            parse("m{a=\"x\\\"y\\\\z\\n\",b=\"{},= \"} +Inf\nn NaN\no -Inf\np 1e3\nq{} -2.5\n")
                .unwrap();
        assert_eq!(
            samples[0].labels,
            labels(&[("a", "x\"y\\z\n"), ("b", "{},= ")])
        );
        assert_eq!(samples[0].value, f64::INFINITY);
        assert!(samples[1].value.is_nan());
        assert_eq!(samples[2].value, f64::NEG_INFINITY);
        assert_eq!(samples[3].value, 1000.0);
        assert_eq!((samples[4].labels.len(), samples[4].value), (0, -2.5));
    }

    #[test]
    fn what_is_not_prometheus_text_is_an_error_naming_the_line() {
        let err = parse("<html>\n<body>hello</body>\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.reason.starts_with("not a metric name"), "{err}");
        let err = parse("# ok\nm 1\n{\"ports\": 3}\n").unwrap_err();
        assert_eq!(err.line, 3);
        for (bad, why) in [
            ("m", "no space before the value"),
            ("m{a=\"1\"}", "no space before the value"),
            ("m one", "value is not a number"),
            ("m{a=1} 2", "label value not quoted"),
            ("m{a=\"1} 2", "label value not closed"),
            ("m{a=\"1\" b=\"2\"} 2", "no ',' or '}' after a label"),
            ("m 1 2 3", "more than a value and a timestamp"),
            ("m 1 later", "timestamp is not a number"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.reason.starts_with(why), "{bad}: {err}");
        }
    }

    #[test]
    fn empty_text_has_no_samples() {
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("# only comments\n").unwrap(), vec![]);
    }
}
