//! Reading a chunk's lines backwards, in blocks, never whole; and finding where a seq starts.
//!
//! Every question the cache is asked is about the newest end of a run, and a live run grows to
//! the size of the conversation, so a chunk is read from its end one block at a time. Damage is
//! noticed when a read reaches it: a line that does not parse, a seq outside the chunk's
//! coverage or out of order, a newest line short of a closed chunk's end. (A chunk may start
//! above its first seq: the server holds nothing below it there, `SessionCache::none_between`.)

use super::coverage::{Chunk, Kind};
use crate::protocol::{last_seq, BackWalk, ForwardWalk, Line, Probed, Seek, SeqSeek, Step};
use crate::store::{Store, StoreError};

/// Bytes read from a chunk at a time when walking backwards.
pub use crate::protocol::BLOCK;
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

/// What the chunk readers need of a store: ranged reads. Every [`Store`] is one; the session
/// cache adds its read-ahead of the newest chunk's tail in front of its store.
#[allow(async_fn_in_trait)]
pub trait ReadAt {
    /// Up to `len` bytes of blob `path` from `offset` ([`Store::read`]).
    async fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, StoreError>;

    /// [`ReadAt::read_at`] for a backward walk, whose next read is just below this one: a
    /// reader may read more below and keep it.
    async fn read_back(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, StoreError> {
        self.read_at(path, offset, len).await
    }
}

impl<S: Store> ReadAt for S {
    async fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, StoreError> {
        self.read(path, offset, len).await
    }
}

/// Reads `len` bytes at `offset` (for a backward walk when `back`), failing when fewer come
/// back (the blob shrank under us).
async fn read_exact<S: ReadAt>(
    store: &S,
    path: &str,
    offset: u64,
    len: usize,
    back: bool,
) -> Result<Vec<u8>, Fail> {
    let bytes = match back {
        true => store.read_back(path, offset, len).await?,
        false => store.read_at(path, offset, len).await?,
    };
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

/// A chunk's lines, newest first, from a line boundary down to its start: the protocol's
/// [`BackWalk`] driven by the store, with the cache's policy (anything unexpected is damage).
#[derive(Debug)]
pub struct BackLines {
    path: String,
    chunk: Chunk,
    walk: BackWalk,
    /// The seq of the line returned last, to check the order.
    newer: Option<u64>,
    /// Whether the walk starts at a closed chunk's end, so that its first line must reach the
    /// chunk's `end` (a chunk that lost whole lines at its end still ends in a newline). The open
    /// chunk's end is learned from its last line.
    from_end: bool,
}

impl BackLines {
    /// Reads `chunk` (stored at `path`) backwards from byte `end`, which must be a line boundary.
    pub fn new(path: String, chunk: Chunk, end: u64) -> Self {
        BackLines {
            path,
            walk: BackWalk::new(0, end).with_blocks(BLOCK, BLOCK),
            newer: None,
            from_end: end == chunk.len && chunk.kind != Kind::Open,
            chunk,
        }
    }

    /// The chunk being read.
    pub fn chunk(&self) -> &Chunk {
        &self.chunk
    }

    /// The next older line and the byte offset where it starts; `None` past the chunk's start.
    pub async fn prev<S: ReadAt>(&mut self, store: &S) -> Result<Option<(Line, u64)>, Fail> {
        let found = loop {
            match self.walk.step() {
                Step::Line(found) => break found,
                Step::Read { at, len } => self
                    .walk
                    .feed(read_exact(store, &self.path, at, len, true).await?),
                Step::Done => return Ok(None),
            }
        };
        if !found.newline {
            return Err(Fail::Damaged(format!(
                "{}: no newline at the end",
                self.path
            )));
        }
        let line = parse(&found.bytes, &self.chunk, &self.path)?;
        if self.newer.is_some_and(|newer| line.seq() >= newer) {
            return Err(Fail::Damaged(format!(
                "{}: seq {} out of order",
                self.path,
                line.seq()
            )));
        }
        if self.newer.is_none() && self.from_end && last_seq(&line) + 1 != self.chunk.end {
            return Err(Fail::Damaged(format!(
                "{}: ends at seq {}, short of its end",
                self.path,
                last_seq(&line)
            )));
        }
        self.newer = Some(line.seq());
        Ok(Some((line, found.offset)))
    }
}

/// The first line starting in `[from, until)`: its start, seq and end (just past its `\n`).
async fn line_after<S: ReadAt>(
    store: &S,
    path: &str,
    chunk: &Chunk,
    from: u64,
    until: u64,
) -> Result<Probed, Fail> {
    let mut walk = ForwardWalk::new(from, until).with_block(PROBE);
    loop {
        match walk.step() {
            Step::Read { at, len } => walk.feed(&read_exact(store, path, at, len, false).await?),
            Step::Line(found) if found.newline => {
                let line = parse(&found.bytes, chunk, path)?;
                return Ok(Probed {
                    first: found.offset,
                    line: Some((found.offset, line.seq(), found.end())),
                });
            }
            // No line ends before `until` (cannot happen in a whole chunk), or none starts.
            Step::Line(_) | Step::Done => {
                return Ok(Probed {
                    first: until,
                    line: None,
                })
            }
        }
    }
}

/// A line boundary at or below which every line of `chunk` has a seq below `before`, and close
/// above the last such line (within a block, or one long line): where a backwards read for the
/// lines before `before` starts. The protocol's [`SeqSeek`], O(log size) small reads.
pub async fn seek<S: ReadAt>(
    store: &S,
    path: &str,
    chunk: &Chunk,
    before: u64,
) -> Result<u64, Fail> {
    if before >= chunk.end {
        return Ok(chunk.len);
    }
    let mut seek = SeqSeek::new(0, chunk.len, before);
    loop {
        match seek.step() {
            Seek::Done(at) => return Ok(at),
            Seek::Probe { from, until } => {
                seek.answer(line_after(store, path, chunk, from, until).await?)
            }
        }
    }
}
