//! Reading a chunk's lines backwards, in blocks, never whole; and finding where a seq starts.
//!
//! Every question the cache is asked is about the newest end of a run, and a live run grows to
//! the size of the conversation, so a chunk is read from its end one block at a time. Damage is
//! noticed when a read reaches it: a line that does not parse, a seq outside the chunk's
//! coverage or out of order, an oldest line that is not the chunk's first.

use super::coverage::Chunk;
use crate::protocol::Line;
use crate::store::{Store, StoreError};

/// Bytes read from a chunk at a time when walking backwards.
pub const BLOCK: usize = 64 * 1024;
/// Bytes read at a time when probing for a line during a seek.
const PROBE: usize = 4 * 1024;

/// Why a read could not answer.
#[derive(Debug)]
pub enum Fail {
    /// The chunk holds something this code did not write: the session must be purged.
    Damaged(String),
    /// The store failed (or the blob changed under the reader): answer as if empty.
    Store(StoreError),
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

/// Reads `len` bytes at `offset`, failing when fewer come back (the blob shrank under us).
async fn read_exact<S: Store>(
    store: &S,
    path: &str,
    offset: u64,
    len: usize,
) -> Result<Vec<u8>, Fail> {
    let bytes = store.read(path, offset, len).await?;
    if bytes.len() != len {
        return Err(Fail::Store(StoreError::Io(format!(
            "{path} changed while being read"
        ))));
    }
    Ok(bytes)
}

/// Parses one line's bytes (without its `\n`) and checks it lies in the chunk.
fn parse(bytes: &[u8], chunk: &Chunk, path: &str) -> Result<Line, Fail> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| Fail::Damaged(format!("{path}: not UTF-8")))?;
    let line = Line::parse(text).map_err(|e| Fail::Damaged(format!("{path}: {e}")))?;
    if !chunk.covers(line.seq()) {
        return Err(Fail::Damaged(format!(
            "{path}: seq {} outside the chunk",
            line.seq()
        )));
    }
    Ok(line)
}

/// A chunk's lines, newest first, from a line boundary down to its start.
#[derive(Debug)]
pub struct BackLines {
    path: String,
    chunk: Chunk,
    /// Bytes below `pos` are not read yet.
    pos: u64,
    /// The bytes `[pos, pos + buf.len())`: whole lines, except the first may be partial.
    buf: Vec<u8>,
    /// The seq of the line returned last, to check the order.
    newer: Option<u64>,
}

impl BackLines {
    /// Reads `chunk` (stored at `path`) backwards from byte `end`, which must be a line boundary.
    pub fn new(path: String, chunk: Chunk, end: u64) -> Self {
        BackLines {
            path,
            chunk,
            pos: end,
            buf: Vec::new(),
            newer: None,
        }
    }

    /// The chunk being read.
    pub fn chunk(&self) -> &Chunk {
        &self.chunk
    }

    /// The next older line and the byte offset where it starts; `None` past the chunk's start.
    pub async fn prev<S: Store>(&mut self, store: &S) -> Result<Option<(Line, u64)>, Fail> {
        loop {
            if self.buf.is_empty() {
                if self.pos == 0 {
                    return Ok(None);
                }
                self.fill(store).await?;
                if self.buf.last() != Some(&b'\n') {
                    return Err(Fail::Damaged(format!(
                        "{}: no newline at the end",
                        self.path
                    )));
                }
                continue;
            }
            let body = &self.buf[..self.buf.len() - 1];
            let start = match body.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None if self.pos == 0 => 0,
                None => {
                    self.fill(store).await?;
                    continue;
                }
            };
            let offset = self.pos + start as u64;
            let line = parse(
                &self.buf[start..self.buf.len() - 1],
                &self.chunk,
                &self.path,
            )?;
            self.buf.truncate(start);
            if self.newer.is_some_and(|newer| line.seq() >= newer) {
                return Err(Fail::Damaged(format!(
                    "{}: seq {} out of order",
                    self.path,
                    line.seq()
                )));
            }
            if offset == 0 && line.seq() != self.chunk.first {
                return Err(Fail::Damaged(format!(
                    "{}: does not start at its first seq",
                    self.path
                )));
            }
            self.newer = Some(line.seq());
            return Ok(Some((line, offset)));
        }
    }

    /// Prepends the block before `pos` to the buffer.
    async fn fill<S: Store>(&mut self, store: &S) -> Result<(), Fail> {
        let n = (self.pos as usize).min(BLOCK);
        let from = self.pos - n as u64;
        let mut block = read_exact(store, &self.path, from, n).await?;
        block.extend_from_slice(&self.buf);
        self.buf = block;
        self.pos = from;
        Ok(())
    }
}

/// The first line starting at or after byte `from` and before `limit`, with its start and end
/// offsets (the end just past its `\n`); `None` when no line starts there.
async fn line_after<S: Store>(
    store: &S,
    path: &str,
    chunk: &Chunk,
    from: u64,
    limit: u64,
) -> Result<Option<(Line, u64, u64)>, Fail> {
    // A line starts at `from` when the byte before it is a newline: read from `from - 1`.
    let base = from.saturating_sub(1);
    let mut bytes: Vec<u8> = Vec::new();
    let mut start: Option<usize> = (from == 0).then_some(0);
    loop {
        let at = base + bytes.len() as u64;
        let want = PROBE.min((chunk.len - at) as usize);
        if want == 0 {
            return Ok(None); // no complete line after `from` (cannot happen in a whole chunk)
        }
        bytes.extend(read_exact(store, path, at, want).await?);
        if start.is_none() {
            start = bytes.iter().position(|&b| b == b'\n').map(|i| i + 1);
            if start.is_none() {
                continue;
            }
        }
        let s = start.expect("set above");
        if base + s as u64 >= limit {
            return Ok(None);
        }
        if let Some(e) = bytes[s..].iter().position(|&b| b == b'\n') {
            let line = parse(&bytes[s..s + e], chunk, path)?;
            return Ok(Some((line, base + s as u64, base + (s + e + 1) as u64)));
        }
    }
}

/// A line boundary at or below which every line of `chunk` has a seq below `before`, and close
/// above the last such line (within a block, or one long line): where a backwards read for the
/// lines before `before` starts. A binary search over byte offsets, O(log size) small reads.
pub async fn seek<S: Store>(
    store: &S,
    path: &str,
    chunk: &Chunk,
    before: u64,
) -> Result<u64, Fail> {
    if before >= chunk.end {
        return Ok(chunk.len);
    }
    // `lo` and `hi` are line boundaries: lines ending at or below `lo` have seqs below
    // `before`; lines starting at or above `hi` have seqs at or above it.
    let (mut lo, mut hi) = (0u64, chunk.len);
    while hi - lo > BLOCK as u64 {
        let mid = lo + (hi - lo) / 2;
        match line_after(store, path, chunk, mid, hi).await? {
            None => break, // one long line spans the rest: few lines to walk
            Some((line, start, end)) => {
                if line.seq() < before {
                    lo = end;
                } else {
                    hi = start;
                }
            }
        }
    }
    Ok(hi)
}
