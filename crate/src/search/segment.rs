//! A session's index in a built form a query reads lazily: `search.idx` beside the blob.
//!
//! The blob (`search.jsonl`) stays the truth; the segment is derived from its first `covered`
//! bytes ([`build`], in idle time, under the session's writer role) so that a worker that just
//! started answers its first query by reading a few kilobytes per session (the header, one
//! dictionary block and the postings of each word) instead of parsing and tokenizing every
//! blob. What the blob gained since is loaded from its JSON lines, as before.
//!
//! # Layout (little-endian)
//!
//! - a fixed header of 64 bytes: magic, `covered`, the words counted, where the
//!   dictionary and the postings start, the whole size, the documents and the blocks counted,
//!   the lengths of `head` and `edge` (the bytes just before `covered`: a segment whose blob
//!   was rebuilt or cut under it is not used) and of the document column, and the documents
//!   with words;
//! - `head` (empty: segments built before held the blob's first bytes there, which a read
//!   skips), `edge`;
//! - the document column: per document, its length in words, its seq, its timestamp and its
//!   line's length in the blob (varints; seqs and timestamps as deltas from the document
//!   before, from zero at each run of 32 documents, a timestamp that is not whole
//!   milliseconds as an f64 after its varint): all that ranking needs, and where each line
//!   sits (the lines are in order), read with the header and decoded per document as a query
//!   asks for it;
//! - the skip table: per run of 32 documents, where it starts in the column (u32) and
//!   where its first line starts in the blob (u64);
//! - the block index: each dictionary block's first term, its length and where its first
//!   term's postings start;
//! - the dictionary: blocks of 64 terms in sorted order, front-coded (each term as the bytes
//!   it shares with the one before it in its block and the rest), each with the length of its
//!   postings (the postings are in the same order, one after another, so a term's start is
//!   its block's plus the lengths before it, and a prefix's postings are one read);
//! - the postings: per document holding the term, its id (a delta), the term's frequency and
//!   the signature of the words that follow it there (one byte: a phrase's candidates are
//!   narrowed before their texts are read).
//!
//! Every line of the blob has its document (a piece that a welded document after it replaces
//! is an empty one, [`Doc::welds`]; a blob with a line that does not read gets no segment: its
//! index is rebuilt from the chunks). A query
//! reads the header once per worker (with the dictionary, for most sessions), then per word
//! one dictionary block (unless read with the header) and one run of postings per session,
//! and per hit shown its line in the blob (its snippet, kept by the reader for the queries
//! after); a warmed-up worker holds the whole
//! segment (`Segment::hold`).
//!
//! A segment that does not read (a torn write, a wrong magic, a range past its end) is not used:
//! a query that meets it removes it and asks the blob instead, and the next build replaces it
//! ([`stale`]). It is written under another name and renamed into place.

use super::doc::Doc;
use super::pack::Pack;
use super::postings::{merge_by_doc, Indexed, Posting};
use super::writer::INDEX;
use crate::store::{Store, StoreResult};
use std::borrow::Cow;
use std::sync::Arc;

/// The segment's name in a session's folder.
pub const SEGMENT: &str = "search.idx";
/// The name it is written under before being renamed into place.
pub const SEGMENT_NEW: &str = "search.idx.new";

/// `SBIB`: `ς` folded to `σ`, and the mark of a lowercased `İ` dropped (`SBIA` kept both in its
/// words). An older segment does not read, so it is removed and built again (a server's pack
/// too: its segment is one): `SBIA` was the first with the document column in runs of [`SKIP`]
/// with a skip table, decoded as a query asks (a worker's first query decoded every document of
/// the server's pack first, 11-13 ms of its time on a slower machine); `SBI9` decoded its whole
/// column with the header; `SBI8` cut an assistant message where a delta repeated or overlapped the one before it (the
/// wire's row rule; one document now however they overlap, [`crate::protocol::continues`]);
/// `SBI7` kept decomposed Hangul's jamo a word each and `ß` unfolded, as `SBI6` did half-width
/// katakana and kana's sound marks written apart (now composed: `tokens::voiced`), `SBI5` kept
/// Arabic and Hebrew vowel marks in its words, `SBI4` held a run of Thai, Lao, Khmer or Myanmar
/// as one word, as `SBI3` did Chinese, Japanese and Korean characters and emoji; `SBI2` wrote
/// each term whole with its postings' start (about twice the bytes; `SBI3` front-codes the
/// dictionary).
const MAGIC: &[u8; 4] = b"SBIB";
/// Documents per run of the column: a document is found by decoding at most this many.
const SKIP: usize = 32;
/// A skip table entry's bytes: where the run starts in the column (u32), and its first line
/// in the blob (u64).
const SKIP_ENTRY: usize = 12;
/// The fixed header's size.
const FIXED: usize = 64;
/// Terms per dictionary block.
const BLOCK: usize = 64;
/// The blob bytes recorded before `covered`.
const EDGE: usize = 64;
/// The blob bytes past a segment (or in a blob without one) worth a build: below this, the
/// JSON lines load in a moment.
pub const MIN_TAIL: u64 = 16 * 1024;

/// One document holding a term, with what ranking needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Post {
    /// The document's id in its session (segment documents first, then the blob's tail).
    pub doc: u32,
    /// The term's frequency in it.
    pub tf: u32,
    /// Its length in words.
    pub len: u32,
    /// Its row's seq.
    pub seq: u64,
    /// Its row's timestamp.
    pub ts: f64,
    /// The signature of the words that follow the term in it ([`Posting::next`]).
    pub next: u8,
}

/// What the document column holds of one document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Meta {
    /// Its length in words.
    pub len: u32,
    pub seq: u64,
    pub ts: f64,
    /// Its line in the blob: where it starts, and its bytes (the newline after it left out).
    pub at: u64,
    pub bytes: u32,
}

/// A segment's document column as written, with its skip table: a document is decoded when a
/// query asks for it (from the start of its run), the whole column only when a query asks for
/// a large share of it (once: kept), so that a worker's first query does not decode the
/// 200,000 documents of a server's pack to rank a rare word's hundred.
pub(super) struct Column {
    bytes: Vec<u8>,
    skips: Vec<u8>,
    docs: u32,
    /// The blob bytes its lines span (a line past them does not read).
    covered: u64,
    /// Every document, decoded at the first ask for most of them; `None`: it does not read.
    all: std::sync::OnceLock<Option<Vec<Meta>>>,
}

impl std::fmt::Debug for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Column({} documents)", self.docs)
    }
}

impl Column {
    /// The column of `docs` documents from its bytes and its skip table's (`None`: their
    /// sizes do not fit).
    fn new(bytes: Vec<u8>, skips: Vec<u8>, docs: u32, covered: u64) -> Option<Column> {
        let runs = (docs as usize).div_ceil(SKIP);
        let column = Column {
            bytes,
            skips,
            docs,
            covered,
            all: Default::default(),
        };
        let first = column.run(0);
        let fits = column.skips.len() == runs * SKIP_ENTRY
            && (docs == 0 || first == Some((0, 0)))
            && (0..runs).all(|r| column.run(r).is_some());
        fits.then_some(column)
    }

    /// Where run `r` starts in the column's bytes, and its first line in the blob.
    fn run(&self, r: usize) -> Option<(usize, u64)> {
        let e = self.skips.get(r * SKIP_ENTRY..(r + 1) * SKIP_ENTRY)?;
        let at = usize::try_from(u32::from_le_bytes(e[..4].try_into().ok()?)).ok()?;
        let line = u64::from_le_bytes(e[4..].try_into().ok()?);
        (at <= self.bytes.len() && line <= self.covered).then_some((at, line))
    }

    /// Document `doc` (`None`: there is none, or it does not read).
    pub(super) fn get(&self, doc: u32) -> Option<Meta> {
        match self.all.get() {
            Some(all) => all.as_ref()?.get(doc as usize).copied(),
            None => self.reader().get(doc),
        }
    }

    /// The documents `ids` (ascending), or `None` if one does not read: from the whole column
    /// when it is decoded (the worker's warm-up does) or they are more than one in [`SKIP`]
    /// of it (then decoded once), else decoded from their runs.
    fn many(&self, ids: impl ExactSizeIterator<Item = u32>) -> Option<Vec<Meta>> {
        let decoded = self.all.get().is_some();
        if decoded || ids.len().saturating_mul(SKIP) >= self.docs as usize {
            let all = self.all()?;
            return ids.map(|d| all.get(d as usize).copied()).collect();
        }
        let mut reader = self.reader();
        ids.map(|d| reader.get(d)).collect()
    }

    /// Every document (`None`: one does not read), decoded once.
    pub(super) fn all(&self) -> Option<&[Meta]> {
        let all = self.all.get_or_init(|| {
            let mut reader = self.reader();
            let all: Option<Vec<Meta>> = (0..self.docs).map(|d| reader.get(d)).collect();
            // The last run ends where the column does.
            all.filter(|_| reader.c.done() || self.docs == 0)
        });
        all.as_deref()
    }

    fn reader(&self) -> ColumnReader<'_> {
        ColumnReader {
            column: self,
            c: Cursor::new(&[]),
            next: 0,
            seq: 0,
            ms: 0,
            at: 0,
        }
    }
}

/// Decodes a [`Column`]'s documents, forward within a run, from a run's start otherwise.
struct ColumnReader<'a> {
    column: &'a Column,
    c: Cursor<'a>,
    /// The document the cursor is at, and the values the next is decoded from.
    next: u32,
    seq: i64,
    ms: i64,
    at: u64,
}

impl ColumnReader<'_> {
    fn get(&mut self, doc: u32) -> Option<Meta> {
        if doc >= self.column.docs {
            return None;
        }
        let run = doc as usize / SKIP;
        let next = self.next as usize;
        if doc < self.next || next / SKIP != run || next % SKIP == 0 {
            let (start, at) = self.column.run(run)?;
            let end = match self.column.run(run + 1) {
                Some((end, _)) => end,
                None => self.column.bytes.len(),
            };
            self.c = Cursor::new(self.column.bytes.get(start..end)?);
            (self.next, self.seq, self.ms, self.at) = ((run * SKIP) as u32, 0, 0, at);
        }
        loop {
            let c = &mut self.c;
            let len = u32::try_from(c.varint()?).ok()?;
            self.seq = self.seq.checked_add(unzigzag(c.varint()?))?;
            let ts = c.ts(&mut self.ms)?;
            let bytes = u32::try_from(c.varint()?).ok()?;
            let meta = Meta {
                len,
                seq: u64::try_from(self.seq).ok()?,
                ts,
                at: self.at,
                bytes,
            };
            self.at = self.at.checked_add(u64::from(bytes) + 1)?;
            if self.at > self.column.covered {
                return None;
            }
            self.next += 1;
            if self.next > doc {
                return Some(meta);
            }
        }
    }
}

/// One block of the dictionary, as the block index says.
#[derive(Debug, Clone)]
struct Block {
    /// Its first term.
    first: String,
    /// Its bytes in the segment.
    start: u64,
    end: u64,
    /// Where its first term's postings start, from the postings' start.
    post: u64,
}

/// A segment's header, as read: its documents' column and where the rest is.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    /// The blob bytes it was built from.
    pub covered: u64,
    /// Its documents.
    pub docs: u32,
    /// Those with words (what ranking counts: a line that did not read, or a piece a welded
    /// document replaced, is an empty one).
    pub worded: u32,
    /// Their words.
    pub words: u64,
    /// The blob's bytes just before `covered`.
    pub edge: Vec<u8>,
    /// The document column, shared by a pack's parts (each reads its `span` of it, its lines'
    /// `at` less `at_base`, where the session's blob starts in the pack's).
    column: Arc<Column>,
    span: std::ops::Range<usize>,
    at_base: u64,
    /// The dictionary's blocks.
    blocks: Vec<Block>,
    post_at: u64,
    size: u64,
    /// The whole segment, once read into memory ([`Segment::hold`]): queries then read
    /// nothing from the store but the lines of the hits they show (once: the reader keeps
    /// them).
    body: Option<Vec<u8>>,
    /// Its first bytes, as read with the header (the dictionary, often).
    first: Vec<u8>,
    /// Where it starts in its file (a [`Pack`]'s starts after the pack's table).
    origin: u64,
    /// A session's part of its server's [`Pack`] (the pack, and where the session's documents
    /// start in it), rather than a file of its own: its column is the session's (each `at` in
    /// the session's blob), its postings the pack's, cut to the session's documents.
    pack: Option<(Arc<Pack>, u32)>,
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes a timestamp as a delta of whole milliseconds from `prev` (and the f64 itself when
/// it is not whole milliseconds); answers the milliseconds to take the next delta from.
fn put_ts(out: &mut Vec<u8>, ts: f64, prev: i64) -> i64 {
    let ms = (ts * 1000.0).round();
    let exact = ms.abs() < 2f64.powi(53) && ms / 1000.0 == ts;
    let ms = if exact { ms as i64 } else { prev };
    put_varint(out, zigzag(ms - prev) << 1 | u64::from(!exact));
    if !exact {
        out.extend_from_slice(&ts.to_le_bytes());
    }
    ms
}

/// A cursor over bytes; every read answers `None` past the end.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, at: 0 }
    }
    pub(super) fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(out)
    }
    pub(super) fn varint(&mut self) -> Option<u64> {
        // Over the bytes left at once (a document column holds five per document, read in
        // one pass by a worker's first query: a bounds check per byte showed).
        let rest = self.bytes.get(self.at..)?;
        let mut v = 0u64;
        for (i, &b) in rest.iter().take(10).enumerate() {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.at += i + 1;
                return Some(v);
            }
        }
        None
    }
    /// A timestamp written by [`put_ts`]; `prev` becomes its milliseconds.
    fn ts(&mut self, prev: &mut i64) -> Option<f64> {
        let t = self.varint()?;
        *prev = prev.checked_add(unzigzag(t >> 1))?;
        match t & 1 {
            0 => Some(*prev as f64 / 1000.0),
            _ => Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?)),
        }
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    pub(super) fn str(&mut self) -> Option<&'a str> {
        let n = usize::try_from(self.varint()?).ok()?;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

/// Encodes the segment of `docs` (each with its line's length in the blob, the lines in
/// order from the blob's start, each followed by a newline), built from the blob's first
/// `covered` bytes (`edge`: those before `covered`; `head`: nothing now, the blob's first
/// bytes in segments built before, which a read skips).
fn encode(docs: Vec<(Doc, u32)>, covered: u64, head: &[u8], edge: &[u8]) -> Vec<u8> {
    let mut index = Indexed::default();
    let mut lines = Vec::with_capacity(docs.len());
    for (doc, bytes) in docs {
        lines.push(bytes);
        index.add(doc);
    }
    index.prepare();
    let column: Vec<Meta> = (index.docs.iter().zip(lines))
        .map(|((doc, len), bytes)| Meta {
            len: *len,
            seq: doc.seq,
            ts: doc.ts,
            at: 0,
            bytes,
        })
        .collect();
    let mut terms = (index.sorted_terms()).map(|(t, l)| (Cow::Borrowed(t), Cow::Borrowed(l)));
    assemble(&column, &mut terms, index.words, covered, head, edge)
}

/// Writes a segment: its documents' `column` (their `at` is implied: the lines follow one
/// another), every term in sorted order with its postings (documents ascending), the words
/// counted, and what it was built from (see [`encode`]).
fn assemble<'t>(
    column: &[Meta],
    terms: &mut dyn Iterator<Item = (Cow<'t, str>, Cow<'t, [Posting]>)>,
    words: u64,
    covered: u64,
    head: &[u8],
    edge: &[u8],
) -> Vec<u8> {
    let mut out = Assembler::default();
    for (term, list) in terms {
        out.push(&term, &list);
    }
    out.finish(column, words, covered, head, edge)
}

/// A segment being written, a term at a time ([`Assembler::push`], in sorted order, then
/// [`Assembler::finish`]): a session's segment is written from its blob ([`encode`]); a
/// server's [`pack`](super::pack) from its sessions' segments, a few terms between two turns of
/// the worker's event loop.
#[derive(Default)]
pub(super) struct Assembler {
    post: Vec<u8>,
    dict: Vec<u8>,
    /// Each block's first term, where it starts in the dictionary, and where its first term's
    /// postings start.
    blocks: Vec<(String, u64, u64)>,
    /// The term before, and the terms pushed.
    prev: Vec<u8>,
    terms: usize,
}

impl Assembler {
    /// Adds `term` (after every term pushed before it) with its postings.
    pub(super) fn push(&mut self, term: &str, list: &[Posting]) {
        if self.terms % BLOCK == 0 {
            if let Some((_, len, _)) = self.blocks.last_mut() {
                *len = self.dict.len() as u64 - *len;
            }
            let at = (self.dict.len() as u64, self.post.len() as u64);
            self.blocks.push((term.to_string(), at.0, at.1));
            self.prev.clear();
        }
        self.terms += 1;
        let start = self.post.len();
        let mut last = 0;
        for p in list {
            put_varint(&mut self.post, u64::from(p.doc - last));
            put_varint(&mut self.post, u64::from(p.tf));
            self.post.push(p.next);
            last = p.doc;
        }
        // Front-coded: the bytes it shares with the term before it in its block, then the rest.
        let shared = (self.prev.iter().zip(term.as_bytes()))
            .take_while(|(a, b)| a == b)
            .count();
        put_varint(&mut self.dict, shared as u64);
        put_varint(&mut self.dict, (term.len() - shared) as u64);
        self.dict.extend_from_slice(&term.as_bytes()[shared..]);
        put_varint(&mut self.dict, (self.post.len() - start) as u64);
        self.prev.clear();
        self.prev.extend_from_slice(term.as_bytes());
    }

    /// The segment: the terms pushed, with the documents' `column`, the words counted, and
    /// what it was built from.
    pub(super) fn finish(
        mut self,
        column: &[Meta],
        words: u64,
        covered: u64,
        head: &[u8],
        edge: &[u8],
    ) -> Vec<u8> {
        if let Some((_, len, _)) = self.blocks.last_mut() {
            *len = self.dict.len() as u64 - *len;
        }
        let (mut col, mut skips) = (Vec::new(), Vec::new());
        let (mut seq, mut ms, mut at) = (0u64, 0i64, 0u64);
        for (i, m) in column.iter().enumerate() {
            if i % SKIP == 0 {
                (seq, ms) = (0, 0);
                skips.extend_from_slice(&(col.len() as u32).to_le_bytes());
                skips.extend_from_slice(&at.to_le_bytes());
            }
            put_varint(&mut col, u64::from(m.len));
            put_varint(&mut col, zigzag(m.seq as i64 - seq as i64));
            ms = put_ts(&mut col, m.ts, ms);
            put_varint(&mut col, u64::from(m.bytes));
            seq = m.seq;
            at += u64::from(m.bytes) + 1;
        }
        let worded = column.iter().filter(|m| m.len > 0).count();
        let mut block_index = Vec::new();
        for (first, len, post_start) in &self.blocks {
            put_varint(&mut block_index, first.len() as u64);
            block_index.extend_from_slice(first.as_bytes());
            put_varint(&mut block_index, *len);
            put_varint(&mut block_index, *post_start);
        }
        let dict_at =
            (FIXED + head.len() + edge.len() + col.len() + skips.len() + block_index.len()) as u64;
        let post_at = dict_at + self.dict.len() as u64;
        let size = post_at + self.post.len() as u64;
        let mut out = Vec::with_capacity(size as usize);
        out.extend_from_slice(MAGIC);
        for v in [covered, words, dict_at, post_at, size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [column.len(), self.blocks.len(), col.len()] {
            out.extend_from_slice(&(v as u32).to_le_bytes());
        }
        out.extend_from_slice(&(head.len() as u16).to_le_bytes());
        out.extend_from_slice(&(edge.len() as u16).to_le_bytes());
        out.extend_from_slice(&(worded as u32).to_le_bytes());
        out.resize(FIXED, 0);
        out.extend_from_slice(head);
        out.extend_from_slice(edge);
        out.extend_from_slice(&col);
        out.extend_from_slice(&skips);
        out.extend_from_slice(&block_index);
        out.extend_from_slice(&self.dict);
        out.extend_from_slice(&self.post);
        out
    }
}

/// The fixed header's fields, in their order.
struct Fixed {
    covered: u64,
    words: u64,
    dict_at: u64,
    post_at: u64,
    size: u64,
    docs: u32,
    blocks: u32,
    column: u32,
    head: u16,
    edge: u16,
    worded: u32,
}

impl Fixed {
    /// The fixed header at the start of `bytes` (`None`: too short, or not a segment's).
    fn read(bytes: &[u8]) -> Option<Fixed> {
        let fixed = bytes.get(..FIXED).filter(|f| f.starts_with(MAGIC))?;
        let mut f = Cursor::new(&fixed[MAGIC.len()..]);
        Some(Fixed {
            covered: f.u64()?,
            words: f.u64()?,
            dict_at: f.u64()?,
            post_at: f.u64()?,
            size: f.u64()?,
            docs: f.u32()?,
            blocks: f.u32()?,
            column: f.u32()?,
            head: f.u16()?,
            edge: f.u16()?,
            worded: f.u32()?,
        })
    }
}

/// Reads a segment's header from its first bytes: `Err(n)` when it needs the first `n`,
/// `Ok(None)` when it does not read.
fn header(bytes: &[u8]) -> Result<Option<Segment>, usize> {
    let Some(Fixed {
        covered,
        words,
        dict_at,
        post_at,
        size,
        docs,
        blocks,
        column,
        head,
        edge,
        worded,
    }) = Fixed::read(bytes)
    else {
        return Ok(None);
    };
    let mut c = Cursor::new(bytes);
    c.at = FIXED;
    let skips = (docs as usize).div_ceil(SKIP) * SKIP_ENTRY;
    let fixed_end =
        (FIXED + usize::from(head) + usize::from(edge) + skips) as u64 + u64::from(column);
    // Every count bounded by the bytes that would hold it (a garbled header allocates nothing).
    let index_len = dict_at.saturating_sub(fixed_end);
    let sane = fixed_end <= dict_at
        && dict_at <= post_at
        && post_at <= size
        && worded <= docs
        && u64::from(docs) * 4 <= u64::from(column)
        && u64::from(blocks) * 3 <= index_len;
    if !sane {
        return Ok(None);
    }
    if (bytes.len() as u64) < dict_at {
        return match usize::try_from(dict_at) {
            Ok(n) => Err(n),
            Err(_) => Ok(None),
        };
    }
    let mut read = || -> Option<Segment> {
        c.take(usize::from(head))?;
        let edge = c.take(usize::from(edge))?.to_vec();
        let col = c.take(column as usize)?.to_vec();
        let column = Column::new(col, c.take(skips)?.to_vec(), docs, covered)?;
        let mut ix = Cursor::new(c.take(usize::try_from(dict_at).ok()? - c.at)?);
        let mut out = Vec::with_capacity(blocks as usize);
        let mut start = dict_at;
        for _ in 0..blocks {
            let first = ix.str()?.to_string();
            let end = start.checked_add(ix.varint()?)?;
            let post = ix.varint()?;
            if end > post_at || post > size - post_at {
                return None;
            }
            out.push(Block {
                first,
                start,
                end,
                post,
            });
            start = end;
        }
        Some(Segment {
            covered,
            docs,
            worded,
            words,
            edge,
            column: Arc::new(column),
            span: 0..docs as usize,
            at_base: 0,
            blocks: out,
            post_at,
            size,
            body: None,
            first: Vec::new(),
            origin: 0,
            pack: None,
        })
    };
    Ok(read())
}

impl Segment {
    /// The segment of the session folder `dir`, if it is there and reads. One whose header
    /// does not read is removed (derived data: the next build makes it again).
    pub async fn open<S: Store>(store: &S, dir: &str) -> Option<Segment> {
        let path = format!("{dir}/{SEGMENT}");
        // The header, the document column, the block index and, as far as the store reads
        // ahead, the dictionary (kept: a query then reads only postings where it fits).
        let bytes = store
            .read(&path, 0, store.read_ahead().max(FIXED))
            .await
            .ok()?;
        let read = Segment::read(store, &path, 0, bytes, 0).await;
        if read.is_none() {
            log::info!("scrollback: the search segment {path} does not read: removed");
            let _ = store.remove(&path).await;
        }
        read
    }

    /// The segment that starts at `origin` in the file at `path`, from `bytes` (its first
    /// ones, as read) and, when they do not hold its whole header, one more read of it (and
    /// `more` bytes after it: the dictionary's start). `None`: it does not read.
    pub(super) async fn read<S: Store>(
        store: &S,
        path: &str,
        origin: u64,
        bytes: Vec<u8>,
        more: usize,
    ) -> Option<Segment> {
        let (read, bytes) = match header(&bytes) {
            Ok(read) => (read, bytes),
            Err(whole) => match store.read(path, origin, whole.saturating_add(more)).await {
                Ok(bytes) => (header(&bytes).unwrap_or(None), bytes),
                Err(_) => return None,
            },
        };
        read.map(|s| Segment {
            first: bytes,
            origin,
            ..s
        })
    }

    /// A session's part of `pack` (whose segment is `whole`), as the pack's table has it: its
    /// documents `first.. first + docs`, those with words and their words, `covered` bytes of
    /// its blob, `edge` the last of them.
    pub(super) fn part(
        pack: &Arc<Pack>,
        whole: &Segment,
        e: &super::pack::Entry,
    ) -> Option<Segment> {
        let (first, docs, covered) = (e.first, e.docs, e.covered);
        let span = first as usize..first.checked_add(docs)? as usize;
        if span.end > whole.docs as usize || e.worded > docs {
            return None;
        }
        let start = match docs {
            0 => 0,
            _ => whole.column.get(first)?.at,
        };
        let end = match docs.checked_sub(1) {
            Some(last) => {
                let m = whole.column.get(first + last)?;
                m.at + u64::from(m.bytes) + 1
            }
            None => start,
        };
        if end.checked_sub(start) != Some(covered) || e.edge.len() as u64 > covered {
            return None;
        }
        Some(Segment {
            covered,
            docs,
            worded: e.worded,
            words: e.words,
            edge: e.edge.clone(),
            column: whole.column.clone(),
            span,
            at_base: start,
            blocks: Vec::new(),
            post_at: 0,
            size: 0,
            body: None,
            first: Vec::new(),
            origin: 0,
            pack: Some((pack.clone(), first)),
        })
    }

    /// Whether it is a session's part of its server's [`Pack`].
    pub fn packed(&self) -> bool {
        self.pack.is_some()
    }

    /// The postings of `term` (or, as a prefix, of every term starting with it, merged by
    /// document with their frequencies summed), sorted by document. `None`: the segment does
    /// not read (the query removes it and asks the blob alone).
    pub async fn postings<S: Store>(
        &self,
        store: &S,
        dir: &str,
        term: &str,
        prefix: bool,
    ) -> Option<Vec<Post>> {
        match &self.pack {
            Some((pack, first)) => {
                let all = pack.postings(store, term, prefix).await?;
                let end = first + self.docs;
                let from = all.partition_point(|p| p.doc < *first);
                let to = all.partition_point(|p| p.doc < end);
                let mine = all[from..to].iter();
                Some(
                    mine.map(|p| Post {
                        doc: p.doc - first,
                        ..*p
                    })
                    .collect(),
                )
            }
            None => {
                self.postings_in(store, &format!("{dir}/{SEGMENT}"), term, prefix)
                    .await
            }
        }
    }

    /// [`Segment::postings`] of the segment in the file at `path`.
    pub(super) async fn postings_in<S: Store>(
        &self,
        store: &S,
        path: &str,
        term: &str,
        prefix: bool,
    ) -> Option<Vec<Post>> {
        let from = self
            .blocks
            .partition_point(|b| b.first.as_str() <= term)
            .saturating_sub(1);
        let Some(block) = self.blocks.get(from) else {
            return Some(Vec::new());
        };
        // A prefix may run on into the blocks that start with it.
        let to = match prefix {
            true => {
                from + self.blocks[from + 1..]
                    .iter()
                    .take_while(|b| b.first.starts_with(term))
                    .count()
            }
            false => from,
        };
        let dict = self
            .range(store, path, block.start, self.blocks[to].end)
            .await?;
        let mut c = Cursor::new(&dict);
        let mut ranges = Vec::new();
        // Each term: its bytes shared with the term before it (none at a block's start), the
        // rest, and its postings' length (they follow one another from the block's start).
        let (mut t, mut at) = (Vec::new(), block.post);
        let term = term.as_bytes();
        while !c.done() {
            let shared = usize::try_from(c.varint()?).ok()?;
            let rest = usize::try_from(c.varint()?).ok()?;
            if shared > t.len() {
                return None;
            }
            t.truncate(shared);
            t.extend_from_slice(c.take(rest)?);
            let len = c.varint()?;
            let hit = match prefix {
                true => t.starts_with(term),
                false => t == term,
            };
            if hit {
                ranges.push((at, at.checked_add(len)?));
            } else if t.as_slice() > term && !t.starts_with(term) {
                break;
            }
            at = at.checked_add(len)?;
        }
        let (Some(&(lo, _)), Some(&(_, hi))) = (ranges.first(), ranges.last()) else {
            return Some(Vec::new());
        };
        let (lo_abs, hi_abs) = (self.post_at.checked_add(lo)?, self.post_at.checked_add(hi)?);
        if hi_abs > self.size {
            return None;
        }
        let bytes = self.range(store, path, lo_abs, hi_abs).await?;
        let mut found = Vec::new();
        for (a, b) in ranges {
            let at = |x: u64| usize::try_from(x.checked_sub(lo)?).ok();
            decode_postings(bytes.get(at(a)?..at(b)?)?, &mut found)?;
        }
        if prefix {
            merge_by_doc(&mut found, |p| p.doc, Posting::absorb);
        }
        let base = self.span.start as u32;
        if found.last().is_some_and(|p| p.doc >= self.docs) {
            return None;
        }
        let metas = self.column.many(found.iter().map(|p| base + p.doc))?;
        let posts = found.into_iter().zip(metas).map(|(p, meta)| Post {
            doc: p.doc,
            tf: p.tf,
            len: meta.len,
            seq: meta.seq,
            ts: meta.ts,
            next: p.next,
        });
        Some(posts.collect())
    }

    /// Reads the whole segment into memory (the worker's warm-up does, so that later queries
    /// cost no store reads); `false` when it does not read in full.
    pub async fn hold<S: Store>(&mut self, store: &S, dir: &str) -> bool {
        if self.pack.is_some() {
            return false; // the pack is read by ranges until the worker loads its own
        }
        let path = format!("{dir}/{SEGMENT}");
        self.body = read_exact(store, &path, 0, self.size).await;
        if self.body.is_some() {
            self.first = Vec::new();
        }
        self.body.is_some()
    }

    /// Its documents whose seq lies in `seqs`, with their lengths in words (none where its
    /// column does not read: a query then finds it broken).
    pub fn docs_in(&self, seqs: std::ops::Range<u64>) -> impl Iterator<Item = (u32, u32)> + '_ {
        let column = self.metas().unwrap_or_default().iter().enumerate();
        column
            .filter(move |(_, m)| seqs.contains(&m.seq))
            .map(|(id, m)| (id as u32, m.len))
    }

    /// The highest seq of its documents.
    pub fn newest(&self) -> Option<u64> {
        self.metas()?.iter().map(|m| m.seq).max()
    }

    /// Whether it is held in memory.
    pub fn held(&self) -> bool {
        self.body.is_some()
    }

    /// Bytes `start..end` of the segment at `path`: from memory when held.
    async fn range<S: Store>(
        &self,
        store: &S,
        path: &str,
        start: u64,
        end: u64,
    ) -> Option<Cow<'_, [u8]>> {
        let held = self.body.as_ref().unwrap_or(&self.first);
        let (from, to) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
        match held.get(from..to) {
            Some(bytes) => Some(Cow::Borrowed(bytes)),
            None if self.body.is_some() => None,
            None => {
                let (start, end) = (self.origin + start, self.origin + end);
                read_exact(store, path, start, end).await.map(Cow::Owned)
            }
        }
    }

    /// Where document `doc`'s line lies in the blob (`None`: not in this segment), to be
    /// read and checked ([`LineAt::doc`]).
    pub fn line(&self, doc: u32) -> Option<LineAt> {
        if doc >= self.docs {
            return None;
        }
        let meta = self.column.get(self.span.start as u32 + doc)?;
        let at = meta.at.checked_sub(self.at_base)?;
        let end = at.checked_add(u64::from(meta.bytes))?;
        Some(LineAt {
            at,
            end,
            seq: meta.seq,
        })
    }
}

/// A document's line in its blob ([`Segment::line`]): its bytes, and its row's seq.
#[derive(Debug, Clone, Copy)]
pub(super) struct LineAt {
    /// Where its bytes start in the blob,
    pub at: u64,
    /// and where they end.
    pub end: u64,
    /// The seq of the row the column says it is.
    pub seq: u64,
}

impl LineAt {
    /// The document `bytes` (read from `at` to `end`) hold: `None` when they are not whole,
    /// do not read, or are not the row the column says (the blob is not the one the segment
    /// was built from).
    pub fn doc(&self, bytes: &[u8]) -> Option<Doc> {
        let whole = bytes.len() as u64 == self.end - self.at;
        let doc = serde_json::from_slice::<Doc>(bytes).ok().filter(|_| whole);
        doc.filter(|d| d.seq == self.seq)
    }
}

/// Appends the postings one term's `bytes` hold to `out` (`None`: they do not read).
fn decode_postings(bytes: &[u8], out: &mut Vec<Posting>) -> Option<()> {
    let mut c = Cursor::new(bytes);
    let mut doc = 0u64;
    while !c.done() {
        doc = doc.checked_add(c.varint()?)?;
        out.push(Posting {
            doc: u32::try_from(doc).ok()?,
            tf: u32::try_from(c.varint()?).ok()?,
            next: *c.take(1)?.first()?,
        });
    }
    Some(())
}

/// Every term of a held segment in sorted order with its postings (what a [`Pack`] is
/// merged from, [`Segment::terms`]): an item `None` where it does not read, and nothing after.
pub(super) struct Terms<'a> {
    segment: &'a Segment,
    body: &'a [u8],
    /// The next block, and the rest of the one being read.
    block: usize,
    dict: Cursor<'a>,
    term: Vec<u8>,
    /// Where the next term's postings start, from the postings' start.
    at: u64,
    done: bool,
}

impl Iterator for Terms<'_> {
    type Item = Option<(String, Vec<Posting>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        while self.dict.done() {
            let Some(block) = self.segment.blocks.get(self.block) else {
                self.done = true;
                return None;
            };
            self.block += 1;
            let bytes = (usize::try_from(block.start).ok())
                .zip(usize::try_from(block.end).ok())
                .and_then(|(start, end)| self.body.get(start..end));
            let Some(bytes) = bytes else {
                self.done = true;
                return Some(None);
            };
            (self.dict, self.at) = (Cursor::new(bytes), block.post);
            self.term.clear();
        }
        let entry = self.entry();
        self.done = entry.is_none();
        Some(entry)
    }
}

impl Terms<'_> {
    /// The next term of the block being read, and its postings.
    fn entry(&mut self) -> Option<(String, Vec<Posting>)> {
        let shared = usize::try_from(self.dict.varint()?).ok()?;
        let rest = usize::try_from(self.dict.varint()?).ok()?;
        if shared > self.term.len() {
            return None;
        }
        self.term.truncate(shared);
        self.term.extend_from_slice(self.dict.take(rest)?);
        let len = self.dict.varint()?;
        let start = self.segment.post_at.checked_add(self.at)?;
        let end = start.checked_add(len)?;
        self.at = self.at.checked_add(len)?;
        let bytes = self
            .body
            .get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)?;
        let mut list = Vec::new();
        decode_postings(bytes, &mut list)?;
        Some((String::from_utf8(self.term.clone()).ok()?, list))
    }
}

impl Segment {
    /// Its terms, in order, with their postings: `None` unless it is held in memory
    /// ([`Segment::hold`]).
    pub(super) fn terms(&self) -> Option<Terms<'_>> {
        Some(Terms {
            segment: self,
            body: self.body.as_deref()?,
            block: 0,
            dict: Cursor::new(&[]),
            term: Vec::new(),
            at: 0,
            done: false,
        })
    }

    /// Its documents' column (each line's `at` as in the segment it is a part of), decoded
    /// whole; `None` where it does not read.
    pub(super) fn metas(&self) -> Option<&[Meta]> {
        self.column.all()?.get(self.span.clone())
    }
}

/// Bytes `start..end` of `path`, all of them or `None`.
async fn read_exact<S: Store>(store: &S, path: &str, start: u64, end: u64) -> Option<Vec<u8>> {
    let len = usize::try_from(end.checked_sub(start)?).ok()?;
    let bytes = store.read(path, start, len).await.ok()?;
    (bytes.len() == len).then_some(bytes)
}

/// Whether the session folder `dir` would gain from a build: its blob holds at least
/// [`MIN_TAIL`] bytes past its segment (or it has none and holds that much), or its segment is
/// not whole. Reads two sizes and the segment's fixed header.
pub async fn stale<S: Store>(store: &S, dir: &str) -> bool {
    let Ok(Some(blob)) = store.stat(&format!("{dir}/{INDEX}")).await else {
        return false;
    };
    let path = format!("{dir}/{SEGMENT}");
    let Ok(Some(file)) = store.stat(&path).await else {
        return blob.size >= MIN_TAIL;
    };
    let fixed = store.read(&path, 0, FIXED).await.ok();
    match fixed.as_deref().and_then(Fixed::read) {
        Some(f) if f.size == file.size && f.covered <= blob.size => {
            blob.size - f.covered >= MIN_TAIL.max(f.covered / 16)
        }
        _ => true,
    }
}

/// Builds the segment of the session folder `dir` from every whole line of its blob,
/// replacing the one there; a folder without a blob loses its segment. Answers `false`, with
/// nothing built, when a line does not read (the blob is damaged: its index is to be rebuilt
/// from the chunks, not frozen with a row missing). Call it holding the session's writer role.
pub async fn build<S: Store>(store: &S, dir: &str) -> StoreResult<bool> {
    let path = format!("{dir}/{INDEX}");
    let Some(meta) = store.stat(&path).await? else {
        store.remove(&format!("{dir}/{SEGMENT}")).await?;
        return Ok(true);
    };
    let bytes = store.read(&path, 0, meta.size as usize).await?;
    let Some(covered) = bytes.iter().rposition(|&b| b == b'\n').map(|i| i + 1) else {
        return Ok(true);
    };
    // Every line has its place in the column: a piece that a welded document written after it
    // replaces is an empty document.
    let mut docs: Vec<(Doc, u32)> = Vec::new();
    for line in bytes[..covered - 1].split(|&b| b == b'\n') {
        let Ok(doc) = serde_json::from_slice::<Doc>(line) else {
            return Ok(false);
        };
        docs.push((doc, line.len() as u32));
    }
    for i in 0..docs.len() {
        if docs[i].0.welds {
            let seqs = docs[i].0.seq..docs[i].0.end;
            for (piece, _) in &mut docs[..i] {
                if seqs.contains(&piece.seq) {
                    piece.text.clear();
                }
            }
        }
    }
    let edge = &bytes[covered - covered.min(EDGE)..covered];
    let segment = encode(docs, covered as u64, &[], edge);
    let new = format!("{dir}/{SEGMENT_NEW}");
    let done = match store.write(&new, &segment).await {
        Ok(()) => store.rename(&new, &format!("{dir}/{SEGMENT}")).await,
        Err(e) => Err(e),
    };
    if done.is_err() {
        let _ = store.remove(&new).await; // a full disk keeps nothing half written
    }
    done.map(|()| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-seq row at `seq` saying `text`.
    fn row(seq: u64, text: String) -> Doc {
        Doc {
            seq,
            end: seq + 1,
            ts: 1.7e9 + seq as f64,
            text,
            at: 0,
            welds: false,
        }
    }

    #[test]
    fn varints_round_trip() {
        let mut out = Vec::new();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            put_varint(&mut out, v);
        }
        let mut c = Cursor::new(&out);
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(c.varint(), Some(v));
        }
        assert!(c.done());
        assert_eq!(Cursor::new(&[0x80]).varint(), None);
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn postings_keep_every_timestamp_and_seq() {
        use crate::store::MemoryStore;
        let stamps = [
            1.7e9,
            1.7e9 + 0.001,
            1.7e9 + 1.23456789,
            -5.0,
            1e300,
            0.0,
            1.7e9,
        ];
        let seqs = [5, 3, 900_000, 0, 7, u64::from(u32::MAX) * 4, 6];
        let docs: Vec<(Doc, u32)> = stamps
            .iter()
            .zip(seqs)
            .map(|(&ts, seq)| {
                let doc = Doc {
                    seq,
                    end: seq + 1,
                    ts,
                    text: "same words".into(),
                    at: 0,
                    welds: false,
                };
                (doc, 0)
            })
            .collect();
        let store = MemoryStore::new();
        let bytes = encode(docs, 7, b"", b"");
        pollster::block_on(async {
            store.write(&format!("d/{SEGMENT}"), &bytes).await.unwrap();
            let seg = Segment::open(&store, "d").await.unwrap();
            let posts = seg.postings(&store, "d", "words", false).await.unwrap();
            let got: Vec<(u64, f64)> = posts.iter().map(|p| (p.seq, p.ts)).collect();
            let want: Vec<(u64, f64)> = seqs.into_iter().zip(stamps).collect();
            assert_eq!(got, want);
            let prefixed = seg.postings(&store, "d", "wo", true).await.unwrap();
            assert_eq!(prefixed, posts);
            assert!(seg
                .postings(&store, "d", "word", false)
                .await
                .unwrap()
                .is_empty());
        });
    }

    #[test]
    fn the_dictionary_answers_every_term_and_prefix_as_memory_does() {
        use crate::store::MemoryStore;
        // Terms sharing long prefixes over many blocks, some in multi-byte characters that
        // share their first byte (é and è: a term's front-coded rest may start mid-character).
        let words: Vec<String> = (0..700u32)
            .map(|i| match i % 4 {
                0 => format!("w{i}x"),
                1 => format!("prefix{}", i * 7919 % 1000),
                2 => format!("{}{}", ["é", "è", "ê"][i as usize % 3], i % 50),
                _ => format!("z{}", "y".repeat(i as usize % 9 + 1)),
            })
            .collect();
        let docs: Vec<(Doc, u32)> = (0..200u64)
            .map(|seq| {
                let text = (0..9)
                    .map(|k| words[(seq as usize * 31 + k * 97) % words.len()].as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                (row(seq, text), 0)
            })
            .collect();
        let mut memory = Indexed::default();
        for (doc, _) in &docs {
            memory.add(doc.clone());
        }
        memory.prepare();
        let covered = docs.len() as u64; // (each line empty, and its newline)
        let bytes = encode(docs, covered, b"", b"");
        let store = MemoryStore::new();
        let terms: Vec<String> = memory.sorted_terms().map(|(t, _)| t.to_string()).collect();
        let mut asked: Vec<(String, bool)> = Vec::new();
        for t in &terms {
            asked.push((t.clone(), false));
            for (i, _) in t.char_indices().skip(1) {
                asked.push((t[..i].to_string(), true));
            }
            asked.push((format!("{t}0"), false));
        }
        asked.extend([("".into(), true), ("a".into(), false), ("zz".into(), true)]);
        pollster::block_on(async {
            store.write(&format!("d/{SEGMENT}"), &bytes).await.unwrap();
            // The first read holding the whole segment, then not the dictionary (a block read
            // per word), then less than the fixed header (the header read again, whole).
            for ahead in [None, Some(2048), Some(16)] {
                store.set_read_ahead(ahead);
                let seg = Segment::open(&store, "d").await.unwrap();
                assert!(seg.blocks.len() > 5, "{} blocks", seg.blocks.len());
                let in_first = seg.first.len() as u64 >= seg.post_at;
                assert_eq!(in_first, ahead.is_none(), "{ahead:?}: {}", seg.first.len());
                for (term, prefix) in &asked {
                    let got = seg.postings(&store, "d", term, *prefix).await.unwrap();
                    let want = memory.postings(term, *prefix);
                    let got: Vec<(u32, u32, u8)> =
                        got.iter().map(|p| (p.doc, p.tf, p.next)).collect();
                    let want: Vec<(u32, u32, u8)> =
                        want.iter().map(|p| (p.doc, p.tf, p.next)).collect();
                    assert_eq!(got, want, "{ahead:?}: {term:?} prefix {prefix}");
                }
            }
            // Held in memory, its terms in order with their postings, as a pack merges them.
            let mut held = Segment::open(&store, "d").await.unwrap();
            assert!(held.terms().is_none(), "not held yet");
            assert!(held.hold(&store, "d").await);
            let got: Vec<(String, Vec<Posting>)> =
                held.terms().unwrap().map(Option::unwrap).collect();
            let want: Vec<(String, Vec<Posting>)> = (memory.sorted_terms())
                .map(|(t, l)| (t.to_string(), l.to_vec()))
                .collect();
            assert_eq!(got, want);
        });
    }

    #[test]
    fn a_garbled_segment_never_panics() {
        use crate::store::MemoryStore;
        let docs: Vec<(Doc, u32)> = (0..40u64)
            .map(|seq| {
                let text = format!("alpha beta{} gamma{} delta", seq % 7, seq % 3);
                (row(seq, text), 9)
            })
            .collect();
        let good = encode(docs, 400, b"head", b"edge");
        let store = MemoryStore::new();
        pollster::block_on(async {
            let mut cases: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
            for i in 0..good.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut b = good.clone();
                    b[i] ^= flip;
                    cases.push(b);
                }
            }
            for bytes in cases {
                store.write(&format!("d/{SEGMENT}"), &bytes).await.unwrap();
                let Some(seg) = Segment::open(&store, "d").await else {
                    continue;
                };
                for (term, prefix) in [
                    ("alpha", false),
                    ("beta", true),
                    ("gamma1", false),
                    ("", true),
                ] {
                    if let Some(posts) = seg.postings(&store, "d", term, prefix).await {
                        assert!(posts.iter().all(|p| p.doc < seg.docs));
                    }
                }
                let _ = seg.line(3);
                let _ = (seg.docs_in(0..100).count(), seg.newest());
            }
        });
    }

    #[test]
    fn the_column_gives_each_document_as_it_was_written_from_its_run() {
        use crate::store::MemoryStore;
        // Four runs of `SKIP` (the last one short), seqs up and down, stamps whole and not.
        let n = 3 * SKIP as u64 + 5;
        let docs: Vec<(Doc, u32)> = (0..n)
            .map(|i| {
                let seq = if i % 5 == 0 { 1000 - i } else { 7 * i };
                let ts = 1.7e9 + i as f64 * if i % 3 == 0 { 0.123_456_7 } else { 1.0 };
                let rare = if i == 40 { " rare" } else { "" };
                let text = format!("every{rare}{}", " word".repeat(i as usize % 4));
                let doc = Doc {
                    ts,
                    ..row(seq, text)
                };
                (doc, 10 + i as u32 % 9)
            })
            .collect();
        let covered: u64 = docs.iter().map(|(_, b)| u64::from(*b) + 1).sum();
        let want: Vec<Meta> = (docs.iter())
            .scan(0u64, |at, (d, bytes)| {
                let m = Meta {
                    len: super::super::tokens::words(&d.text).len() as u32,
                    seq: d.seq,
                    ts: d.ts,
                    at: *at,
                    bytes: *bytes,
                };
                *at += u64::from(*bytes) + 1;
                Some(m)
            })
            .collect();
        let store = MemoryStore::new();
        let bytes = encode(docs, covered, b"", b"");
        pollster::block_on(async {
            store.write(&format!("d/{SEGMENT}"), &bytes).await.unwrap();
            let seg = Segment::open(&store, "d").await.unwrap();
            let col = &seg.column;
            // One document at a time, backwards: each from the start of its run.
            for d in (0..n as u32).rev() {
                assert_eq!(col.get(d), Some(want[d as usize]), "document {d}");
            }
            assert_eq!(col.get(n as u32), None);
            assert_eq!(seg.worded, n as u32);
            // A rare word's documents are decoded from their runs, not the whole column.
            let rare = seg.postings(&store, "d", "rare", false).await.unwrap();
            assert_eq!(
                rare.iter().map(|p| p.seq).collect::<Vec<_>>(),
                [want[40].seq]
            );
            assert!(col.all.get().is_none(), "decoded whole for one document");
            let sparse = col.many([2, 33, 70].into_iter()).unwrap();
            assert!(col.all.get().is_none());
            let picked: Vec<Meta> = [2, 33, 70].iter().map(|&d| want[d]).collect();
            assert_eq!(sparse, picked);
            // A word in every document decodes the column once, and answers the same.
            let every = seg.postings(&store, "d", "every", false).await.unwrap();
            assert!(col.all.get().is_some());
            let seqs: Vec<u64> = every.iter().map(|p| p.seq).collect();
            assert_eq!(seqs, want.iter().map(|m| m.seq).collect::<Vec<_>>());
            assert_eq!(seg.metas(), Some(&want[..]));
            assert_eq!(col.get(40), Some(want[40]));
        });
    }

    #[test]
    fn a_cut_header_does_not_read() {
        let doc = |seq: u64, text: &str| Doc {
            seq,
            end: seq + 1,
            ts: seq as f64,
            text: text.into(),
            at: seq + 1,
            welds: false,
        };
        let bytes = encode(vec![(doc(1, "alpha beta"), 10)], 11, b"h", b"e");
        let s = header(&bytes).unwrap().unwrap();
        assert_eq!((s.docs, s.words, s.covered), (1, 2, 11));
        assert_eq!(s.size, bytes.len() as u64);
        let more = header(&bytes[..FIXED + 3]).err().unwrap();
        assert!(
            more > FIXED + 3 && more < bytes.len(),
            "the dictionary is not needed"
        );
        assert!(matches!(header(&bytes[..FIXED - 1]), Ok(None)));
        let mut wrong = bytes.clone();
        wrong[0] = b'X';
        assert!(matches!(header(&wrong), Ok(None)));
    }
}
