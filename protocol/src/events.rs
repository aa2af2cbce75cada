//! The `/events` query: where the client's stream starts, and which line it holds there.
//!
//! `after=N` is the newest seq the client holds; `at=F` is that line's [`Line::fingerprint`].
//! Between a client's check of its cached tail (the catch-up) and its stream, the file may be
//! replaced by one at least as long: the stream would then resume at `N` in another
//! conversation. With `at`, the server compares its own line at `N` and, when it is another (or
//! missing), opens the stream with a `replaced` reset and its newest window, as for a file
//! replaced while the stream is open. A reconnect that says where it got to in `Last-Event-ID`
//! is not checked (`at` names the line at `after`, not that one).
//!
//! [`Line::fingerprint`]: crate::Line::fingerprint

use crate::QueryError;

/// The query string (without `?`) of `/events` for a client holding everything up to `after`,
/// whose line at `after` has the fingerprint `at` (none when it holds nothing).
pub fn events_query(after: u64, at: Option<&str>) -> String {
    match at {
        Some(at) if after > 0 => format!("after={after}&at={at}"),
        _ => format!("after={after}"),
    }
}

/// The `at` of an `/events` query string: `None` when absent; refused unless it is a
/// fingerprint (16 lowercase hex digits) given once.
pub fn events_at(query: &str) -> Result<Option<String>, QueryError> {
    let mut found = None;
    for pair in query.split('&') {
        let Some(value) = pair.strip_prefix("at=") else {
            continue;
        };
        if found.is_some() {
            return Err(QueryError {
                param: "at",
                reason: "given more than once".into(),
            });
        }
        let ok = value.len() == 16
            && value
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !ok {
            return Err(QueryError {
                param: "at",
                reason: format!("a line's fingerprint is 16 hex digits, got {value:?}"),
            });
        }
        found = Some(value.to_string());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_the_line_held_at_after() {
        assert_eq!(events_query(0, None), "after=0");
        assert_eq!(events_query(0, Some("aee2900e1b1a94e7")), "after=0");
        assert_eq!(
            events_query(7, Some("aee2900e1b1a94e7")),
            "after=7&at=aee2900e1b1a94e7"
        );
        assert_eq!(
            events_at("after=7&at=aee2900e1b1a94e7").unwrap().as_deref(),
            Some("aee2900e1b1a94e7")
        );
        assert_eq!(events_at("after=7").unwrap(), None);
        for bad in ["at=xyz", "at=AEE2900E1B1A94E7", "at=", "at=1&at=2"] {
            assert!(events_at(bad).is_err(), "{bad}");
        }
    }
}
