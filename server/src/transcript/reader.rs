//! Reading a JSONL file by lines without reading it whole: backwards from an offset in blocks,
//! forwards from an offset, and a bisection by `seq`.
//!
//! Every offset handed out is a line start. A last line with no newline yet (a writer mid-line)
//! is never a line: [`complete_end`] stops before it.

use scrollback_protocol::Line;
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The largest block read at once. The first block is smaller: most reads want a few lines.
const BLOCK: u64 = 64 * 1024;
const FIRST_BLOCK: u64 = 8 * 1024;

fn read_exact_at(file: &mut File, at: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(&mut buf)?;
    Ok(buf)
}

/// Lines of a file walked newest-first, from `start` (a line start) towards the file's head,
/// reading blocks backwards. Yields `(offset, bytes)` for each line, without its newline.
pub struct BackLines<'f> {
    file: &'f mut File,
    /// File offset of `buf[0]`.
    pos: u64,
    /// The unread region `[pos, pos + buf.len())`; it ends just after a newline (or is empty).
    buf: Vec<u8>,
    block: u64,
}

impl<'f> BackLines<'f> {
    /// Walks back from `start`, which must be 0, the file's complete end or just after a newline.
    pub fn new(file: &'f mut File, start: u64) -> Self {
        BackLines {
            file,
            pos: start,
            buf: Vec::new(),
            block: FIRST_BLOCK,
        }
    }

    fn read_more(&mut self) -> io::Result<bool> {
        if self.pos == 0 {
            return Ok(false);
        }
        let n = self.block.min(self.pos);
        self.block = (self.block * 2).min(BLOCK);
        let at = self.pos - n;
        let mut block = read_exact_at(self.file, at, n as usize)?;
        block.extend_from_slice(&self.buf);
        self.buf = block;
        self.pos = at;
        Ok(true)
    }

    /// The next older line: its offset and bytes (no newline), or `None` at the file's head.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, Vec<u8>)>> {
        loop {
            if self.buf.is_empty() && !self.read_more()? {
                return Ok(None);
            }
            // The region ends with the current line's newline; look for the one before it.
            let body = self.buf.len() - 1;
            if let Some(i) = self.buf[..body].iter().rposition(|&b| b == b'\n') {
                let line = self.buf[i + 1..body].to_vec();
                self.buf.truncate(i + 1);
                return Ok(Some((self.pos + i as u64 + 1, line)));
            }
            if self.pos == 0 {
                let mut line = std::mem::take(&mut self.buf);
                line.pop();
                return Ok(Some((0, line)));
            }
            self.read_more()?;
        }
    }
}

/// The end of the file's complete lines: just after its last newline (a torn last line, still
/// being written, is left out), reading backwards only as far as that newline.
pub fn complete_end(file: &mut File, len: u64) -> io::Result<u64> {
    let mut end = len;
    let mut block = FIRST_BLOCK;
    while end > 0 {
        let n = block.min(end);
        let at = end - n;
        let bytes = read_exact_at(file, at, n as usize)?;
        if let Some(i) = bytes.iter().rposition(|&b| b == b'\n') {
            return Ok(at + i as u64 + 1);
        }
        end = at;
        block = (block * 2).min(BLOCK);
    }
    Ok(0)
}

/// The line starting at `start` (a line start) if it ends before `end`: its bytes (no
/// newline) and the offset just after its newline.
pub fn line_at(file: &mut File, start: u64, end: u64) -> io::Result<Option<(Vec<u8>, u64)>> {
    let mut line = Vec::new();
    let mut at = start;
    let mut block = FIRST_BLOCK;
    while at < end {
        let n = block.min(end - at);
        let bytes = read_exact_at(file, at, n as usize)?;
        if let Some(i) = bytes.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&bytes[..i]);
            return Ok(Some((line, at + i as u64 + 1)));
        }
        line.extend_from_slice(&bytes);
        at += n;
        block = (block * 2).min(BLOCK);
    }
    Ok(None)
}

/// The first line start at or after `at` (0 stays 0).
fn line_start_from(file: &mut File, at: u64, end: u64) -> io::Result<u64> {
    if at == 0 {
        return Ok(0);
    }
    // The byte before `at` is a newline exactly when `at` is a line start.
    Ok(match line_at(file, at - 1, end)? {
        Some((_, next)) => next,
        None => end,
    })
}

/// A line start that splits the complete region `[0, end)` by seq: every readable line before
/// it has a seq below `seq`, every one at or after it has a seq of `seq` or more. Bisects by
/// byte offset (seqs grow along the file), so it reads a few lines, not the file.
pub fn offset_of_seq(path: &Path, file: &mut File, end: u64, seq: u64) -> io::Result<u64> {
    let (mut lo, mut hi) = (0u64, end);
    while hi - lo > BLOCK {
        let mid = lo + (hi - lo) / 2;
        let first = line_start_from(file, mid, hi)?;
        if first >= hi {
            break;
        }
        let mut at = first;
        // The first readable line from `at`; unreadable ones are skipped.
        let mut found = None;
        while at < hi {
            let Some((bytes, next)) = line_at(file, at, hi)? else {
                break;
            };
            if let Some(line) = parse(path, at, &bytes) {
                found = Some((line.seq(), next));
                break;
            }
            at = next;
        }
        match found {
            Some((s, _)) if s >= seq => hi = at,
            Some((_, next)) => lo = next,
            // Only unreadable lines from `at` to `hi`: either bound splits the same way.
            None => hi = first,
        }
    }
    // Within one block: walk forwards.
    let mut at = lo;
    while at < hi {
        let Some((bytes, next)) = line_at(file, at, hi)? else {
            break;
        };
        if parse(path, at, &bytes).is_some_and(|l| l.seq() >= seq) {
            return Ok(at);
        }
        at = next;
    }
    Ok(hi)
}

/// Parses one line of the file; anything unreadable (blank, not JSON, no event, not UTF-8) is
/// skipped and reported once per file and offset on stderr. Never panics.
pub fn parse(path: &Path, offset: u64, bytes: &[u8]) -> Option<Line> {
    let result = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(|text| Line::parse(text).map_err(|e| e.to_string()));
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
