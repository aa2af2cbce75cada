//! One index over every session of a server, so that a worker that just started answers its
//! first query from a few reads, whatever the number of sessions: the *pack*,
//! `transcripts/v1/<server>.search.idx`, beside the server's folder (as the remembered
//! session list is: no session folder can be named like it).
//!
//! A query before the worker has warmed up reads, per session, its [segment](super::segment)'s header, its
//! blob's end and, per word, a run of postings: two to four reads each, and in OPFS a read costs
//! about half a millisecond however small, while concurrent reads barely overlap. The pack
//! holds every session's documents in one segment (one column, one dictionary, one run of
//! postings per word), so that query reads the pack's header and, per word, one run of
//! postings for every session at once; of each session's blob it asks at most a `stat`, and
//! none where the [marks](super::marks) say that no writer changed the blob since the build.
//! A blob whose size and stamp are the ones the pack recorded holds nothing the pack does not; one
//! that changed is read past the bytes the pack covers (its last bytes compared, as a
//! segment's are: a blob rebuilt under it is loaded the usual way). The snippets are read
//! from the blobs, as always, and a line that is not the row the column says sets the
//! session aside for the query (`reader`).
//!
//! # Layout
//!
//! `SBP3`, the table's length (u32, little-endian), the table (per session: its folder's
//! name, its documents counted, those with words and their words, the blob bytes they cover,
//! the blob's size and stamp when it was read, the last bytes covered, and its
//! [`Trust`]: held, or the marks listed for it), then a
//! [segment](super::segment) over the sessions' documents one session after another, in the
//! table's order (its column's lines follow one another through each session's blob, and on
//! into the next's). A session folder without a
//! blob is in the table with no documents (a first query asks it a `stat`, not two reads).
//!
//! # Built
//!
//! In idle time, once the worker has warmed up and holds every session's segment and what
//! lies past it ([`Cache::build_search_pack`](crate::chunks::Cache::build_search_pack)):
//! merged from a copy of them (the postings re-numbered, nothing tokenized again; the pieces
//! a welded row replaced left empty; 100,000 postings per turn of the worker's event loop,
//! the memo let go, so queries go on meanwhile), by one tab at a time (the pack's writer
//! role), when the pack is missing, leaves out a session, holds one that
//! is gone, or the blobs gained a sixteenth (and [`MIN_TAIL`](super::segment::MIN_TAIL)) past
//! it, or a query found a part that was not its blob's. Written under another name and renamed
//! into place. Derived, like a segment: a pack that does not read is removed. The cache's
//! purge, eviction and retain-only remove it with any session (it holds the session's words),
//! and counts it in the byte budget; a session a view throws away (Reload, or gone from the
//! server) leaves a part no query uses (its blob is not the one recorded), gone at the next
//! build.

use super::marks::Trust;
use super::postings::{Indexed, Posting};
use super::segment::{put_varint, Assembler, Cursor, Meta as Line, Post, Segment};
use crate::store::{Meta, Store};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// The pack's name, after its server's folder's.
pub const PACK: &str = ".search.idx";
/// `SBP3`: each session's [`Trust`] in the table (`SBP2` had not: its sessions were each
/// asked a `stat`); `SBP2`: each session's documents with words and their words (what ranking
/// counts, without decoding the column), which `SBP1` had not.
const MAGIC: &[u8; 4] = b"SBP3";
/// The postings runs a pack keeps between queries (a worker that warms up lets it go).
const ASKED: usize = 64;

/// The pack of the server whose folder is `dir`.
pub fn path(dir: &str) -> String {
    format!("{dir}{PACK}")
}

/// One session in a pack.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    /// Where its documents start among the pack's.
    pub first: u32,
    pub docs: u32,
    /// Those with words, and their words.
    pub worded: u32,
    pub words: u64,
    /// The bytes of its blob they were built from, and the last of them (at most 64).
    pub covered: u64,
    pub edge: Vec<u8>,
    /// The blob's size and stamp when it was read up to `covered`.
    pub seen: Meta,
    /// Whether a worker that starts may take `seen` for the blob's ([`marks`](super::marks)).
    pub trust: Trust,
}

/// A server's pack, as read: its table and its segment's header; postings are read per word.
pub(super) struct Pack {
    path: String,
    whole: Segment,
    entries: HashMap<String, Entry>,
    /// The postings runs read, by query unit (every session's part asks for the same run).
    asked: async_lock::Mutex<Asked>,
}

/// Postings runs by query unit (a term, and whether it is a prefix); `None`: did not read.
type Asked = HashMap<(String, bool), Option<Arc<Vec<Post>>>>;

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pack({}, {} sessions)", self.path, self.entries.len())
    }
}

/// A pack being opened: its table read, its segment's header not yet ([`Opening::finish`]),
/// so that what a query asks of each session it holds (a `stat`) goes beside that read.
pub(super) struct Opening {
    path: String,
    entries: HashMap<String, Entry>,
    /// Where its segment starts, and its first bytes as read.
    origin: u64,
    first: Vec<u8>,
}

impl Pack {
    /// Starts opening the pack of the server whose folder is `dir`: `None` when there is none
    /// or it does not read (removed, then).
    pub async fn open<S: Store>(store: &S, dir: &str) -> Option<Opening> {
        let path = path(dir);
        let ahead = store.read_ahead();
        let bytes = store.read(&path, 0, ahead).await.ok()?;
        let read = Opening::read(store, &path, bytes, ahead).await;
        if read.is_none() {
            gone(store, &path).await;
        }
        read
    }

    /// Session `key`'s part (`None`: the pack does not hold it, or holds it wrong), with the
    /// blob's size and stamp the pack recorded.
    pub fn part(self: &Arc<Self>, key: &str) -> Option<(Segment, Meta)> {
        let e = self.entries.get(key)?;
        Some((Segment::part(self, &self.whole, e)?, e.seen))
    }

    /// The postings of a query unit over every session (see [`Segment::postings`]): read once
    /// for all their parts.
    pub async fn postings<S: Store>(
        &self,
        store: &S,
        term: &str,
        prefix: bool,
    ) -> Option<Arc<Vec<Post>>> {
        let mut asked = self.asked.lock().await;
        let key = (term.to_string(), prefix);
        if let Some(found) = asked.get(&key) {
            return found.clone();
        }
        let found = (self
            .whole
            .postings_in(store, &self.path, term, prefix)
            .await)
            .map(Arc::new);
        if asked.len() >= ASKED {
            asked.clear();
        }
        asked.insert(key, found.clone());
        found
    }
}

impl Opening {
    async fn read<S: Store>(store: &S, path: &str, bytes: Vec<u8>, ahead: usize) -> Option<Self> {
        let origin = table_end(&bytes)?;
        let at = usize::try_from(origin).ok()?;
        let mut bytes = bytes;
        if bytes.len() < at.checked_add(64)? {
            bytes = store.read(path, 0, at.saturating_add(ahead)).await.ok()?;
        }
        Some(Opening {
            path: path.to_string(),
            entries: table(bytes.get(8..at)?)?,
            origin,
            first: bytes.get(at..)?.to_vec(),
        })
    }

    /// The blob's size and stamp recorded for session `key` (`Some(None)`: no blob), where a
    /// worker that starts may take them for the blob's without a `stat`: `listed`, the marks
    /// listed before the pack was read, holds none the pack did not record for it
    /// ([`Trust::trusts`]).
    pub fn trusted(
        &self,
        key: &str,
        listed: &HashMap<String, Vec<String>>,
    ) -> Option<Option<Meta>> {
        let e = self.entries.get(key)?;
        let seen = (e.covered > 0).then_some(e.seen);
        e.trust.trusts(listed.get(key)).then_some(seen)
    }

    /// The session folders it holds.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }

    /// Reads the segment's header (one read, with the dictionary's start).
    pub async fn finish<S: Store>(self, store: &S) -> Option<Arc<Pack>> {
        let ahead = store.read_ahead();
        let whole = Segment::read(store, &self.path, self.origin, self.first, ahead).await;
        let docs: u64 = self.entries.values().map(|e| u64::from(e.docs)).sum();
        match whole.filter(|w| u64::from(w.docs) == docs) {
            Some(whole) => Some(Arc::new(Pack {
                path: self.path,
                whole,
                entries: self.entries,
                asked: Default::default(),
            })),
            None => {
                gone(store, &self.path).await;
                None
            }
        }
    }
}

/// Removes the pack at `path`, which does not read (derived: built again in idle time).
async fn gone<S: Store>(store: &S, path: &str) {
    log::info!("scrollback: the search pack {path} does not read: removed");
    let _ = store.remove(path).await;
}

/// Where the table of a pack whose first bytes are `bytes` ends (its segment starts).
fn table_end(bytes: &[u8]) -> Option<u64> {
    let len = bytes.get(..8).filter(|b| b.starts_with(MAGIC))?;
    Some(8 + u64::from(u32::from_le_bytes(len[4..].try_into().ok()?)))
}

/// A pack's table, by session folder.
fn table(bytes: &[u8]) -> Option<HashMap<String, Entry>> {
    let mut c = Cursor::new(bytes);
    let mut out = HashMap::new();
    let mut first = 0u32;
    while !c.done() {
        let key = c.str()?.to_string();
        let docs = u32::try_from(c.varint()?).ok()?;
        let worded = u32::try_from(c.varint()?).ok()?;
        let words = c.varint()?;
        let covered = c.varint()?;
        let seen = Meta {
            size: c.varint()?,
            modified: c.varint()?,
        };
        let edge_len = usize::try_from(c.varint()?).ok()?;
        let edge = c.take(edge_len)?.to_vec();
        let trust = match c.varint()? {
            0 => Trust::Held,
            n => Trust::Marks(
                (1..n)
                    .map(|_| Some(c.str()?.to_string()))
                    .collect::<Option<_>>()?,
            ),
        };
        let entry = Entry {
            first,
            docs,
            worded,
            words,
            covered,
            edge,
            seen,
            trust,
        };
        first = first.checked_add(docs)?;
        out.insert(key, entry);
    }
    Some(out)
}

/// The table of the pack of the server whose folder is `dir` (`None`: there is none that
/// reads): what the build compares with what the worker holds.
pub(super) async fn entries<S: Store>(store: &S, dir: &str) -> Option<HashMap<String, Entry>> {
    let (path, ahead) = (path(dir), store.read_ahead());
    let bytes = store.read(&path, 0, ahead).await.ok()?;
    Some(Opening::read(store, &path, bytes, ahead).await?.entries)
}

/// One session, as a pack is built from it: a copy of what the worker holds of its blob
/// (taken under the memo, which queries then have back while the pack is merged).
#[derive(Default)]
pub(super) struct Part {
    /// Its folder's name.
    pub key: String,
    /// The blob's size and stamp when it was read up to `covered`, and whether a worker that
    /// starts may take them for the blob's.
    pub seen: Meta,
    pub trust: Trust,
    pub covered: u64,
    pub edge: Vec<u8>,
    /// Its segment, held in memory, if one covers the blob's start.
    pub segment: Option<Segment>,
    /// The documents past it, in order, and each one's line's bytes in the blob.
    pub tail: Indexed,
    pub lines: Vec<u32>,
    /// Documents a welded one replaced (ids from the segment's first, then the tail's).
    pub dead: HashSet<u32>,
}

/// Whether the pack `on_disk` is behind what a worker holds (each session folder and the blob
/// bytes it holds): it is missing, leaves out a session or holds one that is gone (or was
/// rebuilt smaller), or the blobs gained a sixteenth (and
/// [`MIN_TAIL`](super::segment::MIN_TAIL)) past it.
pub(super) fn behind(on_disk: Option<&HashMap<String, Entry>>, held: &[(&str, u64)]) -> bool {
    let Some(on_disk) = on_disk else {
        return true;
    };
    let (mut gained, mut total) = (0u64, 0u64);
    for &(key, covered) in held {
        total += covered;
        match on_disk.get(key) {
            Some(e) if e.covered > covered => return true,
            Some(e) => gained += covered - e.covered,
            None => gained += covered,
        }
    }
    let gone = on_disk
        .keys()
        .any(|k| !held.iter().any(|&(key, _)| key == k));
    gone || gained >= super::segment::MIN_TAIL.max(total / 16)
}

/// The postings merged between two turns of the worker's event loop ([`encode`]): a few
/// milliseconds' work (a query typed meanwhile waits no longer), and few turns (a browser
/// makes each wait at least 4 ms).
const TURN: usize = 100_000;

/// Encodes the pack of `parts` (in their order); a part whose documents do not add up to
/// the bytes it covers, or whose segment does not read, is left out. The pieces a welded
/// document replaced are empty documents in it, as in a segment built from the blob.
pub(super) async fn encode(parts: &[Part]) -> Vec<u8> {
    let mut column: Vec<Line> = Vec::new();
    let mut table = Vec::new();
    let mut covered = 0u64;
    // Each source of terms (a segment, a tail) and where its documents start.
    let mut sources: Vec<(u32, Terms)> = Vec::new();
    for part in parts {
        let seg_terms = match &part.segment {
            Some(s) => match s.terms() {
                Some(t) => Some(t),
                None => continue,
            },
            None => None,
        };
        let seg_column = match &part.segment {
            Some(s) => match s.metas() {
                Some(m) => m,
                None => continue,
            },
            None => &[][..],
        };
        let tail = (part.tail.docs.iter().zip(&part.lines)).map(|((doc, len), &bytes)| Line {
            len: *len,
            seq: doc.seq,
            ts: doc.ts,
            at: 0,
            bytes,
        });
        let mut lines: Vec<Line> = seg_column.iter().copied().chain(tail).collect();
        let bytes: u64 = lines.iter().map(|m| u64::from(m.bytes) + 1).sum();
        if bytes != part.covered || part.lines.len() != part.tail.docs.len() {
            continue;
        }
        for &dead in &part.dead {
            if let Some(line) = lines.get_mut(dead as usize) {
                line.len = 0;
            }
        }
        let first = column.len() as u32;
        let dead = &part.dead;
        let alive = move |local: u32, list: Vec<Posting>| -> Vec<Posting> {
            let kept = list
                .into_iter()
                .filter(|p| !dead.contains(&(p.doc + local)));
            kept.collect()
        };
        if let Some(terms) = seg_terms {
            let terms = terms.map(move |t| t.map(|(t, l)| (t, alive(0, l))));
            sources.push((first, Box::new(terms)));
        }
        let seg_docs = seg_column.len() as u32;
        let tail_terms = part.tail.sorted_terms();
        let tail_terms =
            tail_terms.map(move |(t, l)| Some((t.to_string(), alive(seg_docs, l.to_vec()))));
        sources.push((first + seg_docs, Box::new(tail_terms)));
        column.extend(lines);
        covered += part.covered;
        let mine = &column[first as usize..];
        put_str(&mut table, &part.key);
        put_varint(&mut table, u64::from(column.len() as u32 - first));
        put_varint(&mut table, mine.iter().filter(|m| m.len > 0).count() as u64);
        put_varint(&mut table, mine.iter().map(|m| u64::from(m.len)).sum());
        put_varint(&mut table, part.covered);
        put_varint(&mut table, part.seen.size);
        put_varint(&mut table, part.seen.modified);
        put_varint(&mut table, part.edge.len() as u64);
        table.extend_from_slice(&part.edge);
        match &part.trust {
            Trust::Held => put_varint(&mut table, 0),
            Trust::Marks(marks) => {
                put_varint(&mut table, marks.len() as u64 + 1);
                marks.iter().for_each(|m| put_str(&mut table, m));
            }
        }
    }
    let words = column.iter().map(|m| u64::from(m.len)).sum();
    let mut merge = Merge::new(sources);
    let mut out = Assembler::default();
    let mut turn = 0;
    for (term, list) in merge.by_ref() {
        out.push(&term, &list);
        turn += list.len() + 1;
        if turn >= TURN {
            turn = 0;
            crate::store::breathe().await;
        }
    }
    if merge.broken {
        return Vec::new(); // a held segment that does not read: no pack this time
    }
    let segment = out.finish(&column, words, covered, &[], &[]);
    let mut out = Vec::with_capacity(8 + table.len() + segment.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(table.len() as u32).to_le_bytes());
    out.extend_from_slice(&table);
    out.extend_from_slice(&segment);
    out
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A source's terms in sorted order with their postings (documents from 0); an item `None`
/// where it does not read.
type Terms<'a> = Box<dyn Iterator<Item = Option<(String, Vec<Posting>)>> + 'a>;

/// The terms of every source in sorted order, each with the postings of every source that
/// has it, one after another (the sources' documents numbered from where each starts).
struct Merge<'a> {
    sources: Vec<(u32, Terms<'a>)>,
    /// Each source's next term's postings.
    heads: Vec<Vec<Posting>>,
    /// Each source's next term, smallest first (then the source: the order of the documents).
    next: BinaryHeap<Reverse<(String, usize)>>,
    broken: bool,
}

impl<'a> Merge<'a> {
    fn new(sources: Vec<(u32, Terms<'a>)>) -> Self {
        let heads = vec![Vec::new(); sources.len()];
        let mut merge = Merge {
            sources,
            heads,
            next: BinaryHeap::new(),
            broken: false,
        };
        for i in 0..merge.sources.len() {
            merge.pull(i);
        }
        merge
    }

    /// Takes source `i`'s next term.
    fn pull(&mut self, i: usize) {
        match self.sources[i].1.next() {
            Some(Some((term, list))) => {
                self.heads[i] = list;
                self.next.push(Reverse((term, i)));
            }
            Some(None) => self.broken = true,
            None => {}
        }
    }
}

impl Iterator for Merge<'_> {
    type Item = (Cow<'static, str>, Cow<'static, [Posting]>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (term, list) = self.gather()?;
            if !list.is_empty() {
                return Some((Cow::Owned(term), Cow::Owned(list)));
            }
        }
    }
}

impl Merge<'_> {
    /// The next term, with the postings of every source that has it (none, where every one
    /// of them was a replaced piece's).
    fn gather(&mut self) -> Option<(String, Vec<Posting>)> {
        if self.broken {
            return None;
        }
        let Reverse((term, i)) = self.next.pop()?;
        let mut list = Vec::new();
        let mut from = Some(i);
        while let Some(i) = from {
            let base = self.sources[i].0;
            let head = std::mem::take(&mut self.heads[i]);
            list.extend(head.into_iter().map(|p| Posting {
                doc: p.doc + base,
                ..p
            }));
            self.pull(i);
            from = match self.next.peek() {
                Some(Reverse((t, j))) if *t == term => {
                    let j = *j;
                    self.next.pop();
                    Some(j)
                }
                _ => None,
            };
        }
        Some((term, list))
    }
}
