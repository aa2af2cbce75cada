//! One session's chunks: open and repair, serve lines and pages, store pages, append live lines.

use super::coverage::{self, Chunk, Kind};
use super::lines::{seek, BackLines, Fail, ReadAt, BLOCK};
use super::names::{chunk_name, parse_chunk_name, TOUCH};
use crate::protocol::{continues, last_seq, EventKind, Line, RowWalk};
use crate::search::writer::{IndexWriter, INDEX};
use crate::store::{Store, StoreError, WriterRole, Writers};
use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;

/// A page served from the cache: raw cached lines, oldest first, never empty.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The lines, oldest first, exactly as stored (a `.rows` chunk's lines are coalesced).
    pub lines: Vec<Line>,
    /// The walk reached the oldest line the suffix holds: the page may be short, and a page
    /// before `lines[0].seq()` is a miss (ask the server, with [`SessionCache::gap_after`]).
    pub at_start: bool,
}

/// What is known of the chunks on disk once opened.
#[derive(Debug, Default)]
struct State {
    /// Sorted by coverage, non-overlapping; at most one [`Kind::Open`].
    chunks: Vec<Chunk>,
    /// The newest cached line.
    cursor: Option<Line>,
}

/// Bytes read from the newest chunk's end when the session opens: the repair of its tail, the
/// cursor and the first window all fall inside it for ordinary lines, so opening costs one read.
const READ_AHEAD: usize = 4 * BLOCK;

/// The newest chunk's tail, read ahead when the session opens ([`READ_AHEAD`]). Lives until the
/// first window is read or anything is written, whichever comes first.
#[derive(Debug)]
struct Tail {
    path: String,
    at: u64,
    bytes: Vec<u8>,
}

/// Bytes read at once, and held, when a backward walk asks for bytes the cache does not hold:
/// paging back through the cache then reads the store once every few pages of a long chunk, and
/// a page-sized chunk (a page fetched from the server) once, not once per walk that touches it.
const HELD: usize = 4 * BLOCK;

impl Tail {
    /// `len` bytes at `offset` of `path`, when wholly inside.
    fn get(&self, path: &str, offset: u64, len: usize) -> Option<Vec<u8>> {
        if self.path != path || offset < self.at {
            return None;
        }
        let from = usize::try_from(offset - self.at).ok()?;
        let to = from.checked_add(len)?;
        self.bytes.get(from..to).map(<[u8]>::to_vec)
    }
}

/// The session's store with the read-ahead in front: a read wholly inside the tail or the held
/// block is served from it; a backward walk's miss reads up to [`HELD`] bytes ending where it
/// ends and holds them instead of the last held; any other read goes to the store.
struct Reads<'a, S> {
    store: &'a S,
    tail: Option<&'a Tail>,
    held: &'a RefCell<Option<Tail>>,
}

impl<S> Reads<'_, S> {
    /// The bytes when the tail or the held block holds them all.
    fn in_memory(&self, path: &str, offset: u64, len: usize) -> Option<Vec<u8>> {
        let near = |t: &Tail| t.get(path, offset, len);
        self.tail
            .and_then(near)
            .or_else(|| self.held.borrow().as_ref().and_then(near))
    }
}

impl<S: Store> ReadAt for Reads<'_, S> {
    async fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, StoreError> {
        match self.in_memory(path, offset, len) {
            Some(bytes) => Ok(bytes),
            None => self.store.read(path, offset, len).await,
        }
    }

    async fn read_back(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, StoreError> {
        if let Some(bytes) = self.in_memory(path, offset, len) {
            return Ok(bytes);
        }
        let end = offset + len as u64;
        let at = end.saturating_sub(HELD as u64);
        let held = Tail {
            path: path.to_string(),
            at,
            bytes: self.store.read(path, at, (end - at) as usize).await?,
        };
        // A short read (the blob shrank) is answered short, as the store would.
        let from = ((offset - at) as usize).min(held.bytes.len());
        let to = (from + len).min(held.bytes.len());
        let answer = held.bytes[from..to].to_vec();
        *self.held.borrow_mut() = Some(held);
        Ok(answer)
    }
}

/// Where the last page served began, so the next page back starts there without a seek.
#[derive(Debug, Clone, Copy)]
struct Hint {
    chunk_first: u64,
    seq: u64,
    offset: u64,
}

/// One session's cache: the chunks under `transcripts/v1/<server>/<session>/`.
///
/// Methods take `&mut self`: the caller serializes access, so a reader never sees a
/// half-rotated chunk. Every storage error answers as if the cache were empty (a miss, a no-op);
/// after a write failure this instance writes nothing more and logs one warning.
#[derive(Debug)]
pub struct SessionCache<S> {
    io: Io<S>,
    /// What the last open learned; `None` before the first open and after
    /// [`SessionCache::set_reader`] (the next use opens again). Its chunks are read and changed
    /// only through `Opened`, which opening returns.
    state: Option<State>,
}

/// The session's store and what this instance knows besides its chunks.
#[derive(Debug)]
struct Io<S> {
    store: Arc<S>,
    id: String,
    dir: String,
    /// Why writing stopped, when a write or a read failed ([`SessionCache::write_error`]): a
    /// writer with none writes ([`Io::writing`]).
    failed: Option<StoreError>,
    /// Another tab holds the writer role: read only, and leave every repair to it.
    reader: bool,
    /// A reader purged its cache (its view's Reload, or damage it read): it cannot remove the
    /// writer's chunks, so it stops reading them, and opens cold; made the writer, it removes
    /// them (what it threw away is never served again).
    blind: bool,
    hint: Option<Hint>,
    tail: Option<Tail>,
    /// The block a backward walk read last ([`HELD`] bytes): valid as long as the hint is, since
    /// chunks only grow at their end and a path is never reused without a purge or an open.
    held: RefCell<Option<Tail>>,
    /// Opened with [`SessionCache::open_untouched`] and not yet touched.
    untouched: bool,
    /// The session's search index, written beside the chunks (writer only).
    index: IndexWriter,
    /// Whose turn it is to take the writer role in this process (its cache's).
    turns: Arc<Writers>,
    /// Whether writes feed the index ([`SessionCache::set_indexing`]).
    indexing: bool,
}

/// An opened session: its chunks listed and repaired. Every read and write of the chunks
/// goes through it, so none can run before the open.
struct Opened<'a, S> {
    io: &'a mut Io<S>,
    state: &'a mut State,
}

impl<S: Store> SessionCache<S> {
    pub(super) fn new(
        store: Arc<S>,
        id: String,
        dir: String,
        index: IndexWriter,
        turns: Arc<Writers>,
    ) -> Self {
        SessionCache {
            io: Io {
                store,
                id,
                dir,
                failed: None,
                reader: false,
                blind: false,
                hint: None,
                tail: None,
                held: RefCell::new(None),
                untouched: false,
                index,
                indexing: true,
                turns,
            },
            state: None,
        }
    }

    /// Turns the session's search index off (or on again) for this instance: with it off,
    /// nothing is indexed, and its first write after an open removes the index the session
    /// had ([`IndexWriter::drop_blob`]); turned on again, the next write rebuilds it from the
    /// chunks. [`Cache`](super::Cache) turns it off for every session when search is.
    pub fn set_indexing(&mut self, on: bool) {
        self.io.indexing = on;
        self.io.index.reset();
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.io.id
    }

    /// Whether this instance still writes (false after a write failure, or as a reader).
    pub fn is_writing(&self) -> bool {
        self.io.writing()
    }

    /// Why this instance stopped writing, when a write or a read of the store failed (a full
    /// quota, a store that went away): the lines it is given are no longer kept. Cleared when
    /// a purge removes the session's chunks (the layout is known again: none) and when the
    /// instance is made a reader or the writer again ([`SessionCache::set_reader`]).
    pub fn write_error(&self) -> Option<&StoreError> {
        self.io.failed.as_ref()
    }

    /// The writer role for this session across tabs and workers ([`Store::writer`], keyed by
    /// the session's folder): `None` at once when another holds it. A brief hold of the role
    /// by its own cache (a search segment build, an eviction: see [`Cache`](super::Cache)) is
    /// waited for first, since it is over in a moment: the session then writes from the
    /// start rather than open as a reader and take the role over with a second check.
    pub async fn try_writer(&self) -> Option<WriterRole> {
        let _turn = self.io.turns.acquire(&self.io.dir, true).await;
        self.io.store.writer(&self.io.dir, false).await
    }

    /// Resolves with the writer role once its holder lets it go (its tab closed). Owns what it
    /// needs, so it can be kept waiting beside the session's other work.
    pub fn wait_for_writer(&self) -> impl Future<Output = Option<WriterRole>> + 'static
    where
        S: 'static,
    {
        let (store, key) = (self.io.store.clone(), self.io.dir.clone());
        async move { store.writer(&key, true).await }
    }

    /// Makes this instance a reader (another tab writes: it never writes, truncates or
    /// purges, and damage it reads is only forgotten) or, given `false`, the writer again,
    /// re-reading the disk on next use (the tab before it may have left a torn tail, which the
    /// next open repairs).
    pub fn set_reader(&mut self, reader: bool) {
        self.io.reader = reader;
        self.io.failed = None;
        self.state = None;
        self.io.hint = None;
        self.io.held.take();
        self.io.index.reset();
    }

    /// Whether this instance is a reader (see [`SessionCache::set_reader`]).
    pub fn is_reader(&self) -> bool {
        self.io.reader
    }

    /// Makes what was written durable and visible to other tabs ([`Store::flush`]) and lets go
    /// of the session's blobs ([`Store::hand_over`]): before the writer role is given up.
    pub async fn hand_over(&self) {
        if let Err(e) = self.io.store.flush().await {
            log::info!("scrollback: flushing the cache of {:?}: {e}", self.io.id);
        }
        self.io.store.hand_over(&self.io.dir).await;
    }

    /// Opens the session: touches it (for the budget's recency), lists its chunks and repairs
    /// them. A torn last line of the open chunk is cut off; two open chunks, overlapping chunks,
    /// a `.rows` chunk as the newest, or a bad newest line purge the session. Called by every
    /// other method when needed; call it again to re-read the disk.
    pub async fn open(&mut self) {
        Opened::open(&mut self.io, &mut self.state)
            .await
            .touch()
            .await;
    }

    /// [`SessionCache::open`] without the touch, so the first rows can be read first; call
    /// [`SessionCache::touch`] once they are shown.
    pub async fn open_untouched(&mut self) {
        Opened::open(&mut self.io, &mut self.state).await;
    }

    /// Records that the session was opened (the budget evicts the least recently opened
    /// first), once per open.
    pub async fn touch(&mut self) {
        if let Some(state) = &mut self.state {
            Opened {
                io: &mut self.io,
                state,
            }
            .touch()
            .await;
        } else {
            self.io.touch().await;
        }
    }

    /// The newest cached line: the stream resumes after it, and the probe checks it.
    pub async fn cursor(&mut self) -> Option<Line> {
        self.opened().await.state.cursor.clone()
    }

    /// The seqs the suffix (the part that is served) covers, `[first, end)`.
    pub async fn suffix(&mut self) -> Option<(u64, u64)> {
        self.opened().await.known_suffix()
    }

    /// The newest `n` cached lines, oldest first (fewer when the suffix holds fewer); `None`
    /// when nothing is cached.
    pub async fn newest(&mut self, n: usize) -> Option<Vec<Line>> {
        let (_, end) = self.suffix().await?;
        // Read afresh (the tail aside): what is shown first tells a wiped store at once.
        self.io.held.take();
        let page = self.page(end, n, false).await.map(|p| p.lines);
        self.io.tail = None;
        page
    }

    /// The page before `before`: `limit` lines, or `limit` rows when `rows` (counted with the
    /// protocol's row rule, stopping only between rows), oldest first; it may cross chunk
    /// boundaries inside the suffix and may be short at the suffix's start.
    ///
    /// `None` is a miss (ask the server): `before` is not inside what the suffix covers
    /// (`first < before <= end`), or nothing was readable. A `before` in the middle of a chunk is
    /// a hit. A coalesced line is one event at its seq: a `before` inside its run serves it whole.
    pub async fn page(&mut self, before: u64, limit: usize, rows: bool) -> Option<Page> {
        if limit == 0 {
            return None;
        }
        self.opened().await.page(before, limit, rows).await
    }

    /// The `after` to send the server for a page before `before`, so the page stops where the
    /// cache already holds lines: `end - 1` of the nearest chunk whose `end <= before` (any
    /// chunk, not only the suffix). `None` when there is none.
    pub async fn gap_after(&mut self, before: u64) -> Option<u64> {
        coverage::gap_after(&self.opened().await.state.chunks, before)
    }

    /// Stores a page fetched from the server with `before` (and `coalesce` = `coalesced`) as a
    /// chunk `[lines[0].seq(), before)`. Returns whether it was stored. Refused (the caller still
    /// shows the page) when it is empty or out of order, when it overlaps a chunk, when it
    /// reaches `before` (a coalesced line by the run it folds), when a coalesced page would be the
    /// newest chunk, and when this instance no longer writes. A page that stops short of
    /// `before` is the server's newest lines below it: the span between holds none
    /// ([`SessionCache::none_between`]), and the chunk is stored up to its last line.
    pub async fn store_page(&mut self, lines: &[Line], before: u64, coalesced: bool) -> bool {
        if !self.io.writing() {
            return false;
        }
        self.opened()
            .await
            .store_page(lines, before, coalesced)
            .await
    }

    /// The server holds no line in `[from, before)`: the newest lines it answered below `before`
    /// stopped short of it, or a page bounded by `after = from - 1` came back empty (a line it
    /// cannot read, e.g. one with no event, is skipped and leaves such a hole in the seqs). The
    /// chunk starting at `before`, if there is one, takes the hole at its start (renamed to
    /// start at `from`), so the suffix reaches across it and no page asks for it again.
    /// Whether it did: not when another chunk covers part of the span, or this instance no
    /// longer writes.
    pub async fn none_between(&mut self, from: u64, before: u64) -> bool {
        if !self.io.writing() {
            return false;
        }
        self.opened().await.none_between(from, before).await
    }

    /// Appends a live line. A seq below the newest cached end is already covered and is not
    /// written; the open chunk's end is appended to it; any other seq (a reset's window, a gap)
    /// closes the open chunk, renaming it with its real end, and starts a new open chunk.
    pub async fn append(&mut self, line: &Line) {
        self.append_all(std::slice::from_ref(line)).await;
    }

    /// Appends live lines in order, as [`SessionCache::append`] would one by one, but each run
    /// of consecutive seqs in one write (a catch-up's hundreds of lines cost one append).
    pub async fn append_all(&mut self, lines: &[Line]) {
        let mut rest = lines;
        while !rest.is_empty() {
            let run = 1 + rest
                .windows(2)
                .take_while(|w| w[1].seq() == w[0].seq() + 1)
                .count();
            let (head, tail) = rest.split_at(run);
            if !self.append_run(head).await {
                return;
            }
            rest = tail;
        }
    }

    /// Appends lines the server answered together after seq `after` (a catch-up after the
    /// cached tail, a stream's next line after the one before it; `None` when what comes before
    /// them is not known, as for a cold window), in order: as [`SessionCache::append_all`],
    /// except that a jump between two of them, or from `after` to the first when the cache ends
    /// at `after`, is kept inside the open chunk rather than taken for a gap. The server sent
    /// every line it holds in between: a jump is a line it skips (one it cannot read), and a
    /// gap there would send every later page back to it for nothing.
    pub async fn append_served(&mut self, after: Option<u64>, lines: &[Line]) {
        if lines.windows(2).any(|w| w[1].seq() <= w[0].seq()) {
            return self.append_all(lines).await; // not an answer's order
        }
        if !self.io.writing() {
            return;
        }
        let mut opened = self.opened().await;
        let open = opened.state.chunks.last().filter(|c| c.kind == Kind::Open);
        let follows = after.is_some_and(|a| open.is_some_and(|c| c.end == a + 1));
        opened.append_run(lines, follows).await;
    }

    /// Appends a run of consecutive lines; `false` once this instance no longer writes.
    async fn append_run(&mut self, run: &[Line]) -> bool {
        if !self.io.writing() {
            return false;
        }
        self.opened().await.append_run(run, false).await
    }

    /// Throws the session's cache away (the Reload button); writing goes on afterwards.
    pub async fn purge(&mut self) {
        let state = self.state.insert(State::default());
        Opened {
            io: &mut self.io,
            state,
        }
        .purge()
        .await;
    }

    /// Throws the session's search index away and indexes its cached lines again, without
    /// touching it (a repair is not an open): its index blob holds a line that does not read
    /// (`why`). For the cache, holding the writer role.
    pub(crate) async fn rebuild_index(&mut self, why: &str) {
        let mut opened = Opened::open(&mut self.io, &mut self.state).await;
        let path = format!("{}/{INDEX}", opened.io.dir);
        if IndexWriter::rebuild(&*opened.io.store, &path, why)
            .await
            .is_ok()
        {
            opened.io.index.reset();
            opened.sync_index().await;
        }
    }

    /// The bytes this session's cache holds on disk (0 when nothing or unreadable).
    pub async fn size(&self) -> u64 {
        dir_size(&*self.io.store, &self.io.dir).await.unwrap_or(0)
    }

    /// The session opened: as it is, or opened (and touched) now if it was not.
    async fn opened(&mut self) -> Opened<'_, S> {
        let SessionCache { io, state } = self;
        match state {
            Some(state) => Opened { io, state },
            None => {
                let mut opened = Opened::open(io, state).await;
                opened.touch().await;
                opened
            }
        }
    }
}

impl<S: Store> Io<S> {
    fn path(&self, chunk: &Chunk) -> String {
        format!("{}/{}", self.dir, chunk_name(chunk))
    }

    /// The store with the read-ahead in front.
    fn reads(&self) -> Reads<'_, S> {
        Reads {
            store: &*self.store,
            tail: self.tail.as_ref(),
            held: &self.held,
        }
    }

    /// Whether this instance writes: the writer, while no write or read has failed.
    fn writing(&self) -> bool {
        !self.reader && self.failed.is_none()
    }

    /// Stops writing, with the one warning this instance logs.
    fn stop_writing(&mut self, e: &StoreError) {
        if self.writing() {
            self.failed = Some(e.clone());
            log::warn!(
                "scrollback: the cache of session {:?} stopped writing: {e}",
                self.id
            );
        }
    }

    /// Writes the touch blob, once per open and only as the writer; whether it was due.
    async fn touch(&mut self) -> bool {
        if !std::mem::take(&mut self.untouched) || !self.writing() {
            return false;
        }
        let touch = format!("{}/{TOUCH}", self.dir);
        if let Err(e) = self.store.write(&touch, b"").await {
            self.stop_writing(&e);
        }
        true
    }
}

impl<'a, S: Store> Opened<'a, S> {
    /// Lists and repairs the chunks into `slot` (see [`SessionCache::open`]), without the touch.
    async fn open(io: &'a mut Io<S>, slot: &'a mut Option<State>) -> Self {
        io.index.reset();
        io.hint = None;
        io.held.take();
        io.tail = None;
        let result = io.load().await;
        let mut opened = Opened {
            io,
            state: slot.insert(State::default()),
        };
        match result {
            Ok(state) => *opened.state = state,
            Err(fail) => opened.fail(fail).await,
        }
        opened.io.untouched = true;
        opened
    }

    /// [`SessionCache::touch`], and the search index brought up to the chunks.
    async fn touch(&mut self) {
        if self.io.touch().await {
            // A missing or damaged search index is rebuilt now, not at the next write: a
            // session that is only read again is searched too.
            self.sync_index().await;
        }
    }

    /// [`SessionCache::page`], with a `limit` above 0.
    async fn page(&mut self, before: u64, limit: usize, rows: bool) -> Option<Page> {
        let chunks = &self.state.chunks;
        let at = coverage::chunk_before(chunks, before)?;
        match self.walk(at, before, limit, rows).await {
            Ok(page) if !page.lines.is_empty() => Some(page),
            Ok(_) => None,
            Err(fail) => {
                self.fail(fail).await;
                None
            }
        }
    }

    /// [`SessionCache::store_page`] for a writing instance.
    async fn store_page(&mut self, lines: &[Line], before: u64, coalesced: bool) -> bool {
        let state = &self.state;
        let (Some(oldest), Some(newest)) = (lines.first(), lines.last()) else {
            return false;
        };
        let ordered = lines.windows(2).all(|w| w[0].seq() < w[1].seq());
        let first = oldest.seq();
        // Where the page reaches (a coalesced line by the run it folds).
        let reach = last_seq(newest) + 1;
        if !ordered || reach > before {
            return false;
        }
        if state.chunks.iter().any(|c| c.overlaps(first, before)) {
            return false;
        }
        let newest_chunk = state.chunks.iter().all(|c| c.first < before);
        if coalesced && newest_chunk {
            return false; // the newest chunk is always raw
        }
        self.io.tail = None;
        let mut bytes = Vec::new();
        for line in lines {
            bytes.extend_from_slice(line.raw().as_bytes());
            bytes.push(b'\n');
        }
        let chunk = Chunk {
            first,
            end: reach,
            kind: if coalesced { Kind::Rows } else { Kind::Raw },
            len: bytes.len() as u64,
        };
        if let Err(e) = self.io.store.write(&self.io.path(&chunk), &bytes).await {
            self.io.stop_writing(&e);
            return false;
        }
        if reach < before {
            self.none_between(reach, before).await;
        }
        let state = &mut *self.state;
        if newest_chunk {
            state.cursor = Some(newest.clone());
        }
        state.chunks.push(chunk);
        state.chunks.sort_by_key(|c| c.first);
        let below = self.sync_index().await;
        let (head, tail) = self.seams(lines).await;
        let store = &*self.io.store;
        self.io
            .index
            .push_page(store, lines, below, &head, &tail)
            .await;
        true
    }

    /// The cached rows that a page just stored continues, for the search index (see
    /// [`IndexWriter::push_page`]): the row ending right below its first line and the lines
    /// from right above its last line, each when the page's edge line continues it (a reply the
    /// page's edge cut); empty when none, or when the index is not written.
    async fn seams(&mut self, lines: &[Line]) -> (Vec<Line>, Vec<Line>) {
        let (Some((_, through)), Some(first), Some(last)) =
            (self.io.index.ends(), lines.first(), lines.last())
        else {
            return Default::default();
        };
        // Only a reply's delta continues (no read for a page that neither starts nor ends in one).
        let reply = |l: &Line| l.kind() == EventKind::AssistantText;
        let mut head = match reply(first) {
            true => self.page(first.seq(), 1, true).await.map(|p| p.lines),
            false => None,
        };
        head.take_if(|row| !row.last().is_some_and(|l| continues(l, first)));
        let mut tail = match reply(last) {
            true => Some(self.row_from(last_seq(last) + 1, through).await),
            false => None,
        };
        tail.take_if(|row| !row.first().is_some_and(|l| continues(last, l)));
        (head.unwrap_or_default(), tail.unwrap_or_default())
    }

    /// The cached lines of the row that starts at `seq` (each joining the one before it),
    /// below `stop`: read forward in growing windows, the first one line.
    async fn row_from(&mut self, seq: u64, stop: u64) -> Vec<Line> {
        let mut window = 1u64;
        let mut upto = seq;
        while upto < stop {
            upto = seq.saturating_add(window).min(stop);
            let mut lines = self.lines_from(seq, upto).await;
            if lines.first().is_none_or(|l| l.seq() != seq) {
                break;
            }
            let joined = 1 + lines
                .windows(2)
                .take_while(|w| continues(&w[0], &w[1]))
                .count();
            if joined < lines.len() || upto == stop {
                lines.truncate(joined);
                return lines;
            }
            window = window.saturating_mul(8);
        }
        Vec::new()
    }

    /// [`SessionCache::append_run`] for a writing instance; with `follows`, the run continues
    /// the open chunk wherever its first line is ([`SessionCache::append_served`]).
    async fn append_run(&mut self, run: &[Line], follows: bool) -> bool {
        let state = &self.state;
        let end = state.chunks.last().map_or(0, |c| c.end);
        let run = &run[run.iter().take_while(|l| l.seq() < end).count()..];
        let (Some(line), Some(newest)) = (run.first(), run.last()) else {
            return true; // already covered
        };
        let seq = line.seq();
        self.io.tail = None;
        let mut bytes = Vec::with_capacity(run.iter().map(|l| l.raw().len() + 1).sum());
        for line in run {
            bytes.extend_from_slice(line.raw().as_bytes());
            bytes.push(b'\n');
        }

        let last = state.chunks.last();
        let open = match last {
            Some(c) if c.kind == Kind::Open && (c.end == seq || follows) => c.clone(),
            _ => {
                if let Some(i) = state.chunks.iter().position(|c| c.kind == Kind::Open) {
                    if !self.close(i).await {
                        return false;
                    }
                }
                let open = Chunk {
                    first: seq,
                    end: seq,
                    kind: Kind::Open,
                    len: 0,
                };
                self.state.chunks.push(open.clone());
                open
            }
        };
        match self.io.store.append(&self.io.path(&open), &bytes).await {
            Ok(size) if size == open.len + bytes.len() as u64 => {
                let state = &mut *self.state;
                let chunk = state.chunks.last_mut().expect("pushed or found");
                chunk.len = size;
                chunk.end = newest.seq() + 1;
                let prev = state.cursor.replace(newest.clone());
                if self.sync_index().await == u64::MAX {
                    self.io
                        .index
                        .push(&*self.io.store, prev.as_ref(), run)
                        .await;
                }
                true
            }
            Ok(size) => {
                // Not the size this instance wrote: the blob changed under it (storage
                // cleared, another writer) or the write was cut short without an error.
                let why = format!(
                    "open chunk is {size} bytes, expected {}",
                    open.len + bytes.len() as u64
                );
                self.io.stop_writing(&StoreError::Io(why.clone()));
                self.fail(Fail::Damaged(why)).await;
                false
            }
            Err(e) => {
                self.io.stop_writing(&e);
                if open.len == 0 {
                    // The new open chunk holds nothing this instance knows of.
                    self.state.chunks.pop();
                }
                false
            }
        }
    }

    /// [`SessionCache::purge`]: forgets the chunks, and removes them unless a reader.
    async fn purge(&mut self) {
        self.io.index.reset();
        self.io.hint = None;
        self.io.held.take();
        self.io.tail = None;
        *self.state = State::default();
        if self.io.reader {
            // Removing is the writer's to do; reading them again would show what was thrown
            // away.
            self.io.blind = true;
            return;
        }
        self.io.index.mark(&*self.io.store).await; // removed all the same
        match self.io.store.remove(&self.io.dir).await {
            // Nothing is left whose layout is unknown: a writer that had stopped writes again.
            Ok(()) => {
                self.io.failed = None;
                self.io.index.gone();
            }
            Err(e) => self.io.stop_writing(&e),
        }
    }

    /// Answers a failed read: damage purges the session; a store error forgets what was
    /// known and stops writing, since the layout on disk is no longer known.
    async fn fail(&mut self, fail: Fail) {
        self.io.index.reset();
        self.io.hint = None;
        self.io.held.take();
        self.io.tail = None;
        *self.state = State::default();
        match fail {
            Fail::Damaged(why) => {
                log::info!(
                    "scrollback: purging the cache of session {:?}: {why}",
                    self.io.id
                );
                self.purge().await;
            }
            Fail::Store(e) => self.io.stop_writing(&e),
        }
    }

    /// Brings the search index up to the cached lines before its first write after an open:
    /// reads where its blob stops and folds the cached lines from there (all of the suffix
    /// when the blob is missing, damaged or ahead of the chunks: a rebuild). Returns the seq
    /// the catch-up started at (rows from there are indexed), `u64::MAX` when already synced.
    /// With indexing off, removes the index instead (once per open) and returns `u64::MAX`.
    async fn sync_index(&mut self) -> u64 {
        let io = &mut *self.io;
        if io.index.is_synced() || !io.writing() {
            return u64::MAX;
        }
        if !io.indexing {
            io.index.drop_blob(&*io.store).await;
            return u64::MAX;
        }
        if !io.index.mark(&*io.store).await {
            return u64::MAX; // unsynced: nothing is written
        }
        let path = format!("{}/{INDEX}", io.dir);
        let mut from = match IndexWriter::resume(&*io.store, &path).await {
            Ok(from) => from,
            Err(e) => {
                log::info!("scrollback: the search index {path} cannot be read: {e}");
                return u64::MAX; // unsynced: nothing is written
            }
        };
        let Some((first, end)) = self.known_suffix() else {
            return u64::MAX;
        };
        if from > end {
            from = IndexWriter::rebuild(&*self.io.store, &path, "ahead of the chunks")
                .await
                .unwrap_or(end);
        }
        let from = from.max(first);
        let lines = self.lines_from(from, end).await;
        if self.known_suffix().is_none() {
            return u64::MAX; // the read found damage and purged the session
        }
        self.io.index.start(from);
        self.io.index.push(&*self.io.store, None, &lines).await;
        from
    }

    /// The suffix's range.
    fn known_suffix(&self) -> Option<(u64, u64)> {
        coverage::suffix_range(&self.state.chunks)
    }

    /// The cached lines of the suffix from `from` to `end`, oldest first (read backwards in
    /// pages); what could not be read is left out.
    async fn lines_from(&mut self, from: u64, end: u64) -> Vec<Line> {
        let mut pages = Vec::new();
        let mut before = end;
        while before > from {
            // Never more lines than seqs left: the walk stops at `from`, not a page further.
            let limit = (before - from).min(1024) as usize;
            let Some(page) = self.page(before, limit, false).await else {
                break;
            };
            let oldest = page.lines[0].seq();
            pages.push(page.lines);
            if page.at_start || oldest <= from {
                break;
            }
            before = oldest;
        }
        self.io.hint = None;
        self.io.held.take();
        let mut out: Vec<Line> = pages.into_iter().rev().flatten().collect();
        out.retain(|l| l.seq() >= from);
        out
    }

    /// [`SessionCache::none_between`] for a writing instance.
    async fn none_between(&mut self, from: u64, before: u64) -> bool {
        let chunks = &self.state.chunks;
        if from >= before || chunks.iter().any(|c| c.overlaps(from, before)) {
            return false;
        }
        let Some(i) = chunks.iter().position(|c| c.first == before) else {
            return false;
        };
        let old = chunks[i].clone();
        let new = Chunk {
            first: from,
            ..old.clone()
        };
        let (old_path, new_path) = (self.io.path(&old), self.io.path(&new));
        if let Err(e) = self.io.store.rename(&old_path, &new_path).await {
            self.io.stop_writing(&e);
            return false;
        }
        self.state.chunks[i] = new;
        self.io.hint = None;
        self.io.tail = None;
        self.io.held.take();
        true
    }

    /// Closes the open chunk `chunks[i]`: renames it with its real end.
    async fn close(&mut self, i: usize) -> bool {
        let open = self.state.chunks[i].clone();
        let closed = Chunk {
            kind: Kind::Raw,
            ..open.clone()
        };
        if let Err(e) = self
            .io
            .store
            .rename(&self.io.path(&open), &self.io.path(&closed))
            .await
        {
            self.io.stop_writing(&e);
            return false;
        }
        self.state.chunks[i] = closed;
        true
    }
}

impl<S: Store> Io<S> {
    /// Lists and repairs the chunks, and reads the cursor.
    async fn load(&mut self) -> Result<State, Fail> {
        if self.blind {
            if !self.reader {
                // Made the writer after it purged as a reader: the purge is its to finish.
                self.index.mark(&*self.store).await;
                self.store.remove(&self.dir).await?;
                self.blind = false;
            }
            return Ok(State::default());
        }
        let mut chunks = Vec::new();
        let mut open = None;
        let mut empty = Vec::new();
        for entry in self.store.list(&self.dir).await? {
            match parse_chunk_name(&entry.name) {
                _ if entry.is_dir => {}
                // A chunk holds a line at least: an empty one is a write that never finished
                // (OPFS creates the blob, then fills it: a full disk, a tab closed in
                // between). Not served: a closed one's range is a gap, fetched again, never a
                // seam that a walk crosses into the chunk below, and an open one is no open
                // chunk (the next, after a seq jump, would make two); the writer removes it.
                Some(_) if entry.size == 0 => empty.push(entry.name),
                Some((first, Some(end), kind)) => chunks.push(Chunk {
                    first,
                    end,
                    kind,
                    len: entry.size,
                }),
                Some((first, None, _)) if open.is_none() => open = Some((first, entry.size)),
                Some(_) => return Err(Fail::Damaged("two open chunks".into())),
                None => {} // not a chunk (the touch blob, or a stranger): never served
            }
        }
        if !self.reader {
            for name in empty {
                self.store.remove(&format!("{}/{name}", self.dir)).await?;
            }
        }
        if let Some((first, size)) = open {
            chunks.extend(self.repair_open(first, size).await?);
        }
        if !coverage::sort_checked(&mut chunks) {
            return Err(Fail::Damaged("overlapping chunks".into()));
        }
        let Some(newest) = chunks.last() else {
            return Ok(State::default());
        };
        if newest.kind == Kind::Rows {
            return Err(Fail::Damaged("the newest chunk is coalesced".into()));
        }
        let mut reader = BackLines::new(self.path(newest), newest.clone(), newest.len);
        let cursor = match reader.prev(&self.reads()).await? {
            Some((line, _)) if line.seq() + 1 == newest.end => line,
            _ => {
                return Err(Fail::Damaged(
                    "the newest chunk does not end at its end".into(),
                ))
            }
        };
        Ok(State {
            chunks,
            cursor: Some(cursor),
        })
    }

    /// Reads the open chunk's tail: cuts a torn last line (a fragment without its newline, or a
    /// last line that does not parse), learns its end from the last good line. `None` when
    /// nothing is left of it.
    async fn repair_open(&mut self, first: u64, size: u64) -> Result<Option<Chunk>, Fail> {
        let mut chunk = Chunk {
            first,
            end: u64::MAX,
            kind: Kind::Open,
            len: size,
        };
        let path = self.path(&chunk);
        let mut good = size;
        // A fragment without its newline: cut back to the last newline.
        let n = (size as usize).min(READ_AHEAD);
        let tail = self.store.read(&path, size - n as u64, n).await?;
        if tail.len() != n {
            return Err(Fail::Store(StoreError::Io(format!(
                "{path} changed while being read"
            ))));
        }
        let ends_whole = tail.last() == Some(&b'\n');
        let mut cut = false;
        if !ends_whole {
            good = match tail.iter().rposition(|&b| b == b'\n') {
                Some(i) => size - n as u64 + i as u64 + 1,
                None if n as u64 == size => 0,
                // A torn line longer than what was read (a large tool output): the last
                // newline is further back (the line ending at the byte after it starts there).
                None => self.line_start_before(&path, size - n as u64 + 1).await?,
            };
            cut = true;
        }
        self.tail = Some(Tail {
            path: path.clone(),
            at: size - n as u64,
            bytes: tail,
        });
        let mut last = None;
        if good > 0 {
            chunk.len = good;
            let mut reader = BackLines::new(path.clone(), chunk.clone(), good);
            match reader.prev(&self.reads()).await {
                Ok(found) => last = found,
                // A whole last line that does not parse: torn in a way that kept its newline.
                Err(Fail::Damaged(_)) if !cut => {
                    good = self.line_start_before(&path, good).await?;
                    chunk.len = good;
                    if good > 0 {
                        let mut reader = BackLines::new(path.clone(), chunk.clone(), good);
                        last = reader.prev(&self.reads()).await?;
                    }
                }
                Err(fail) => return Err(fail),
            }
        }
        if good < size {
            self.tail = None;
        }
        if good < size && self.writing() {
            let result = match good {
                0 => self.store.remove(&path).await,
                _ => self.store.truncate(&path, good).await,
            };
            if let Err(e) = result {
                self.stop_writing(&e);
            }
        }
        Ok(last.map(|(line, _)| Chunk {
            end: line.seq() + 1,
            len: good,
            ..chunk
        }))
    }

    /// The start of the line that ends at `end` (a line boundary).
    async fn line_start_before(&self, path: &str, end: u64) -> Result<u64, Fail> {
        let mut pos = end - 1; // the line's newline
        loop {
            let n = (pos as usize).min(BLOCK);
            let block = self.store.read(path, pos - n as u64, n).await?;
            if let Some(i) = block.iter().rposition(|&b| b == b'\n') {
                return Ok(pos - n as u64 + i as u64 + 1);
            }
            if n as u64 == pos {
                return Ok(0);
            }
            pos -= n as u64;
        }
    }
}

impl<S: Store> Opened<'_, S> {
    /// Walks back from `before` in suffix chunk `at` and older ones.
    async fn walk(
        &mut self,
        at: usize,
        before: u64,
        limit: usize,
        rows: bool,
    ) -> Result<Page, Fail> {
        let chunks = &self.state.chunks;
        let start = coverage::suffix_start(chunks);
        let chunk = chunks[at].clone();
        let io = &*self.io;
        let offset = match io.hint {
            Some(h) if h.chunk_first == chunk.first && h.seq == before && h.offset <= chunk.len => {
                h.offset
            }
            _ => seek(&io.reads(), &io.path(&chunk), &chunk, before).await?,
        };
        let mut reader = BackLines::new(io.path(&chunk), chunk, offset);
        let mut at = at;
        let mut walk = RowWalk::new(limit);
        let mut out: Vec<Line> = Vec::new();
        let mut oldest = None;
        let mut at_start = false;
        loop {
            if !rows && out.len() == limit {
                break;
            }
            let Some((line, offset)) = reader.prev(&io.reads()).await? else {
                if at == start {
                    at_start = true;
                    break;
                }
                at -= 1;
                let chunk = self.state.chunks[at].clone();
                reader = BackLines::new(io.path(&chunk), chunk.clone(), chunk.len);
                continue;
            };
            if line.seq() >= before {
                continue;
            }
            if rows && !walk.take(&line) {
                break;
            }
            oldest = Some(Hint {
                chunk_first: reader.chunk().first,
                seq: line.seq(),
                offset,
            });
            out.push(line);
        }
        if let Some(hint) = oldest {
            self.io.hint = Some(hint);
            // A walk that stopped on the suffix's very first line reached its start too.
            let first = self.state.chunks[start].first;
            at_start |= hint.seq == first;
        }
        out.reverse();
        Ok(Page {
            lines: out,
            at_start,
        })
    }
}

/// The bytes of every blob below `dir` (one level of folders, as a session has).
pub(super) async fn dir_size<S: Store>(store: &S, dir: &str) -> Result<u64, StoreError> {
    Ok(store.list(dir).await?.iter().map(|e| e.size).sum())
}
