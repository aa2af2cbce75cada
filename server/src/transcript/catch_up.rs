//! The reopen's catch-up (`GET /sessions/{id}/catchup`, `scrollback_protocol::CatchUpQuery`):
//! the cursor's line and what follows it, read backwards from the end of the file only as far as
//! the cursor or the byte bound.

use super::{for_each_back, open, window_in, Opened};
use scrollback_protocol::{CatchUpQuery, CatchUpState, Line, TranscriptQuery, CATCH_UP_BYTES};
use std::io;
use std::path::Path;

/// The catch-up for a client holding the transcript at `path` up to `query.cursor`: the state
/// and the lines, oldest first (see `scrollback_protocol::CatchUpState`). Past the byte bound the
/// answer is `behind` only when the newest window skips a line: one that reaches the cursor (a
/// line longer than the bound, a few long lines) is every line after it, caught up.
pub fn catch_up(path: &Path, query: &CatchUpQuery) -> io::Result<(CatchUpState, Vec<Line>)> {
    let (state, lines, _) = catch_up_and_file(path, query)?;
    Ok((state, lines))
}

/// [`catch_up`], and the id of the file it was read from (the answer's
/// `scrollback_protocol::FILE_HEADER`): every line of it read from the one open file.
pub fn catch_up_and_file(
    path: &Path,
    query: &CatchUpQuery,
) -> io::Result<(CatchUpState, Vec<Line>, Option<String>)> {
    let Opened { mut file, end } = open(path)?;
    let id = super::reader::file_id(&mut file, end)?;
    let cursor = query.cursor;
    let mut lines = Vec::new();
    let (mut bytes, mut found, mut behind) = (0usize, false, false);
    for_each_back(path, &mut file, end, |line| {
        if line.seq() < cursor {
            return false; // no line at the cursor (the file is shorter, or has a hole)
        }
        if line.seq() == cursor {
            found = true;
            lines.push(line);
            return false;
        }
        bytes += line.raw().len();
        if bytes > CATCH_UP_BYTES {
            behind = true;
            return false;
        }
        lines.push(line);
        true
    })?;
    if found {
        lines.reverse();
        return Ok((CatchUpState::CaughtUp, lines, id));
    }
    let mut newest = |before: Option<u64>, after: Option<u64>, limit: usize| {
        let q = TranscriptQuery {
            before,
            after,
            limit: Some(limit),
            ..TranscriptQuery::default()
        };
        window_in(path, &mut file, end, &q)
    };
    if behind {
        // The cursor's line (found by bisecting), then the newest window above it (never a
        // line at or before the cursor). A window that reaches the line after the cursor (a
        // few long lines passed the bound) skips nothing: that is caught up.
        let at = newest(Some(cursor + 1), None, 1)?;
        if let [line] = at.as_slice() {
            if line.seq() == cursor {
                let window = newest(None, Some(cursor), query.limit)?;
                let gap = window.first().is_some_and(|l| l.seq() > cursor + 1);
                let state = if gap {
                    CatchUpState::Behind
                } else {
                    CatchUpState::CaughtUp
                };
                let mut out = at;
                out.extend(window);
                return Ok((state, out, id));
            }
        }
    }
    let window = newest(None, None, query.limit)?;
    Ok((CatchUpState::Ahead, window, id))
}
