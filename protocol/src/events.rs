//! The `/events` query: where the client's stream starts, and which line it holds there.
//!
//! `after=N` is the newest seq the client holds; `at=F` is that line's [`Line::fingerprint`].
//! Between a client's check of its cached tail (the catch-up) and its stream, the file may be
//! replaced by one at least as long: the stream would then resume at `N` in another
//! conversation. With `at`, the server compares its own line at `N` and, when it is another (or
//! missing), opens the stream with a `replaced` reset and its newest window, as for a file
//! replaced while the stream is open. A reconnect that says where it got to in `Last-Event-ID`
//! (an `EventSource` reconnecting on its own, to the same URL) resumes from there, and its
//! URL's `at` is still checked against the line at its `after`: a file replaced while the
//! client was away is a `replaced` reset, not another conversation's lines resumed after its
//! own.
//!
//! The stream itself opens with a keep-alive frame ([`KEEP_ALIVE_EVENT`]) that names how long
//! the server stays silent at most, and repeats it whenever nothing else was sent for that
//! long. A connection can die without closing (a phone changing networks, a NAT forgetting
//! it, a proxy holding it): no error ever comes, and a client that waits for one shows a
//! session as live while it misses everything. A client that has heard nothing for
//! [`silence_limit_ms`] takes the stream for dead and reconnects.
//!
//! [`Line::fingerprint`]: crate::Line::fingerprint

use crate::QueryError;

/// The SSE event name of the keep-alive frame; its `data:` is [`keep_alive_data`].
/// (`EventSource` hands a page neither comments nor frames without data, so a keep-alive a
/// browser can see is a named event with data.)
pub const KEEP_ALIVE_EVENT: &str = "keepalive";

/// The reference server's keep-alive interval, in milliseconds.
pub const KEEP_ALIVE_MS: u32 = 15_000;

/// How many keep-alive intervals of silence make a stream dead: one lost or late frame is
/// not enough.
pub const SILENT_INTERVALS: u32 = 3;

/// The shortest and longest keep-alive intervals, in milliseconds: what a server may be set to,
/// and what a client believes of one (a server that names 0 would make its clients reconnect
/// for ever; one that names a day would never be checked).
pub const KEEP_ALIVE_BOUNDS_MS: std::ops::RangeInclusive<u32> = 100..=600_000;

/// The keep-alive frame's `data:` for a server silent at most `every_ms` between frames.
pub fn keep_alive_data(every_ms: u32) -> String {
    format!("{{\"every\":{every_ms}}}")
}

/// How long a client waits, hearing nothing, before it takes a stream whose keep-alive frame
/// carried `data` for dead: [`SILENT_INTERVALS`] times the interval it names (kept within
/// 100 ms to 10 min). `None` when `data` names no interval: the frame sets no limit (the
/// client keeps the one it had; before any, three of [`KEEP_ALIVE_MS`]).
pub fn silence_limit_ms(data: &str) -> Option<u32> {
    #[derive(serde::Deserialize)]
    struct Frame {
        every: u64,
    }
    let every = serde_json::from_str::<Frame>(data).ok()?.every;
    let every = u32::try_from(every).unwrap_or(u32::MAX);
    let every = every.clamp(*KEEP_ALIVE_BOUNDS_MS.start(), *KEEP_ALIVE_BOUNDS_MS.end());
    Some(every * SILENT_INTERVALS)
}

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

    #[test]
    fn a_keep_alive_names_its_interval_and_the_silence_allowed_is_three_of_them() {
        assert_eq!(keep_alive_data(15_000), r#"{"every":15000}"#);
        assert_eq!(silence_limit_ms(&keep_alive_data(15_000)), Some(45_000));
        assert_eq!(silence_limit_ms(&keep_alive_data(250)), Some(750));
        // A server's word is kept within bounds: no reconnect storm, no stream never checked.
        assert_eq!(silence_limit_ms(r#"{"every":0}"#), Some(300));
        assert_eq!(
            silence_limit_ms(r#"{"every":99999999999}"#),
            Some(1_800_000)
        );
        for unknown in ["", "{}", r#"{"every":-1}"#, r#"{"every":"15"}"#, "15000"] {
            assert_eq!(silence_limit_ms(unknown), None, "{unknown}");
        }
    }
}
