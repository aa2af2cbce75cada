//! The writer's side: the session's index blob, appended as rows complete.

use super::doc::{Doc, Folder};
use super::live::{Live, Shared};
use super::segment::{SEGMENT, SEGMENT_NEW};
use super::{marks, pack};
use crate::protocol::Line;
use crate::store::{Store, StoreError};

/// The index blob's name in a session's folder (not a chunk name, so the chunk cache never
/// serves it; removed with the folder).
pub const INDEX: &str = "search.jsonl";

/// The bytes read from the blob's end to find its last document, then at most.
const FIRST_TAIL: usize = 16 * 1024;
const TAIL: usize = 512 * 1024;

/// The last whole line of a blob's `tail` (`start`: the tail is the whole blob) and where the
/// whole lines end (a torn fragment after them is to be cut).
fn last_line(tail: &[u8], start: bool) -> Option<(std::ops::Range<usize>, usize)> {
    let good = tail.iter().rposition(|&b| b == b'\n')? + 1;
    let from = match tail[..good - 1].iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None if start => 0,
        None => return None,
    };
    Some((from..good - 1, good))
}

/// Removes the index blob at `path` and the segment built from it (a reader would also notice
/// that the segment does not match), with what a build cut short left under its new name.
pub async fn remove<S: Store>(store: &S, path: &str) -> Result<(), StoreError> {
    store.remove(path).await?;
    if let Some((dir, _)) = path.rsplit_once('/') {
        for name in [SEGMENT, SEGMENT_NEW] {
            store.remove(&format!("{dir}/{name}")).await?;
        }
    }
    Ok(())
}

/// The index writer of one session: folds appended lines into rows and appends each row to the
/// blob once it is complete, so an appended delta costs O(delta) (one append per completed row).
///
/// It starts unsynced: before its first write the caller reads where the blob stops
/// ([`IndexWriter::resume`]) and feeds it the cached lines from there ([`IndexWriter::start`]).
#[derive(Debug, Default)]
pub struct IndexWriter {
    /// The fold, shared with this worker's queries through `live` (they search its open row).
    folder: Option<Shared>,
    /// `live`'s removals when the fold was shared ([`Live::tracks`]).
    shared_at: u64,
    /// A write failed: nothing more is written until the next resync.
    stopped: bool,
    /// Where the fold is shared with queries, and this session's key there.
    live: Live,
    key: String,
    /// The blob's path.
    path: String,
    /// [`IndexWriter::drop_blob`] ran since the last reset.
    dropped: bool,
    /// The session was marked for the search pack's readers since the last reset
    /// ([`IndexWriter::mark`]).
    marked: bool,
}

impl IndexWriter {
    /// The writer of the blob at `path`, sharing its fold and telling its writes in `live`
    /// under `key` (the session's folder name).
    pub fn new(live: Live, key: String, path: String) -> Self {
        IndexWriter {
            live,
            key,
            path,
            ..IndexWriter::default()
        }
    }

    /// Forgets the fold: the next write resyncs from the blob (after a reopen, purge, or a
    /// change of role).
    pub fn reset(&mut self) {
        if let Some(folder) = self.folder.take() {
            self.live.untrack(&self.key, &folder);
        }
        self.stopped = false;
        self.dropped = false;
        self.marked = false;
        self.live.changed(&self.key);
    }

    /// Marks the session ([`marks::mark`]) before the first change of its index blob or
    /// folder since the last reset (a turn of the writer role, an open, a purge), so that a
    /// worker that starts does not take the server's pack's record of the blob for the blob.
    /// A mark that cannot be written removes the pack instead (one built while this writer
    /// holds the role records the session as held). `false` when neither could be done: the
    /// index is then not to be changed.
    pub async fn mark<S: Store>(&mut self, store: &S) -> bool {
        if self.marked {
            return true;
        }
        let Some((session, _)) = self.path.rsplit_once('/') else {
            return false;
        };
        let Err(e) = marks::mark(store, session).await else {
            self.marked = true;
            return true;
        };
        log::info!("scrollback: could not mark {session} for search: {e}");
        let server = session.rsplit_once('/').map_or("", |(server, _)| server);
        self.marked = store.remove(&pack::path(server)).await.is_ok();
        self.marked
    }

    /// The session's folder was removed: the other contexts are told ([`Live::gone`]).
    pub fn gone(&self) {
        self.live.gone(&self.key);
    }

    /// Whether it knows where the blob stops.
    pub fn is_synced(&self) -> bool {
        self.folder.is_some()
    }

    /// Where the blob at `path` stops: the seq from which the cached lines must be fed again (0
    /// when there is no blob). A torn last line is cut off; a last line that does not read
    /// removes the blob (a rebuild from the chunks follows). Reads at most the blob's tail.
    pub async fn resume<S: Store>(store: &S, path: &str) -> Result<u64, StoreError> {
        let Some(meta) = store.stat(path).await? else {
            return Ok(0);
        };
        for window in [FIRST_TAIL, TAIL] {
            let n = (meta.size as usize).min(window);
            let from = meta.size - n as u64;
            let tail = store.read(path, from, n).await?;
            match last_line(&tail, from == 0) {
                Some((range, good)) => {
                    let Ok(doc) = serde_json::from_slice::<Doc>(&tail[range]) else {
                        return Self::rebuild(store, path, "its last line does not read").await;
                    };
                    let good = from + good as u64;
                    if good < meta.size {
                        store.truncate(path, good).await?;
                    }
                    return Ok(doc.at);
                }
                None if from == 0 => break,
                None => {}
            }
        }
        Self::rebuild(store, path, "no whole last line").await
    }

    /// Removes a damaged blob: the index is rebuilt from the chunks (from seq 0).
    pub async fn rebuild<S: Store>(store: &S, path: &str, why: &str) -> Result<u64, StoreError> {
        log::info!("scrollback: rebuilding the search index {path}: {why}");
        remove(store, path).await?;
        Ok(0)
    }

    /// With indexing off, the first write after an open removes the blob, which that write
    /// and the ones after it leave behind: an index is whole or absent, never one with holes
    /// (a writer with indexing on rebuilds it from the chunks). Once per open; a `stat` when
    /// there is none, as [`IndexWriter::resume`] takes.
    pub async fn drop_blob<S: Store>(&mut self, store: &S) {
        if std::mem::replace(&mut self.dropped, true) {
            return;
        }
        if let Ok(None) = store.stat(&self.path).await {
            return;
        }
        if !self.mark(store).await {
            return;
        }
        match remove(store, &self.path).await {
            Ok(()) => self.live.changed(&self.key),
            Err(e) => log::info!(
                "scrollback: could not remove the search index {}: {e}",
                self.path
            ),
        }
    }

    /// Starts folding at `at` (what [`IndexWriter::resume`] answered, or the suffix's start).
    /// The first row it writes is marked [`Doc::welds`]: it may be a reply that a page
    /// welded while it streamed, whose piece below was written then (nothing else has a seq
    /// in it: every row ending below `at` was written, none from it).
    pub fn start(&mut self, at: u64) {
        let folder = Shared::new(Folder::at(at, true));
        self.shared_at = self.live.removals();
        self.live.track(&self.key, &folder);
        self.folder = Some(folder);
        self.stopped = false;
        self.live.changed(&self.key); // the blob may have been cut or removed
    }

    /// Where the fold stands while it writes: every row below the first seq is indexed, and
    /// the second is the seq after the newest line folded (the open row, if any, between).
    pub fn ends(&self) -> Option<(u64, u64)> {
        let folder = self.folder.as_ref().filter(|_| !self.stopped)?.lock();
        Some((folder.end(), folder.through()))
    }

    /// Folds appended lines (`prev`: the cached line just before them) and appends the rows
    /// they complete, in one write.
    pub async fn push<S: Store>(&mut self, store: &S, prev: Option<&Line>, lines: &[Line]) {
        let Some(shared) = self.folder.as_ref().filter(|_| !self.stopped) else {
            return;
        };
        if !self.live.tracks(self.shared_at) {
            // A removal dropped it (its session or every one): its row is searched again.
            self.shared_at = self.live.removals();
            self.live.track(&self.key, shared);
        }
        let mut done = Vec::new();
        let live_end = {
            let mut folder = shared.lock();
            folder.push_all(prev, lines, &mut done);
            folder.end()
        };
        // Each row records how far the index holds once it is written: a write cut short
        // (a crash) keeps whole rows only, and resuming from the last one's `at` re-folds
        // every row after it. Only the last holds the live end.
        let mut docs = done.iter_mut().peekable();
        while let Some(doc) = docs.next() {
            doc.at = if docs.peek().is_some() {
                doc.end
            } else {
                live_end
            };
        }
        self.write(store, &done).await;
    }

    /// Appends the rows of a history page stored below the live end (the live end unchanged).
    /// Rows starting at or above `below` are left out (already indexed by a catch-up).
    ///
    /// A page's edge may cut a reply whose other part is cached: `head` is the cached row
    /// ending right below the page that its first line joins, `tail` the cached lines from
    /// right above it that join its last line (empty when none). The rows they make with the
    /// page are written whole and marked [`Doc::welds`] (they replace the pieces indexed
    /// before); a tail that is the row still open gives that row its start instead.
    pub async fn push_page<S: Store>(
        &mut self,
        store: &S,
        lines: &[Line],
        below: u64,
        head: &[Line],
        tail: &[Line],
    ) {
        let Some(shared) = self.folder.as_ref().filter(|_| !self.stopped) else {
            return;
        };
        let mut page = Folder::default();
        let mut docs = Vec::new();
        page.push_all(None, head, &mut docs);
        page.push_all(head.last(), lines, &mut docs);
        // The page's last row continued by the tail (which holds only lines joining it).
        let mut whole = page.clone();
        whole.push_all(lines.last(), tail, &mut docs);
        let welded = whole.into_open();
        let (complete, at) = {
            let mut folder = shared.lock();
            let complete = folder.end();
            let open = folder.pending().map(|d| (d.seq, d.end));
            match (welded, open, tail.first()) {
                (Some(mut row), Some((seq, end)), Some(above))
                    if seq == above.seq() && row.end == end =>
                {
                    // The row still streaming: it starts lower now, and replaces, once
                    // written whole, the page's piece, written now as it stands (what another
                    // tab finds meanwhile, and what a reopen resumes from: the live end moved
                    // to its start).
                    row.welds = true;
                    folder.weld_open(row);
                    docs.extend(page.into_open());
                }
                (row, _, _) => docs.extend(row),
            }
            (complete, folder.end())
        };
        let (first, above) = (lines.first(), tail.first());
        for doc in &mut docs {
            doc.at = at;
            let welds_head = !head.is_empty() && first.is_some_and(|l| doc.seq < l.seq());
            let welds_tail = above.is_some_and(|l| doc.end > l.seq());
            doc.welds = welds_head || welds_tail;
        }
        docs.retain(|d| d.end <= complete && d.seq < below);
        self.write(store, &docs).await;
    }

    async fn write<S: Store>(&mut self, store: &S, docs: &[Doc]) {
        if docs.is_empty() {
            return;
        }
        // Sized for the texts and the fields around them, so that the writing never regrows it.
        let mut bytes = Vec::with_capacity(docs.iter().map(|d| d.text.len() + 128).sum());
        for doc in docs {
            doc.write_line(&mut bytes);
        }
        self.live.changed(&self.key);
        match store.append(&self.path, &bytes).await {
            Ok(size) => self.live.written(&self.key, size),
            Err(e) => {
                log::info!("scrollback: the search index {} stopped: {e}", self.path);
                self.stopped = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn delta(seq: u64, text: &str) -> Line {
        let event = serde_json::json!({"type": "assistantText", "text": text, "messageId": "m"});
        Line::parse(&serde_json::json!({"seq": seq, "ts": 1.0, "event": event}).to_string())
            .unwrap()
    }

    /// The open row a query searches is the writer's own fold as it grows; a removal takes it
    /// away, and the writer's next delta shares it again (a view still streaming); a resync
    /// takes it away until the writer starts over.
    #[test]
    fn the_open_row_is_the_writers_fold() {
        pollster::block_on(async {
            let (store, live) = (MemoryStore::new(), Live::default());
            let mut writer = IndexWriter::new(live.clone(), "k".into(), "d/k/search.jsonl".into());
            let text = || live.open("k").map(|d| d.text);
            let lines = [
                delta(1, "about the okapi"),
                delta(2, " and"),
                delta(3, " zebra"),
            ];
            writer.start(1);
            writer.push(&store, None, &lines[..1]).await;
            assert_eq!(text().as_deref(), Some("about the okapi"));
            live.removed_all();
            assert_eq!(text(), None);
            writer.push(&store, Some(&lines[0]), &lines[1..2]).await;
            assert_eq!(text().as_deref(), Some("about the okapi and"));
            live.removed("k");
            assert_eq!(text(), None);
            writer.push(&store, Some(&lines[1]), &lines[2..]).await;
            assert_eq!(text().as_deref(), Some("about the okapi and zebra"));
            writer.reset();
            assert_eq!((text(), live.streaming().len()), (None, 0));
        });
    }
}
