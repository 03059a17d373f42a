//! The one line an error ends the program with: each cause after the context that led to it,
//! `outer: inner: ...`, but a cause the text already says only once (library errors often
//! say their source in their own message too).

/// `e` and its causes as one line.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// With `json`, says the failure of `ran` as one JSON line on standard output too
/// (`{"error": "..."}`), so that a script reading it (`| jq`) sees why, not an empty input.
pub fn say_json_error(json: bool, ran: &anyhow::Result<()>) {
    if json && let Err(e) = ran {
        println!("{}", serde_json::json!({ "error": error_text(e) }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says its source in its own message, as many library errors do.
    #[derive(Debug)]
    struct SaysItsSource {
        source: std::io::Error,
    }

    impl std::fmt::Display for SaysItsSource {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "receive: {}", self.source)
        }
    }

    impl std::error::Error for SaysItsSource {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn each_cause_once() {
        let io = std::io::Error::from_raw_os_error(11);
        let said = io.to_string();
        let e = anyhow::Error::new(SaysItsSource { source: io }).context("/run/x.sock");
        assert_eq!(error_text(&e), format!("/run/x.sock: receive: {said}"));
        let e = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(error_text(&e), "outer: middle: inner");
    }
}
