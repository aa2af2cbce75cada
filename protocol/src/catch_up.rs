//! The reopen's one request: `GET /sessions/{id}/catchup?cursor=N&limit=W`.
//!
//! A client holding a session up to `cursor` asks once, compressed like every JSON answer, for
//! the line at its cursor (so it can compare it with its cached tail by parsed equality before it
//! appends anything), every line after it while they fit in [`CATCH_UP_BYTES`] of line text, and
//! the session's summary (so a reopen needs no `GET /sessions`). Then it opens `/events` from the
//! newest seq it now holds.
//!
//! What the server can tell, it says in `state`:
//! - `caughtUp`: `lines` is the cursor's line and every line after it, oldest first (past
//!   [`CATCH_UP_BYTES`] too when the newest window reaches the line after the cursor: a line
//!   longer than the bound is sent whole);
//! - `behind`: the lines after the cursor pass [`CATCH_UP_BYTES`] and the newest window skips
//!   some: `lines` is the cursor's line and then the newest `limit` lines (the client keeps its
//!   cache, with a gap it pages with `after`);
//! - `ahead`: the file has no line at the cursor (it was replaced by a shorter one): `lines` is
//!   the newest `limit` lines.
//!
//! Whether the file was replaced by one at least as long, only the client can tell (the cursor's
//! line is not its cached tail): it purges and opens cold, as for `ahead`.
//!
//! [`CATCH_UP_BYTES`]: crate::CATCH_UP_BYTES

use crate::{Line, LineError, SessionSummary, MAX_LIMIT, OPENING_WINDOW};
use serde::{Deserialize, Serialize};

/// What the server found at and after the client's cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CatchUpState {
    /// The cursor's line and everything after it.
    CaughtUp,
    /// The cursor's line, then the newest window: the gap is too large to send.
    Behind,
    /// No line at the cursor: the newest window only.
    Ahead,
}

/// The catch-up route's query: `cursor=N&limit=W`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatchUpQuery {
    /// The seq of the client's newest cached line (at least 1).
    pub cursor: u64,
    /// The newest window's size, in raw events, when the answer is `behind` or `ahead`.
    pub limit: usize,
}

impl CatchUpQuery {
    /// A query for a client at `cursor` whose opening window is `limit` events.
    pub fn new(cursor: u64, limit: usize) -> CatchUpQuery {
        CatchUpQuery { cursor, limit }
    }

    /// The URL query string (without `?`); the limit only when it is not the server's default
    /// ([`OPENING_WINDOW`]), so the usual check has one spelling a page can ask ahead
    /// (`Scrollback.open`'s `opening`).
    pub fn to_query_string(&self) -> String {
        match self.limit {
            OPENING_WINDOW => format!("cursor={}", self.cursor),
            limit => format!("cursor={}&limit={limit}", self.cursor),
        }
    }

    /// Parses a URL query string; unknown parameters are ignored (a token may travel there).
    pub fn parse(query: &str) -> Result<CatchUpQuery, crate::QueryError> {
        let bad = |param: &'static str, reason: String| crate::QueryError { param, reason };
        let (mut cursor, mut limit) = (None, None);
        for (key, value) in crate::query_pairs(query) {
            let (param, slot, max): (&'static str, &mut Option<u64>, u64) = match &*key {
                "cursor" => ("cursor", &mut cursor, u64::MAX),
                "limit" => ("limit", &mut limit, MAX_LIMIT as u64),
                _ => continue,
            };
            if slot.is_some() {
                return Err(bad(param, "given twice".into()));
            }
            *slot = Some(crate::query::number(param, &value, 1, max)?);
        }
        Ok(CatchUpQuery {
            cursor: cursor.ok_or_else(|| bad("cursor", "is required".into()))?,
            limit: limit.map_or(OPENING_WINDOW, |l| l as usize),
        })
    }
}

/// The answer's body: `{"state":..., "summary":{...}, "lines":[...]}`, each line byte for byte.
pub fn catch_up_json(state: CatchUpState, summary: &SessionSummary, lines: &[Line]) -> String {
    #[derive(Serialize)]
    struct Head<'a> {
        state: CatchUpState,
        summary: &'a SessionSummary,
    }
    let head = serde_json::to_string(&Head { state, summary }).expect("plain data serializes");
    let mut out = head;
    out.pop(); // the closing brace
    out.push_str(",\"lines\":");
    out.push_str(&crate::page_json(lines));
    out.push('}');
    out
}

/// A parsed catch-up answer.
#[derive(Debug, Clone, PartialEq)]
pub struct CatchUpAnswer {
    /// What the server found.
    pub state: CatchUpState,
    /// The session as the list would describe it now.
    pub summary: SessionSummary,
    /// The lines, oldest first, each keeping the server's exact text.
    pub lines: Vec<Line>,
}

impl CatchUpAnswer {
    /// What a client whose newest line is `tail` takes from this answer (the rule the engine's
    /// reopen and a page's resumed screen share): `None` when `tail` is not the server's line
    /// (`ahead`, or another line at its seq: the file was replaced), and the client purges and
    /// opens cold; else the lines after `tail`, oldest first, and whether a gap lies between
    /// (`behind`: they are the newest window, shown on their own).
    pub fn take_after(self, tail: &Line) -> Option<(Vec<Line>, bool)> {
        if self.state == CatchUpState::Ahead || self.lines.first() != Some(tail) {
            return None;
        }
        let after: Vec<Line> = self
            .lines
            .into_iter()
            .skip(1)
            .filter(|l| l.seq() > tail.seq())
            .collect();
        let gap = after.first().is_some_and(|l| l.seq() > tail.seq() + 1);
        Some((after, gap))
    }
}

/// Parses a catch-up answer's body.
pub fn parse_catch_up(body: &str) -> Result<CatchUpAnswer, LineError> {
    #[derive(Deserialize)]
    struct Body<'a> {
        state: CatchUpState,
        summary: SessionSummary,
        // Each line's text, read in the same pass as the body (not the array's text, read
        // again as a page): a catch-up of 300 lines is ~260 kB.
        #[serde(borrow)]
        lines: Vec<&'a serde_json::value::RawValue>,
    }
    let parsed: Body<'_> = serde_json::from_str(body).map_err(|e| LineError::not_json(&e))?;
    Ok(CatchUpAnswer {
        state: parsed.state,
        summary: parsed.summary,
        lines: (parsed.lines.into_iter())
            .map(|e| Line::parse(e.get()))
            .collect::<Result<_, _>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_round_trips_byte_for_byte() {
        let summary = SessionSummary {
            id: "a".into(),
            title: "t".into(),
            status: "idle".into(),
            model: "m".into(),
            permission_mode: "p".into(),
            seq: 2,
        };
        let lines = vec![
            Line::parse(r#"{"seq":1,"ts":1788546972.6030757,"event":{"type":"x","k":[1, 2]}}"#)
                .unwrap(),
            Line::parse(r#"{"seq":2,"ts":0.1,"event":{"type":"assistantText","text":"é"}}"#)
                .unwrap(),
        ];
        let body = catch_up_json(CatchUpState::Behind, &summary, &lines);
        let answer = parse_catch_up(&body).unwrap();
        assert_eq!(answer.state, CatchUpState::Behind);
        assert_eq!(answer.summary, summary);
        assert_eq!(answer.lines, lines);
        assert!(answer
            .lines
            .iter()
            .zip(&lines)
            .all(|(a, b)| a.raw() == b.raw()));
    }

    #[test]
    fn the_query_needs_a_cursor_and_bounds_its_numbers() {
        assert_eq!(
            CatchUpQuery::parse("cursor=5&token=x").unwrap(),
            CatchUpQuery::new(5, OPENING_WINDOW)
        );
        assert_eq!(CatchUpQuery::parse("cursor=5&limit=3").unwrap().limit, 3);
        for query in [
            CatchUpQuery::new(7, OPENING_WINDOW),
            CatchUpQuery::new(7, 3),
        ] {
            assert_eq!(
                CatchUpQuery::parse(&query.to_query_string()).unwrap(),
                query
            );
        }
        assert_eq!(
            CatchUpQuery::new(7, OPENING_WINDOW).to_query_string(),
            "cursor=7"
        );
        assert_eq!(CatchUpQuery::parse("").unwrap_err().param, "cursor");
        assert_eq!(CatchUpQuery::parse("cursor=0").unwrap_err().param, "cursor");
        assert_eq!(
            CatchUpQuery::parse("cursor=1&limit=99999")
                .unwrap_err()
                .param,
            "limit"
        );
        assert_eq!(
            CatchUpQuery::parse("cursor=1&cursor=2").unwrap_err().param,
            "cursor"
        );
        assert_eq!(CatchUpQuery::parse("cursor=x").unwrap_err().param, "cursor");
    }
}
