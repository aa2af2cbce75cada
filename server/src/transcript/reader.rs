//! Reading a JSONL file by lines without reading it whole: backwards from an offset, forwards
//! from an offset, and a bisection by `seq`. The walks themselves are the protocol's
//! ([`BackWalk`], [`ForwardWalk`], [`SeqSeek`], shared with the client); this module drives them
//! with a file and keeps the server's policy: an unreadable line is skipped and reported.
//!
//! Every offset handed out is a line start. A last line with no newline yet (a writer mid-line)
//! is never a line: [`complete_end`] stops before it.

use scrollback_protocol::{
    check_raw, BackWalk, ForwardWalk, Found, Line, Probed, Seek, SeqSeek, Step, FIRST_BLOCK,
};
use std::collections::HashSet;
use std::io::{self, Read, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

fn read_exact_at<F: Read + io::Seek>(file: &mut F, at: u64, len: usize) -> io::Result<Vec<u8>> {
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
        loop {
            match self.walk.step() {
                Step::Line(found) if max.is_some_and(|m| found.bytes.len() > m) => return Ok(None),
                Step::Line(found) => return Ok(Some((found.offset, found.bytes))),
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

    /// The next complete line: its offset, bytes and the offset after its newline.
    fn next_line(&mut self) -> io::Result<Option<(u64, Vec<u8>, u64)>> {
        loop {
            match self.walk.step() {
                Step::Line(found) if found.newline => {
                    let end = found.end();
                    return Ok(Some((found.offset, found.bytes, end)));
                }
                Step::Read { at, len } => self.walk.feed(&read_exact_at(self.file, at, len)?),
                Step::Line(_) | Step::Done => return Ok(None),
            }
        }
    }
}

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
    // Within a block (or one long line): walk forwards to the first line at or above `seq`.
    let mut lines = Forward::new(file, seek.low(), hi);
    while let Some((offset, bytes, _)) = lines.next_line()? {
        if parse(path, offset, &bytes).is_some_and(|l| l.seq() >= seq) {
            return Ok(offset);
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
/// not UTF-8, a `folded` field) is skipped and reported once per file and offset on stderr.
/// Never panics.
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

fn report_damage(path: &Path, offset: u64, reason: &str) {
    static SEEN: OnceLock<Mutex<HashSet<(PathBuf, u64)>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    if seen.len() > 100_000 {
        seen.clear();
    }
    if seen.insert((path.to_path_buf(), offset)) {
        eprintln!(
            "scrollback-server: skipping an unreadable line in {} at byte {offset}: {reason}",
            path.display()
        );
    }
}
