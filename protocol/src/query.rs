//! The `/transcript` query: parsed by the server, built by the client, validated in one place.

use crate::{HISTORY_PAGE, MAX_LIMIT, OPENING_WINDOW};
use std::borrow::Cow;
use std::fmt::Write as _;

/// A URL query string's (without `?`) `key=value` pairs, each percent-decoded and `+` read as
/// a space, as `URLSearchParams` reads them: `after=%35` is `after=5`. Empty pairs are skipped;
/// a pair without `=` has an empty value.
pub fn query_pairs(query: &str) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    form_urlencoded::parse(query.as_bytes())
}

/// `GET /sessions/{id}/transcript?before=&after=&limit=&coalesce=&bytes=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TranscriptQuery {
    /// Exclusive upper bound; `None` means past the newest line.
    pub before: Option<u64>,
    /// Exclusive lower bound: nothing at or below it is returned; the page stops here instead
    /// of at `limit`. The client passes the end of what it already holds.
    pub after: Option<u64>,
    /// Events, or rows when `coalesce`; `None` means the default ([`TranscriptQuery::limit`]).
    pub limit: Option<usize>,
    /// Join each run of streamed assistant text into one event (the row rule). The newest
    /// window (no `before`) is never coalesced.
    pub coalesce: bool,
    /// A byte budget: read as far back as needed and fill the page with (folded) lines up to
    /// this many bytes of line text. Stops at whichever of `limit` and `bytes` comes first.
    pub bytes: Option<usize>,
}

/// A query parameter that is not acceptable, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad `{param}`: {reason}")]
pub struct QueryError {
    /// The parameter's name as it appears in the URL.
    pub param: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

fn bad(param: &'static str, reason: impl Into<String>) -> QueryError {
    QueryError {
        param,
        reason: reason.into(),
    }
}

/// `value` as a whole number from `min` to `max`: digits only (Rust's parse also takes a
/// leading `+`, which no client of this protocol writes).
pub(crate) fn number(
    param: &'static str,
    value: &str,
    min: u64,
    max: u64,
) -> Result<u64, QueryError> {
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    let n: u64 = value
        .parse()
        .ok()
        .filter(|_| digits)
        .ok_or_else(|| bad(param, format!("must be a whole number, got {value:?}")))?;
    if n < min || n > max {
        return Err(bad(param, format!("must be from {min} to {max}, got {n}")));
    }
    Ok(n)
}

impl TranscriptQuery {
    /// Parses a URL query string (without `?`). Unknown parameters are ignored (a token may
    /// travel there); a repeated or malformed known one is an error naming it.
    pub fn parse(query: &str) -> Result<TranscriptQuery, QueryError> {
        let mut q = TranscriptQuery::default();
        let mut seen: Vec<&str> = Vec::new();
        for (key, value) in query_pairs(query) {
            let param: &'static str = match &*key {
                "before" => "before",
                "after" => "after",
                "limit" => "limit",
                "coalesce" => "coalesce",
                "bytes" => "bytes",
                _ => continue,
            };
            if seen.contains(&param) {
                return Err(bad(param, "given more than once"));
            }
            seen.push(param);
            match param {
                "before" => q.before = Some(number(param, &value, 1, i64::MAX as u64)?),
                "after" => q.after = Some(number(param, &value, 0, i64::MAX as u64)?),
                "limit" => q.limit = Some(number(param, &value, 1, MAX_LIMIT as u64)? as usize),
                "bytes" => q.bytes = Some(number(param, &value, 1, 64 << 20)? as usize),
                _ => {
                    q.coalesce = match &*value {
                        "true" | "1" => true,
                        "false" | "0" | "" => false,
                        _ => {
                            return Err(bad(param, format!("must be true or false, got {value:?}")))
                        }
                    }
                }
            }
        }
        q.validate()?;
        Ok(q)
    }

    /// Checks the combination: `after` must be below `before - 1`'s range end.
    pub fn validate(&self) -> Result<(), QueryError> {
        if let (Some(before), Some(after)) = (self.before, self.after) {
            if after >= before {
                return Err(bad(
                    "after",
                    format!("must be below before ({before}), got {after}"),
                ));
            }
        }
        if matches!(self.limit, Some(l) if l == 0 || l > MAX_LIMIT) {
            return Err(bad("limit", format!("must be from 1 to {MAX_LIMIT}")));
        }
        Ok(())
    }

    /// Whether this query is answered coalesced: only when asked and never for the newest
    /// window (the live cursor depends on real seqs).
    pub fn coalesced(&self) -> bool {
        self.coalesce && self.before.is_some()
    }

    /// The limit in force: the one given, else [`HISTORY_PAGE`] rows coalesced or
    /// [`OPENING_WINDOW`] events raw.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(if self.coalesced() {
            HISTORY_PAGE
        } else {
            OPENING_WINDOW
        })
    }

    /// The most a page answering this query holds: `limit` events (rows when coalesced), or,
    /// with a byte budget and no `limit`, [`MAX_LIMIT`] (the budget bounds it); else the default
    /// ([`TranscriptQuery::limit`]).
    pub fn most(&self) -> usize {
        match (self.limit, self.bytes) {
            (Some(limit), _) => limit,
            (None, Some(_)) => MAX_LIMIT,
            (None, None) => self.limit(),
        }
    }

    /// The query string (without `?`), parameters in a fixed order.
    pub fn to_query_string(&self) -> String {
        let mut s = String::new();
        let mut put = |k: &str, v: &dyn std::fmt::Display| {
            if !s.is_empty() {
                s.push('&');
            }
            let _ = write!(s, "{k}={v}");
        };
        if let Some(b) = self.before {
            put("before", &b);
        }
        if let Some(a) = self.after {
            put("after", &a);
        }
        if let Some(l) = self.limit {
            put("limit", &l);
        }
        if self.coalesce {
            put("coalesce", &true);
        }
        if let Some(b) = self.bytes {
            put("bytes", &b);
        }
        s
    }
}
