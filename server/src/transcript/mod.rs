//! The server's reading of a transcript file: windows (`/transcript`), the reopen's catch-up
//! (`/catchup`), what a stream's catch-up sends (`/events`, read by `follow`), the newest line,
//! and appending. Pure functions over a path, callable in-process (a model test calls them
//! directly). Every read starts at the end of the file and goes back in blocks only as far as
//! the answer needs: the cost of a page does not grow with the file.

pub mod catch_up;
pub mod reader;
pub mod torn;

use crate::session::SUMMARY_LINE_BYTES;
use reader::BackLines;
use scrollback_protocol::{coalesce, Line, RowWalk, TranscriptQuery};
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::Path;

/// Opens `path` for reading when it is a regular file. Anything else under a session's name (a
/// FIFO, a device, a folder) is `NotFound`, as if absent: opening a FIFO would block its thread
/// until some process writes to it, so the file is opened without blocking (on Unix) and its
/// type checked on the open file, not on the name (which could change in between).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// Which file a path named when it was read: a file replaced under the same name is another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of an open file or of a path's metadata.
    pub fn of(meta: &std::fs::Metadata) -> FileId {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            FileId { dev: 0, ino: 0 }
        }
    }

    /// Whether the system named the file (a device and an inode); on one that does not, every
    /// file has the same id, which tells nothing apart.
    pub fn is_known(&self) -> bool {
        self.dev != 0 || self.ino != 0
    }
}

/// An open transcript and the end of its complete lines at the time it was opened.
struct Opened {
    file: File,
    end: u64,
}

fn open(path: &Path) -> io::Result<Opened> {
    let mut file = open_regular(path)?;
    let meta = file.metadata()?;
    let end = torn::complete_end_of(&mut file, &meta)?;
    Ok(Opened { file, end })
}

/// Lines walked newest-first from `start`, unreadable ones skipped.
fn for_each_back(
    path: &Path,
    file: &mut File,
    start: u64,
    mut f: impl FnMut(Line) -> bool,
) -> io::Result<()> {
    let mut lines = BackLines::new(file, start);
    while let Some((offset, bytes)) = lines.next_line()? {
        if let Some(line) = reader::parse(path, offset, &bytes) {
            if !f(line) {
                break;
            }
        }
    }
    Ok(())
}

/// The page answering `query` from the transcript at `path`, oldest first.
///
/// `before` is found by bisecting the file by seq, then lines are read backwards from there.
/// The page stops at `limit` (events, or rows by the protocol's row rule when coalesced), at
/// `after` (a run cut there is the partial it is), and at `bytes` of line text: a line or row
/// that would pass the budget is left out, but a page always has at least one. A first row whose
/// text alone passes the budget is cut there and sent as the partial row it is (its newest
/// deltas; the older ones are the next page's), so history stays pageable whatever a row's
/// length. With `bytes` and no `limit`, only the budget and `after` bound the page.
///
/// Nothing past the page is read: the walk stops at the `limit`-th event, and a line that
/// cannot fit the budget is not read to its end.
pub fn window(path: &Path, query: &TranscriptQuery) -> io::Result<Vec<Line>> {
    Ok(window_and_file(path, query)?.0)
}

/// [`window`], and the id of the file it was read from (the answer's
/// `scrollback_protocol::FILE_HEADER`), read from the same open file.
pub fn window_and_file(
    path: &Path,
    query: &TranscriptQuery,
) -> io::Result<(Vec<Line>, Option<String>)> {
    let Opened { mut file, end } = open(path)?;
    let id = reader::file_id(&mut file, end)?;
    Ok((window_in(path, &mut file, end, query)?, id))
}

/// [`window`] over an open file whose complete lines end at `end`.
pub fn window_in<F: Read + Seek>(
    path: &Path,
    file: &mut F,
    end: u64,
    query: &TranscriptQuery,
) -> io::Result<Vec<Line>> {
    let start = match query.before {
        Some(before) => reader::offset_of_seq(path, file, end, before)?,
        None => end,
    };
    let mut page = Page::new(query.coalesced(), query.most(), query.bytes);
    // Down to `after`, a long line's seq is read from its head before the line is: the one at
    // or below `after` that ends the page is not read whole (a page after a line of 300 MB
    // read it, and parsed it, to stop there).
    let mut lines = match query.after {
        Some(_) => BackLines::bounded(file, 0, start, reader::HEAD_BYTES),
        None => BackLines::new(file, start),
    };
    while let Some(found) = lines.next_found_within(page.room())? {
        let offset = found.offset;
        let bytes = match found.skipped {
            0 => found.bytes,
            _ => match Line::seq_of_head(&found.bytes) {
                Some(seq) if query.after.is_some_and(|a| seq <= a) => break,
                Some(seq) if query.before.is_some_and(|b| seq >= b) => continue,
                // In the page: read whole.
                _ => match reader::line_at(lines.file_mut(), offset, end)? {
                    Some((bytes, _)) => bytes,
                    None => continue,
                },
            },
        };
        let Some(line) = reader::parse(path, offset, &bytes) else {
            continue;
        };
        if query.before.is_some_and(|b| line.seq() >= b) {
            continue;
        }
        if query.after.is_some_and(|a| line.seq() <= a) || !page.offer(line) {
            break;
        }
    }
    Ok(page.finish())
}

/// A page being filled newest-first, in lines or in rows, within a byte budget.
struct Page {
    walk: Option<RowWalk>,
    limit: usize,
    budget: Option<usize>,
    used: usize,
    /// Accepted lines or rows, newest first.
    rows: Vec<Line>,
    /// The row being gathered (coalesced pages), newest line first.
    run: Vec<Line>,
    /// The bytes of text in `run`, and of its lines.
    run_text: usize,
    run_bytes: usize,
}

/// The most bytes of lines a coalesced page gathers for one row, budget or not: a row longer
/// (a reply of millions of deltas) is cut there and sent as the partial row it is, as a row
/// past the budget is, so a page holds a bounded part of any row (a page with no budget held
/// every line of the row: 585 MB for a 181 MB run of deltas).
pub const RUN_BYTES: usize = 4 << 20;

impl Page {
    fn new(coalesced: bool, limit: usize, budget: Option<usize>) -> Page {
        Page {
            walk: coalesced.then(|| RowWalk::new(limit)),
            limit,
            budget,
            used: 0,
            rows: Vec::new(),
            run: Vec::new(),
            run_text: 0,
            run_bytes: 0,
        }
    }

    /// The longest line the page could still take (`None`: any). A plain page that holds a
    /// line takes none longer than the budget left; a coalesced one decides by rows, so reads
    /// the next line whole.
    fn room(&self) -> Option<usize> {
        match (self.budget, &self.walk) {
            (Some(budget), None) if !self.rows.is_empty() => Some(budget.saturating_sub(self.used)),
            _ => None,
        }
    }

    /// Offers the next older line; `false` when the page is complete (with or without it).
    fn offer(&mut self, line: Line) -> bool {
        let Some(walk) = &mut self.walk else {
            return self.accept(line) && self.rows.len() < self.limit;
        };
        let rows = walk.rows();
        if !walk.take(&line) {
            return false;
        }
        // A line that starts an older row completes the row gathered so far.
        if walk.rows() > rows && !self.run.is_empty() && !self.close_run() {
            return false;
        }
        let text = line.text().map_or(0, str::len);
        let bytes = line.raw().len();
        let over_budget = self.budget.is_some_and(|b| self.run_text + text > b);
        if !self.run.is_empty() && (over_budget || self.run_bytes + bytes > RUN_BYTES) {
            // This row's text alone passes the budget (or its lines [`RUN_BYTES`]): a first row
            // is cut here and sent as a partial row; a later one is left out whole (it would
            // not fit).
            if self.rows.is_empty() {
                self.close_run();
            }
            self.run.clear();
            return false;
        }
        self.run_text += text;
        self.run_bytes += bytes;
        self.run.push(line);
        true
    }

    fn close_run(&mut self) -> bool {
        let mut run = std::mem::take(&mut self.run);
        self.run_text = 0;
        self.run_bytes = 0;
        run.reverse();
        let mut rows = coalesce(&run);
        rows.reverse();
        rows.into_iter().all(|row| self.accept(row))
    }

    fn accept(&mut self, row: Line) -> bool {
        let size = row.raw().len();
        if let Some(budget) = self.budget {
            if !self.rows.is_empty() && self.used + size > budget {
                return false;
            }
        }
        self.used += size;
        self.rows.push(row);
        true
    }

    fn finish(mut self) -> Vec<Line> {
        if !self.run.is_empty() {
            self.close_run();
        }
        self.rows.reverse();
        self.rows
    }
}

/// What `/events?after=N` sends before following the file, and what a stream sends when it
/// starts over.
#[derive(Debug, Clone, PartialEq)]
pub enum CatchUp {
    /// Every line above `after`, oldest first.
    Lines(Vec<Line>),
    /// A reset frame saying why, then these: the newest window.
    Reset(Reason, Vec<Line>),
}

/// Why a stream starts over from the newest window: a reset frame's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Lines the client does not hold would be skipped: what it holds stays, with a gap.
    Behind,
    /// The file was replaced: nothing the client holds is this file's.
    Replaced,
    /// The client holds lines past the newest (a shorter file replaced the one it read).
    Ahead,
}

impl Reason {
    /// The name a reset frame gives.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Behind => "behind",
            Reason::Replaced => "replaced",
            Reason::Ahead => "ahead",
        }
    }
}

/// The catch-up and where following the file goes on from.
#[derive(Debug, Clone)]
pub struct Tail {
    /// What to send first.
    pub catch_up: CatchUp,
    /// The end of the complete lines read (follow from here).
    pub end: u64,
    /// The file that was read.
    pub file: FileId,
}

/// The seq of the newest readable line (0 when there is none), holding at most about
/// [`SUMMARY_LINE_BYTES`] of a line that opens with its seq, as every line the server writes
/// does: a longer one (a tool output of 100 MB) is scanned for its start, and its seq read
/// from its head ([`Line::seq_of_head`]). A post after such a line held it whole, with its
/// parse, outside every bound (six at once held 1.1 GB). A long line with another key first
/// (written by another process: a `PUT` refuses one) is read whole, as every line was before.
pub fn newest_seq(path: &Path) -> io::Result<u64> {
    let Opened { mut file, end } = open(path)?;
    let mut lines = BackLines::bounded(&mut file, 0, end, SUMMARY_LINE_BYTES);
    let whole_from = loop {
        let Some(found) = lines.next_found()? else {
            return Ok(0);
        };
        let seq = match found.skipped {
            0 => reader::parse(path, found.offset, &found.bytes).map(|l| l.seq()),
            _ => match Line::seq_of_head(&found.bytes) {
                None => break found.end(),
                seq => seq,
            },
        };
        if let Some(seq) = seq {
            return Ok(seq);
        }
    };
    let mut newest = 0;
    for_each_back(path, &mut file, whole_from, |line| {
        newest = line.seq();
        false
    })?;
    Ok(newest)
}

/// Now, in seconds since the epoch, with all the precision the clock gives.
pub fn now_ts() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Appends `event` as the next line (newest seq + 1, `ts` now) to an existing transcript and
/// returns it. The caller serializes writers of one session.
pub fn append(path: &Path, event: Map<String, Value>) -> io::Result<Line> {
    let seq = newest_seq(path)? + 1;
    let line = Line::new(seq, now_ts(), event)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut file = OpenOptions::new().append(true).open(path)?;
    let mut text = String::with_capacity(line.raw().len() + 1);
    text.push_str(line.raw());
    text.push('\n');
    file.write_all(text.as_bytes())?;
    Ok(line)
}
