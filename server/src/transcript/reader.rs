//! Reading a JSONL file by lines without reading it whole: backwards from an offset, forwards
//! from an offset, and a bisection by `seq`. The walks themselves are the protocol's
//! ([`BackWalk`], [`ForwardWalk`], [`SeqSeek`], shared with the client); this module drives them
//! with a file and keeps the server's policy: an unreadable line is skipped and reported.
//!
//! Every offset handed out is a line start. A last line with no newline yet (a writer mid-line)
//! is never a line: [`complete_end`] stops before it.

use scrollback_protocol::{
    check_raw, BackWalk, Fingerprint, ForwardWalk, Found, Line, Probed, Seek, SeqSeek, Step, BLOCK,
    FIRST_BLOCK,
};
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

pub(super) fn read_exact_at<F: Read + io::Seek>(
    file: &mut F,
    at: u64,
    len: usize,
) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(&mut buf)?;
    Ok(buf)
}

/// Lines of a file walked newest-first, from `start` (a line start) towards the file's head.
/// Yields `(offset, bytes)` for each line, without its newline.
pub struct BackLines<'f, F> {
    file: &'f mut F,
    walk: BackWalk,
}

impl<'f, F: Read + io::Seek> BackLines<'f, F> {
    /// Walks back from `start`, which must be 0, the file's complete end or just after a newline.
    pub fn new(file: &'f mut F, start: u64) -> Self {
        BackLines {
            file,
            walk: BackWalk::new(0, start),
        }
    }

    /// Lines of `[floor, start)` (both line boundaries) newest first, holding at most about
    /// `bound` bytes of any line: a longer one is handed out by [`BackLines::next_found`] cut to
    /// its first `bound` bytes (see [`BackWalk::with_line_bound`]).
    pub fn bounded(file: &'f mut F, floor: u64, start: u64, bound: usize) -> Self {
        BackLines {
            file,
            walk: BackWalk::new(floor, start).with_line_bound(bound),
        }
    }

    /// The file walked (to read a line the walk cut whole: the walk seeks before each read).
    pub fn file_mut(&mut self) -> &mut F {
        self.file
    }

    /// The next older line as the walk found it (its head only, when a bounded walk cut it),
    /// or `None` at the floor.
    pub fn next_found(&mut self) -> io::Result<Option<Found>> {
        loop {
            match self.walk.step() {
                Step::Line(found) => return Ok(Some(found)),
                Step::Read { at, len } => self.walk.feed(read_exact_at(self.file, at, len)?),
                Step::Done => return Ok(None),
            }
        }
    }

    /// The next older line: its offset and bytes (no newline), or `None` at the file's head.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, Vec<u8>)>> {
        self.next_line_within(None)
    }

    /// The next older line if it is at most `max` bytes long; `None` at the file's head or as
    /// soon as the line is known to be longer (it is not read further).
    pub fn next_line_within(&mut self, max: Option<usize>) -> io::Result<Option<(u64, Vec<u8>)>> {
        Ok(self.next_found_within(max)?.map(|f| (f.offset, f.bytes)))
    }

    /// [`BackLines::next_line_within`] as the walk found the line (its head only, when a
    /// bounded walk cut it: a line longer than `max` is then read through, not held).
    pub fn next_found_within(&mut self, max: Option<usize>) -> io::Result<Option<Found>> {
        let longer = |f: &Found, m: usize| f.bytes.len() as u64 + f.skipped > m as u64;
        loop {
            match self.walk.step() {
                Step::Line(found) if max.is_some_and(|m| longer(&found, m)) => return Ok(None),
                Step::Line(found) => return Ok(Some(found)),
                Step::Read { .. } if max.is_some_and(|m| self.walk.pending() > m) => {
                    return Ok(None)
                }
                Step::Read { at, len } => self.walk.feed(read_exact_at(self.file, at, len)?),
                Step::Done => return Ok(None),
            }
        }
    }
}

/// The id of the file whose complete lines end at `end` (`scrollback_protocol::file_id`): one
/// read of its first [`scrollback_protocol::FILE_ID_BYTES`] at most.
pub fn file_id<F: Read + io::Seek>(file: &mut F, end: u64) -> io::Result<Option<String>> {
    let n = end.min(scrollback_protocol::FILE_ID_BYTES as u64) as usize;
    Ok(scrollback_protocol::file_id(&read_exact_at(file, 0, n)?))
}

/// The bytes of `file` just before `end`, at most [`TAIL_BYTES`] of them: what a reader that
/// read up to `end` keeps to tell, later, a file appended to from one rewritten.
pub fn tail_before<F: Read + io::Seek>(file: &mut F, end: u64) -> io::Result<Vec<u8>> {
    let from = end.saturating_sub(TAIL_BYTES);
    read_exact_at(file, from, (end - from) as usize)
}

/// How many bytes before the end of what was read [`tail_before`] keeps.
pub const TAIL_BYTES: u64 = 64;

/// The end of the file's complete lines: just after its last newline (a torn last line, still
/// being written, is left out), reading backwards only as far as that newline.
pub fn complete_end<F: Read + io::Seek>(file: &mut F, len: u64) -> io::Result<u64> {
    Ok(complete_end_above(file, 0, len)?.unwrap_or(0))
}

/// Just after the last newline in `[floor, len)`, or `None` when there is none there: reads
/// backwards only as far as that newline, and never below `floor` (a stream that knows the
/// bytes before it hold none does not read them again).
pub fn complete_end_above<F: Read + io::Seek>(
    file: &mut F,
    floor: u64,
    len: u64,
) -> io::Result<Option<u64>> {
    let mut end = len;
    let mut block = FIRST_BLOCK as u64;
    while end > floor {
        let n = block.min(end - floor);
        let at = end - n;
        let bytes = read_exact_at(file, at, n as usize)?;
        if let Some(i) = bytes.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(at + i as u64 + 1));
        }
        end = at;
        block = (block * 2).min(scrollback_protocol::BLOCK as u64);
    }
    Ok(None)
}

/// Lines starting at or after an offset, oldest first, up to a bound; a line not ended by a
/// newline before the bound is not one.
struct Forward<'f, F> {
    file: &'f mut F,
    walk: ForwardWalk,
}

impl<'f, F: Read + io::Seek> Forward<'f, F> {
    fn new(file: &'f mut F, from: u64, end: u64) -> Self {
        Forward {
            file,
            walk: ForwardWalk::new(from, end),
        }
    }

    /// The same walk holding at most `bound` bytes of a line: a longer one is handed out cut
    /// to its head ([`ForwardWalk::with_line_bound`]).
    fn bounded(file: &'f mut F, from: u64, end: u64, bound: usize) -> Self {
        Forward {
            file,
            walk: ForwardWalk::new(from, end).with_line_bound(bound),
        }
    }

    /// The next complete line: its offset, bytes and the offset after its newline.
    fn next_line(&mut self) -> io::Result<Option<(u64, Vec<u8>, u64)>> {
        Ok(self.next_found()?.map(|f| {
            let end = f.end();
            (f.offset, f.bytes, end)
        }))
    }

    /// The next complete line as the walk found it (its head only, when a bound cut it).
    fn next_found(&mut self) -> io::Result<Option<Found>> {
        loop {
            match self.walk.step() {
                Step::Line(found) if found.newline => return Ok(Some(found)),
                Step::Read { at, len } => self.walk.feed(&read_exact_at(self.file, at, len)?),
                Step::Line(_) | Step::Done => return Ok(None),
            }
        }
    }
}

/// The most bytes of a line a walk that only needs its seq holds: a longer line's seq is read
/// from its head ([`Line::seq_of_head`]), as every line the server writes opens with it.
pub const HEAD_BYTES: usize = 64 << 10;

/// The line starting at `start` (a line start) if it ends before `end`: its bytes (no
/// newline) and the offset just after its newline.
pub fn line_at<F: Read + io::Seek>(
    file: &mut F,
    start: u64,
    end: u64,
) -> io::Result<Option<(Vec<u8>, u64)>> {
    Ok(Forward::new(file, start, end)
        .next_line()?
        .filter(|(offset, _, _)| *offset == start)
        .map(|(_, bytes, next)| (bytes, next)))
}

/// The seq and fingerprint ([`Line::fingerprint`]) of the readable line starting at `start` (a
/// line start) if it ends before `end`, holding at most [`HEAD_BYTES`] and a block of it: a
/// longer line's seq is read from its head, and its bytes are hashed as they are read (a
/// stream checking the cursor line of its client read a line of 300 MB whole, and parsed it).
pub fn seq_and_fingerprint_at<F: Read + io::Seek>(
    path: &Path,
    file: &mut F,
    start: u64,
    end: u64,
) -> io::Result<Option<(u64, String)>> {
    let found = Forward::bounded(file, start, end, HEAD_BYTES)
        .next_found()?
        .filter(|f| f.offset == start);
    let Some(found) = found else {
        return Ok(None);
    };
    if found.skipped == 0 {
        let line = parse(path, start, &found.bytes);
        return Ok(line.map(|l| (l.seq(), l.fingerprint())));
    }
    let Some(seq) = Line::seq_of_head(&found.bytes) else {
        return Ok(None);
    };
    let mut hash = Fingerprint::default();
    let (mut at, stop) = (start, found.end() - 1); // (the line, not its newline)
    while at < stop {
        let n = (stop - at).min(BLOCK as u64) as usize;
        hash.update(&read_exact_at(file, at, n)?);
        at += n as u64;
    }
    Ok(Some((seq, hash.finish())))
}

/// A line start that splits the complete region `[0, end)` by seq: every readable line before
/// it has a seq below `seq`, every one at or after it has a seq of `seq` or more. Bisects by
/// byte offset with the protocol's [`SeqSeek`] (seqs grow along the file), then walks forward
/// over the last block to the exact split, so it reads a few lines, not the file.
pub fn offset_of_seq<F: Read + io::Seek>(
    path: &Path,
    file: &mut F,
    end: u64,
    seq: u64,
) -> io::Result<u64> {
    let mut seek = SeqSeek::new(0, end, seq);
    let hi = loop {
        let (from, until) = match seek.step() {
            Seek::Done(at) => break at,
            Seek::Probe { from, until } => (from, until),
        };
        let mut lines = Forward::new(&mut *file, from, until);
        let mut probed = Probed {
            first: until,
            line: None,
        };
        while let Some((offset, bytes, next)) = lines.next_line()? {
            probed.first = probed.first.min(offset);
            if let Some(line) = parse(path, offset, &bytes) {
                probed.line = Some((offset, line.seq(), next));
                break;
            }
        }
        seek.answer(probed);
    };
    // Within a block (or one long line): walk forwards to the first line at or above `seq`. A
    // long line is not held whole, nor parsed: its seq is read from its head (a stream asking
    // for the lines after a line of 300 MB read it, and parsed it, to find the next one).
    let mut lines = Forward::bounded(file, seek.low(), hi, HEAD_BYTES);
    while let Some(found) = lines.next_found()? {
        let at = match found.skipped {
            0 => parse(path, found.offset, &found.bytes).map(|l| l.seq()),
            _ => Line::seq_of_head(&found.bytes),
        };
        if at.is_some_and(|at| at >= seq) {
            return Ok(found.offset);
        }
    }
    Ok(hi)
}

/// A line as a transcript file may hold it: [`Line::parse`]'s, with no `folded` field that
/// reaches past its own seq ([`check_raw`], the rule the client applies to what it is sent).
/// The one rule for what is read from a file and what a PUT writes.
pub fn file_line(text: &str) -> Result<Line, String> {
    Line::parse(text)
        .and_then(|line| check_raw(&line).map(|()| line))
        .map_err(|e| e.to_string())
}

/// Parses one line of the file ([`file_line`]); anything unreadable (blank, not JSON, no event,
/// not UTF-8, a `folded` field) is skipped and reported once per file and offset on stderr
/// (the first [`REPORTS_PER_FILE`] of a file). Never panics.
pub fn parse(path: &Path, offset: u64, bytes: &[u8]) -> Option<Line> {
    let result = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(file_line);
    match result {
        Ok(line) => Some(line),
        Err(reason) => {
            report_damage(path, offset, &reason);
            None
        }
    }
}

/// The unreadable lines reported per file, at most: a file of a million blank lines costs one
/// screen of log, said once, not a line of log (and a path copied) per line on every request.
pub const REPORTS_PER_FILE: usize = 20;

/// The files whose unreadable lines are remembered, at most (all forgotten past it).
const REPORTED_FILES: usize = 10_000;

fn report_damage(path: &Path, offset: u64, reason: &str) {
    if let Some(said) = damage_report(path, offset, reason) {
        eprintln!("{said}");
    }
}

/// What to say on stderr of an unreadable line of `path` at `offset`: once per file and offset,
/// for at most [`REPORTS_PER_FILE`] lines of a file, then once that there are more.
fn damage_report(path: &Path, offset: u64, reason: &str) -> Option<String> {
    static SEEN: OnceLock<Mutex<HashMap<PathBuf, HashSet<u64>>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains_key(path) {
        if seen.len() >= REPORTED_FILES {
            seen.clear();
        }
        seen.insert(path.to_path_buf(), HashSet::new());
    }
    let offsets = seen.get_mut(path).expect("inserted above");
    if offsets.len() > REPORTS_PER_FILE || !offsets.insert(offset) {
        return None;
    }
    let shown = path.display();
    Some(match offsets.len() > REPORTS_PER_FILE {
        true => format!(
            "scrollback-server: more unreadable lines in {shown} (at byte {offset}, and on): not reported"
        ),
        false => format!(
            "scrollback-server: skipping an unreadable line in {shown} at byte {offset}: {reason}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of a million unreadable lines (blank ones, say), read by request after request:
    /// a few lines of log, once, not a line per bad line per request.
    #[test]
    fn unreadable_lines_are_reported_once_each_and_a_few_per_file() {
        let path = Path::new("/no/such/dir/a-million-blank-lines.jsonl");
        let said = |from: u64| {
            (from..from + 5_000)
                .filter(|&offset| damage_report(path, offset, "blank").is_some())
                .count()
        };
        assert_eq!(
            said(0),
            REPORTS_PER_FILE + 1,
            "the first ones, then that there are more"
        );
        assert_eq!(said(0), 0, "each once");
        assert_eq!(said(5_000), 0, "and no more of that file");
        let other = Path::new("/no/such/dir/another.jsonl");
        assert!(
            damage_report(other, 0, "blank").is_some(),
            "another file's are its own"
        );
    }
}
