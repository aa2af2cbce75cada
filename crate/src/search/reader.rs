//! The reader's side: the index blobs loaded into memory (incrementally, as they grow), kept
//! fresh and warm, and a query's way through them (ranked by [`super::rank`]).

use super::doc::Doc;
use super::live::Live;
use super::marks::{self, Trust};
use super::pack::{self, Pack};
use super::postings::Indexed;
use super::query::Query;
use super::rank::{rank, Hit, Ranked};
use super::segment::{Segment, SEGMENT};
use super::writer::INDEX;
use crate::chunks::names::{decode, encode};
use crate::store::{Meta, Store, StoreError};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The bytes kept from before a blob's end as read, compared when it is read again: if they
/// changed, the blob was rebuilt under us.
const EDGE: usize = 64;
/// The bytes of segment documents' texts kept per session after a query read them from the
/// blob ([`Loaded::keep_text`]).
const TEXTS_KEPT: usize = 64 * 1024;

/// A blob loaded: how far, the bytes before that, its segment (if one covers its start), and
/// the documents past the segment, in memory.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    size: u64,
    /// The blob's last bytes before `size` (at most [`EDGE`]): what was read is still there
    /// only if they are (a blob rebuilt from the same first row, grown past `size`, is another).
    edge: Vec<u8>,
    pub(super) segment: Option<Segment>,
    /// A segment of this session did not read: its documents come from the blob alone, in
    /// this worker, until a build replaces the segment (and forgets this).
    no_segment: bool,
    pub(super) index: Indexed,
    /// Documents a welded one read after them replaced (ids as in the postings), and the
    /// documents with words and the words among them.
    pub(super) dead: HashSet<u32>,
    dead_worded: u32,
    dead_words: u64,
    /// The blob's size and stamp as a `stat` found them right before the read that brought
    /// `size` up to the blob's end (`None`: not asked): a recheck that finds them again has
    /// nothing to read.
    seen: Option<Meta>,
    /// Texts of segment documents that queries read from the blob (their snippets, their
    /// phrase checks), by id, for the queries after: typed a letter at a time, they show
    /// mostly the same hits. At most [`TEXTS_KEPT`] bytes; gone with the rest when the blob
    /// is read again from its start.
    pub(super) texts: HashMap<u32, String>,
    texts_bytes: usize,
    /// Each document in memory's line's bytes in the blob (what a [`pack`] needs of it), and
    /// whether a line past the segment did not read (the session is then left out of it).
    lines: Vec<u32>,
    gaps: bool,
}

impl Loaded {
    /// The documents in the segment (the ids of those in memory start there).
    pub(super) fn base(&self) -> u32 {
        self.segment.as_ref().map_or(0, |s| s.docs)
    }

    /// Keeps the text of segment document `doc`, read from the blob, for the next queries;
    /// past [`TEXTS_KEPT`] bytes the texts kept until then go (one longer is not kept).
    fn keep_text(&mut self, doc: u32, text: String) {
        if text.len() > TEXTS_KEPT || self.texts.contains_key(&doc) {
            return;
        }
        if self.texts_bytes + text.len() > TEXTS_KEPT {
            self.texts.clear();
            self.texts_bytes = 0;
        }
        self.texts_bytes += text.len();
        self.texts.insert(doc, text);
    }

    /// Adds a document read from the blob: a welded one first replaces the documents before
    /// it whose seq it covers (the pieces of its row indexed until then).
    fn add(&mut self, doc: Doc) {
        if doc.welds {
            self.bury(doc.seq..doc.end);
        }
        self.index.add(doc);
    }

    /// Marks dead the documents whose seq lies in `seqs`; answers those it marked, with
    /// their lengths (what [`Loaded::unbury`] takes back).
    fn bury(&mut self, seqs: std::ops::Range<u64>) -> Vec<(u32, u32)> {
        let base = self.base();
        let in_memory = self.index.docs.iter().enumerate();
        let pieces: Vec<(u32, u32)> = (self.segment.iter())
            .flat_map(|s| s.docs_in(seqs.clone()))
            .chain(
                in_memory
                    .filter(|(_, (d, _))| seqs.contains(&d.seq))
                    .map(|(i, (_, len))| (base + i as u32, *len)),
            )
            .filter(|&(id, _)| !self.dead.contains(&id))
            .collect();
        for &(id, len) in &pieces {
            self.dead.insert(id);
            self.dead_worded += u32::from(len > 0);
            self.dead_words += u64::from(len);
        }
        pieces
    }

    /// Brings back documents [`Loaded::bury`] marked.
    fn unbury(&mut self, pieces: Vec<(u32, u32)>) {
        for (id, len) in pieces {
            self.dead.remove(&id);
            self.dead_worded -= u32::from(len > 0);
            self.dead_words -= u64::from(len);
        }
    }

    /// Whether the blob holds `row` (a reply still streaming, from this worker's memory)
    /// already, or a row after it: another tab's writer went on with it, and this copy is
    /// stale. A document inside it is not (a piece of it a page welded).
    fn holds(&self, row: &Doc) -> bool {
        let segment = self.segment.as_ref().and_then(Segment::newest);
        segment.is_some_and(|seq| seq >= row.end)
            || (self.index.docs.iter())
                .any(|(d, _)| d.seq >= row.end || (d.seq >= row.seq && d.end >= row.end))
    }

    /// The documents with words that ranking counts (those replaced left out).
    pub(super) fn worded(&self) -> u64 {
        let segment = self.segment.as_ref().map_or(0, |s| s.worded);
        u64::from(segment + self.index.worded - self.dead_worded)
    }

    /// Their words.
    pub(super) fn words(&self) -> u64 {
        let segment = self.segment.as_ref().map_or(0, |s| s.words);
        segment + self.index.words - self.dead_words
    }
}

/// The bytes of a blob's end read beside its segment's header on a fresh load: what a segment
/// built in idle time leaves past it until the next build (at least
/// [`MIN_TAIL`](super::segment::MIN_TAIL)) and the bytes before it that are compared; a small
/// blob without a segment is whole in it.
const END_READ: usize = super::segment::MIN_TAIL as usize + EDGE;

/// How often a query re-reads every session's blob from the store (for what another tab's
/// writer did: this worker's own writes are told through [`Live`]), in milliseconds. A worker
/// rechecks in idle time more often than this
/// ([`Cache::recheck_search`](crate::chunks::Cache::recheck_search)), so that its queries do
/// not.
pub const RECHECK_MS: u64 = 30_000;

/// The index blobs of one server's sessions as loaded, by session folder, with their ids:
/// each one's segment header (the rest read by the queries, or held in memory once the worker
/// warmed up) and the documents past it in memory. A query reads only what a blob gained
/// since it was loaded (a recheck, only of the blobs whose size or stamp changed); a blob
/// that shrank or whose bytes before the end read last changed was rebuilt and is reloaded.
/// Which blobs to look at: those this worker changed ([`Live`]), and every one on the first
/// query and at most every [`RECHECK_MS`] after (the store is the truth: a writer in another
/// tab is seen then).
/// Queries take turns (an async lock): one loads, the next finds it loaded.
#[derive(Default)]
pub struct Memo(async_lock::Mutex<Loads>);

#[derive(Default)]
struct Loads {
    sessions: HashMap<String, (String, Loaded)>,
    /// When every session was last looked at in the store (0: never).
    checked: u64,
    /// The worker warmed up: segments are held in memory as they are loaded.
    warm: bool,
    /// Sessions a warm-up listed and has not loaded yet: a query meanwhile loads them itself.
    pending: HashSet<String>,
    /// The server's [`Pack`], read by the first query when it comes before the warm-up (its
    /// sessions' parts hold it until the warm-up loads their own segments), and whether it
    /// was looked for.
    pack: Option<Arc<Pack>>,
    pack_tried: bool,
    /// A session's part of the pack was not its blob's: the pack is built again.
    pack_missed: bool,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo")
    }
}

impl Memo {
    /// Forgets session `key` as loaded (its segment was just built: the next query reads it
    /// rather than keep every document in memory).
    pub(crate) async fn forget(&self, key: &str) {
        self.0.lock().await.sessions.remove(key);
    }

    /// The sessions whose blob, as loaded, holds a line that does not read (damaged where no
    /// write cuts: its row would never be found): their index is to be rebuilt from the chunks
    /// ([`crate::chunks::Cache::search`]).
    pub(crate) async fn damaged(&self) -> Vec<String> {
        let loads = self.0.lock().await;
        let damaged = loads.sessions.iter().filter(|(_, (_, l))| l.gaps);
        damaged.map(|(key, _)| key.clone()).collect()
    }
}

/// The session folders under `dir` (a server's folder); `None` when it cannot be listed.
async fn session_folders<S: Store>(store: &S, dir: &str) -> Option<Vec<String>> {
    let entries = store.list(dir).await.ok()?;
    let keys = entries
        .into_iter()
        .filter(|e| e.is_dir && decode(&e.name).is_some());
    Some(keys.map(|e| e.name).collect())
}

/// Brings the memo up to the store: every session (listed again) when `full`, else only those
/// in `changed`, all at once. A session whose blob is gone leaves the memo.
async fn load<S: Store>(
    store: &S,
    dir: &str,
    loads: &mut Loads,
    changed: &HashSet<String>,
    full: bool,
) {
    // The sessions' blobs' sizes and stamps, taken beside the pack's read.
    let mut stats = HashMap::new();
    let keys: Vec<String> = if full {
        // A worker's first query, before its warm-up: from the server's pack, which with the
        // marks names every session (the server's folder is listed only without them).
        let cold = loads.sessions.is_empty() && !loads.warm && !loads.pack_tried;
        let (pack, seen, known) = match cold {
            true => open_pack(store, dir).await,
            false => Default::default(),
        };
        let listed = match known {
            Some(known) => Some(known),
            None => session_folders(store, dir).await,
        };
        stats = seen;
        if cold {
            (loads.pack, loads.pack_tried) = (pack, true);
        }
        let Some(listed) = listed else {
            loads.sessions.clear();
            return;
        };
        loads.sessions.retain(|k, _| listed.contains(k));
        loads.checked = crate::store::now_millis().max(1);
        listed
    } else {
        changed.iter().cloned().collect()
    };
    let whole = loads.warm;
    let pack = loads.pack.clone().filter(|_| !whole);
    let work = keys.into_iter().filter_map(|key| {
        let id = decode(&key)?;
        let known = loads.sessions.remove(&key);
        // A recheck of a session loaded before asks for its blob's size and stamp first (a
        // first load does not wait for that).
        let look = full && known.is_some();
        let fresh = known.is_none();
        let (_, mut loaded) = known.unwrap_or_default();
        let pack = pack.clone().zip(stats.remove(&key)).filter(|_| fresh);
        Some(async move {
            let folder = format!("{dir}/{key}");
            let packed = match pack {
                Some((pack, seen)) => {
                    from_pack(store, &folder, &key, &mut loaded, &pack, seen).await
                }
                None => None,
            };
            let (ok, missed) = match packed {
                Some(Some(found)) => (found, false),
                // Its part was not this blob's: loaded the usual way.
                Some(None) => {
                    loaded = Loaded::default();
                    (
                        refresh(store, &folder, &mut loaded, whole, look).await,
                        true,
                    )
                }
                None => (
                    refresh(store, &folder, &mut loaded, whole, look).await,
                    false,
                ),
            };
            loaded.index.prepare();
            (ok.then_some((key, (id, loaded))), missed)
        })
    });
    let done = futures::future::join_all(work.collect::<Vec<_>>()).await;
    for (found, missed) in done {
        loads.pack_missed |= missed;
        loads.sessions.extend(found);
    }
}

/// Brings `loaded` up to the blob of the session folder `dir`; `false` when there is no blob
/// or it cannot be read. Given `look`, the blob's size and stamp are asked first, and a blob
/// that has them as the last read left them is not read (a `stat` costs less than a read:
/// a recheck of every session in OPFS was a read each). A fresh load starts from the segment
/// when one covers the blob's start (its last bytes matching the blob's; held in memory when
/// `whole`), and reads the JSON lines past it.
async fn refresh<S: Store>(
    store: &S,
    dir: &str,
    loaded: &mut Loaded,
    whole: bool,
    look: bool,
) -> bool {
    let seen = match look {
        true => match store.stat(&format!("{dir}/{INDEX}")).await {
            Ok(Some(meta)) if loaded.seen == Some(meta) => return true,
            Ok(Some(meta)) => Some(meta),
            Ok(None) | Err(_) => return false,
        },
        false => None,
    };
    loaded.seen = None;
    let found = read_up(store, dir, loaded, whole).await;
    if found {
        // Taken before the read: a blob that grew meanwhile is read again at the next look.
        loaded.seen = seen;
    }
    found
}

/// The server's pack; the size and stamp of the blob of each session it holds (by folder):
/// the pack's record where the [`marks`] listed before it was read say no change can have
/// come since, else a `stat`, asked beside the header's read; and, with the marks listed,
/// every session with a blob (those the pack holds and those marked).
async fn open_pack<S: Store>(
    store: &S,
    dir: &str,
) -> (
    Option<Arc<Pack>>,
    HashMap<String, Stat>,
    Option<Vec<String>>,
) {
    // Listed before the pack is read, never beside: a build removes the marks its pack
    // records once it is in place (see `marks`).
    let listed = marks::list(store, dir).await;
    let Some(opening) = Pack::open(store, dir).await else {
        return (None, HashMap::new(), None);
    };
    let keys: Vec<String> = opening
        .keys()
        .filter(|k| decode(k).is_some())
        .cloned()
        .collect();
    // Every session with a blob: those the pack holds, and those marked since.
    let known = listed.as_ref().map(|listed| {
        let marked = listed
            .keys()
            .filter(|k| !keys.contains(k) && decode(k).is_some());
        keys.iter().chain(marked).cloned().collect()
    });
    let asks: Vec<(String, Option<Option<Meta>>)> = (keys.into_iter())
        .map(|key| {
            let trusted = (listed.as_ref()).and_then(|listed| opening.trusted(&key, listed));
            (key, trusted)
        })
        .collect();
    let stats = asks.into_iter().map(|(key, trusted)| async move {
        let seen = match trusted {
            Some(meta) => Ok(meta),
            None => store.stat(&format!("{dir}/{key}/{INDEX}")).await,
        };
        (key, seen)
    });
    let (pack, stats) = futures::join!(
        opening.finish(store),
        futures::future::join_all(stats.collect::<Vec<_>>())
    );
    let known = known.filter(|_| pack.is_some());
    (pack, stats.into_iter().collect(), known)
}

/// A `stat`'s answer.
type Stat = Result<Option<Meta>, StoreError>;

/// Starts `loaded` (fresh) from session `key`'s part of `pack`, given its blob's `stat`
/// (taken before this): a read only when the blob is not the one the pack recorded (of what
/// it gained past the part, its last bytes compared). `None`: the pack does not hold the
/// session; `Some(None)`: its part is not this blob's (rebuilt under it); else whether there
/// is a blob.
async fn from_pack<S: Store>(
    store: &S,
    dir: &str,
    key: &str,
    loaded: &mut Loaded,
    pack: &Arc<Pack>,
    stat: Stat,
) -> Option<Option<bool>> {
    let (part, recorded) = pack.part(key)?;
    let seen = match stat {
        Ok(Some(_)) if part.covered == 0 => return None, // a blob since: the usual way
        Ok(Some(meta)) => meta,
        Ok(None) => return Some(Some(false)),
        Err(_) => return None,
    };
    // The blob as the pack recorded it ends where the part does, with the part's last bytes.
    let end = match seen == recorded && recorded.size == part.covered {
        true => Ok((part.covered, part.edge.clone())),
        false => Err(StoreError::Io("grown past the pack".into())),
    };
    let found = from_segment(store, dir, loaded, part, false, end).await;
    if found == Some(true) {
        loaded.seen = Some(seen); // taken before the read, as a recheck's
    }
    Some(found)
}

/// [`refresh`]'s reads.
async fn read_up<S: Store>(store: &S, dir: &str, loaded: &mut Loaded, whole: bool) -> bool {
    let path = format!("{dir}/{INDEX}");
    let mut read = None;
    if loaded.size == 0 && !loaded.no_segment {
        // The segment's header and the blob's end, asked together: one step, not two, for a
        // blob that gained little since its segment, or that is small and has none.
        let (segment, end) =
            futures::join!(Segment::open(store, dir), store.read_end(&path, END_READ));
        match segment {
            Some(segment) => match from_segment(store, dir, loaded, segment, whole, end).await {
                Some(found) => return found,
                None => loaded.no_segment = true, // not this blob's: the blob alone
            },
            None => match end {
                Err(StoreError::NotFound(_)) => return false,
                Ok(end) => read = Some(end), // the blob alone, from this end on
                Err(_) => {}                 // asked again below
            },
        }
    }
    // The blob's size and end, in one step: they hold what it gained when that is little,
    // with the bytes before the end read last time. If those changed, the blob is another
    // (rebuilt after a purge or a replaced file) and is read again from its start.
    let read = match read {
        Some(read) => Ok(read),
        None => store.read_end(&path, END_READ).await,
    };
    let Ok((size, end)) = read else {
        return false;
    };
    if size < loaded.size {
        *loaded = Loaded::default();
    }
    for _ in 0..2 {
        let from = loaded.size - loaded.edge.len() as u64;
        let bytes = match size.checked_sub(end.len() as u64) {
            Some(end_at) if end_at <= from => end[(from - end_at) as usize..].to_vec(),
            _ => match store.read(&path, from, (size - from) as usize).await {
                Ok(bytes) => bytes,
                Err(_) => return false,
            },
        };
        match bytes.strip_prefix(loaded.edge.as_slice()) {
            Some(gained) => {
                add_lines(loaded, gained);
                return true;
            }
            None => *loaded = Loaded::default(),
        }
    }
    false
}

/// Starts `loaded` (fresh) from `segment` and the blob's lines past it: from `end` (the
/// blob's size and last bytes, read beside the segment's header) when it reaches back to the
/// segment's edge, else read now, without a stat (a read answers what is there). `None`: the
/// blob is not the segment's (rebuilt or cut under it) or the segment does not read in full;
/// `Some(false)`: no blob.
async fn from_segment<S: Store>(
    store: &S,
    dir: &str,
    loaded: &mut Loaded,
    mut segment: Segment,
    whole: bool,
    end: Result<(u64, Vec<u8>), StoreError>,
) -> Option<bool> {
    if whole && !segment.hold(store, dir).await {
        return None;
    }
    let from = segment.covered.checked_sub(segment.edge.len() as u64)?;
    let bytes = match end {
        Ok((size, mut bytes)) if size >= segment.covered && size - bytes.len() as u64 <= from => {
            bytes.drain(..(from - (size - bytes.len() as u64)) as usize);
            bytes
        }
        Err(StoreError::NotFound(_)) => return Some(false),
        _ => match store
            .read(&format!("{dir}/{INDEX}"), from, usize::MAX)
            .await
        {
            Ok(bytes) => bytes,
            Err(StoreError::NotFound(_)) => return Some(false),
            Err(_) => return None,
        },
    };
    let tail = bytes.strip_prefix(segment.edge.as_slice())?;
    loaded.size = segment.covered;
    loaded.edge = segment.edge.clone();
    loaded.segment = Some(segment); // before the lines: their ids follow its documents
    add_lines(loaded, tail);
    Some(true)
}

/// Adds the whole lines of `bytes` (the blob from `loaded.size` on) to `loaded`: a line that
/// does not read is skipped, and the session noted as damaged ([`Memo::damaged`]: its index
/// is rebuilt); a line still being written is left for later.
fn add_lines(loaded: &mut Loaded, bytes: &[u8]) {
    let Some(cut) = bytes.iter().rposition(|&b| b == b'\n') else {
        return;
    };
    for line in bytes[..cut].split(|&b| b == b'\n') {
        match serde_json::from_slice::<Doc>(line) {
            Ok(doc) => {
                loaded.add(doc);
                loaded.lines.push(line.len() as u32);
            }
            Err(_) => loaded.gaps = true,
        }
    }
    let read = &bytes[..=cut];
    loaded.edge = match read.len().checked_sub(EDGE) {
        Some(at) => read[at..].to_vec(),
        None => {
            let old = &loaded.edge[loaded.edge.len().saturating_sub(EDGE - read.len())..];
            [old, read].concat()
        }
    };
    loaded.size += cut as u64 + 1;
}

/// Sessions the warm-up loads per turn of the memo's lock: a query that comes meanwhile waits
/// for one turn, not for the whole warm-up.
const WARM_TURN: usize = 8;

/// Loads every session's index ahead of the first query (the worker calls it in idle time
/// after it opens), so that query does not wait for the loading: each segment whole, in
/// memory, from now on (queries then read only their hits' lines from the store). A few
/// sessions at a time, releasing the memo between them: a query typed meanwhile loads lazily
/// only what the warm-up has not reached (what it loaded is as fresh as a recheck asks), and
/// the turns after it hold what that query read.
pub(crate) async fn warm<S: Store>(store: &S, dir: &str, memo: &Memo) {
    let listed_at = crate::store::now_millis().max(1);
    let Some(keys) = session_folders(store, dir).await else {
        return;
    };
    {
        let mut loads = memo.0.lock().await;
        let unloaded = keys.iter().filter(|k| !loads.sessions.contains_key(*k));
        loads.pending = unloaded.cloned().collect();
        if loads.checked == 0 {
            // What changes after the listing is in `Live` (this worker's writers) or is seen
            // at the next recheck (another tab's).
            loads.checked = listed_at;
        }
    }
    for turn in keys.chunks(WARM_TURN) {
        let mut loads = memo.0.lock().await;
        let work = turn.iter().filter_map(|key| {
            let id = decode(key)?;
            loads.pending.remove(key);
            // A session a query loaded from the pack loads its own segment, held.
            let known = (loads.sessions.remove(key))
                .filter(|(_, l)| !l.segment.as_ref().is_some_and(Segment::packed));
            Some(async move {
                let folder = format!("{dir}/{key}");
                let loaded = match known {
                    // Loaded by a query (which keeps it fresh): hold what it read lazily.
                    Some((_, mut loaded)) => {
                        if let Some(segment) = loaded.segment.as_mut().filter(|s| !s.held()) {
                            segment.hold(store, &folder).await;
                        }
                        loaded
                    }
                    None => {
                        // With the blob's stamp (idle time can wait for it): the rechecks
                        // after it read only the blobs that changed.
                        let mut loaded = Loaded::default();
                        if !refresh(store, &folder, &mut loaded, true, true).await {
                            return None;
                        }
                        loaded.index.prepare();
                        loaded
                    }
                };
                // Its column decoded whole now, in idle time, rather than by the first query
                // for a common word.
                if let Some(segment) = &loaded.segment {
                    let _ = segment.metas();
                }
                Some((key.clone(), (id, loaded)))
            })
        });
        let done = futures::future::join_all(work.collect::<Vec<_>>()).await;
        loads.sessions.extend(done.into_iter().flatten());
        drop(loads);
        // A query waiting for the memo takes it between two turns (the lock's own fairness
        // is timed, and not on wasm, where the warm-up would take it again first).
        crate::store::yield_now().await;
    }
    let mut loads = memo.0.lock().await;
    loads.warm = true;
    loads.pending.clear();
    loads.pack = None; // its parts were loaded again: nothing asks it now
}

/// Builds the server's [`pack`] from what the worker holds once it has warmed up (every
/// session's segment held, and the documents past it), when the one in the store is behind
/// ([`pack::behind`]); in idle time, after [`warm`]. A session whose blob did not read whole
/// (a line past its segment that did not read: its segment's next build mends it) is left
/// out: a first query loads it the usual way. Answers whether it wrote a pack.
pub(crate) async fn build_pack<S: Store>(store: &S, dir: &str, memo: &Memo) -> bool {
    // One builder at a time across tabs (two writing the pack's new file lock each other out
    // of renaming it; a worker whose page just reloaded may still be building): the other's
    // pack is looked at once it is done. Taken before the memo, which queries wait for.
    let Some(_role) = store.writer(&pack::path(dir), true).await else {
        return false;
    };
    let mut loads = memo.0.lock().await;
    if !loads.warm {
        return false;
    }
    // In this order, before the stats below: see `marks`.
    let marked = marks::list(store, dir).await;
    let held = store.writers_held(dir).await;
    let listed = session_folders(store, dir).await.unwrap_or_default();
    let mut keys: Vec<&String> = loads.sessions.keys().collect();
    keys.sort();
    // Each session's blob as read: the size and stamp taken before the read that brought it
    // to the end read, or (loaded by a query, which does not wait for one) a stat now, if the
    // blob has not grown since. Trusted by a worker that starts only when a stat now finds
    // the blob as read.
    let mut seen = Vec::new();
    for key in keys {
        let loaded = &loads.sessions[key].1;
        let whole = loaded.segment.as_ref().is_none_or(Segment::held);
        if !whole || loaded.gaps || loaded.size == 0 {
            continue;
        }
        let now = (store.stat(&format!("{dir}/{key}/{INDEX}")).await.ok()).flatten();
        let trust = match (&marked, loaded.seen) {
            (Some(marked), Some(read)) if now == Some(read) => {
                marks::trust(key, marked, held.as_ref())
            }
            _ => Trust::Held,
        };
        let meta = loaded.seen.or(now);
        seen.extend(
            meta.filter(|m| m.size >= loaded.size)
                .map(|m| (key.clone(), m, trust)),
        );
    }
    // A session folder without a blob is held as empty: a first query asks it a stat (if it
    // has no mark the pack recorded), not two reads (a blob written since is loaded the usual
    // way).
    let mut blobless = Vec::new();
    for key in listed.iter().filter(|k| !loads.sessions.contains_key(*k)) {
        let now = store.stat(&format!("{dir}/{key}/{INDEX}")).await;
        let trust = match (&marked, now) {
            (Some(marked), Ok(None)) => marks::trust(key, marked, held.as_ref()),
            _ => Trust::Held,
        };
        blobless.push((key, trust));
    }
    let mut sizes: Vec<(&str, u64)> = (seen.iter())
        .map(|(key, _, _)| (key.as_str(), loads.sessions[key].1.size))
        .collect();
    sizes.extend(blobless.iter().map(|(k, _)| (k.as_str(), 0)));
    let on_disk = pack::entries(store, dir).await;
    if !loads.pack_missed && !pack::behind(on_disk.as_ref(), &sizes) {
        return false;
    }
    // A copy of what the pack is built from: queries have the memo back while it is merged
    // (a few hundred milliseconds for 200 MB of transcripts, in turns of the event loop).
    let mut parts: Vec<pack::Part> = (seen.iter())
        .map(|(key, meta, trust)| {
            let loaded = &loads.sessions[key].1;
            pack::Part {
                key: key.clone(),
                seen: *meta,
                trust: trust.clone(),
                covered: loaded.size,
                edge: loaded.edge.clone(),
                segment: loaded.segment.clone(),
                tail: loaded.index.clone(),
                lines: loaded.lines.clone(),
                dead: loaded.dead.clone(),
            }
        })
        .collect();
    parts.extend(blobless.into_iter().map(|(key, trust)| pack::Part {
        key: key.clone(),
        trust,
        ..pack::Part::default()
    }));
    parts.sort_by(|a, b| a.key.cmp(&b.key));
    loads.pack_missed = false;
    drop(loads);
    let bytes = pack::encode(&parts).await;
    let trusts: HashMap<String, Trust> = (parts.into_iter()).map(|p| (p.key, p.trust)).collect();
    if bytes.is_empty() {
        return false;
    }
    let path = pack::path(dir);
    let new = format!("{path}.new");
    let done = match store.write(&new, &bytes).await {
        Ok(()) => store.rename(&new, &path).await,
        Err(e) => Err(e),
    };
    if let Err(e) = &done {
        log::info!("scrollback: no search pack for {dir}: {e}");
        let _ = store.remove(&new).await; // a full disk keeps nothing half written
        return false;
    }
    if let Some(marked) = marked {
        let present = listed.into_iter().collect();
        marks::tidy(store, dir, &marked, &trusts, &present).await;
    }
    true
}

/// Brings the memo up to the store as a query [`RECHECK_MS`] after the last recheck would
/// (every session looked at again, with what this worker wrote), in idle time: the worker
/// calls it more often than that, so that a query finds the memo fresh and asks the store
/// nothing but its hits' lines. Nothing before a query or a warm-up loaded the memo (the first
/// query lists every session anyway).
pub(crate) async fn recheck<S: Store>(store: &S, dir: &str, memo: &Memo, live: &Live) {
    let mut loads = memo.0.lock().await;
    if loads.checked == 0 {
        return;
    }
    let (mut changed, _) = live.take_changes();
    changed.extend(live.told_unread(|key| read_so_far(&loads, key)));
    changed.extend(std::mem::take(&mut loads.pending));
    load(store, dir, &mut loads, &changed, true).await;
}

/// How far session `key`'s blob was read (0: not loaded).
fn read_so_far(loads: &Loads, key: &str) -> u64 {
    loads.sessions.get(key).map_or(0, |(_, l)| l.size)
}

/// Searches the sessions under `dir` (a server's folder): all of them, or those in `sessions`.
pub(crate) async fn search<S: Store>(
    store: &S,
    dir: &str,
    memo: &Memo,
    live: &Live,
    text: &str,
    limit: usize,
    sessions: Option<&[String]>,
) -> Vec<Hit> {
    let query = Query::parse(text);
    if query.is_empty() || limit == 0 {
        return Vec::new();
    }
    let mut loads = memo.0.lock().await;
    let (mut changed, relist) = live.take_changes();
    changed.extend(live.told_unread(|key| read_so_far(&loads, key)));
    let stale = crate::store::now_millis().saturating_sub(loads.checked) >= RECHECK_MS;
    let unknown = changed.iter().any(|k| !loads.sessions.contains_key(k));
    // A warm-up under way has listed them; it holds them once they are loaded.
    changed.extend(std::mem::take(&mut loads.pending));
    load(store, dir, &mut loads, &changed, relist || stale || unknown).await;
    // A session whose only row is still streaming has no blob yet: its row is searched all
    // the same (from its writer's memory, below).
    for key in live.streaming() {
        if let (false, Some(id)) = (loads.sessions.contains_key(&key), decode(&key)) {
            loads.sessions.insert(key, (id, Loaded::default()));
        }
    }
    let wanted: Option<Vec<String>> =
        sessions.map(|ids| ids.iter().filter_map(|id| encode(id).ok()).collect());
    let mut loaded: Vec<(String, &String, &mut Loaded)> = loads
        .sessions
        .iter_mut()
        .filter(|(key, _)| wanted.as_ref().is_none_or(|w| w.contains(key)))
        .map(|(key, (id, l))| (format!("{dir}/{key}"), &*id, l))
        .collect();
    loaded.sort_by(|a, b| a.0.cmp(&b.0));
    let ranked = rank_with_live(store, dir, live, &mut loaded, &query, limit).await;
    if ranked.broken.is_empty() {
        return ranked.hits;
    }
    // A session whose segment did not read is loaded again from its blob alone (which cannot
    // break: its documents are in memory), and the query asked again.
    let mut pack_missed = false;
    for s in ranked.broken {
        let (folder, _, l) = &mut loaded[s];
        if l.segment.as_ref().is_some_and(Segment::packed) {
            // Its part of the pack is not its blob's (or the pack does not read): the pack is
            // built again. (The session's own segment may be as old: a blob rebuilt to the
            // same size and last bytes; the blob answers.)
            pack_missed = true;
        } else {
            // Derived data: removing it loses nothing (the next idle build makes it again).
            let _ = store.remove(&format!("{folder}/{SEGMENT}")).await;
        }
        **l = Loaded {
            no_segment: true,
            ..Loaded::default()
        };
        refresh(store, folder, l, false, false).await;
    }
    let hits = rank_with_live(store, dir, live, &mut loaded, &query, limit).await;
    if pack_missed {
        let _ = store.remove(&pack::path(dir)).await;
        (loads.pack, loads.pack_missed) = (None, true);
    }
    hits.hits
}

/// [`rank`], the rows still streaming joining their sessions for this query only.
async fn rank_with_live<S: Store>(
    store: &S,
    dir: &str,
    live: &Live,
    loaded: &mut [(String, &String, &mut Loaded)],
    query: &Query,
    limit: usize,
) -> Ranked {
    let mut added = Vec::new();
    for (s, (folder, _, l)) in loaded.iter_mut().enumerate() {
        l.index.prepare();
        let key = &folder[dir.len() + 1..];
        if let Some(row) = live.open(key).filter(|row| !l.holds(row)) {
            // It replaces what the blob holds of it (a piece below it that a page welded).
            let buried = l.bury(row.seq..row.end);
            added.push((s, l.index.add(row), buried));
        }
    }
    let mut ranked = rank(store, loaded, query, limit).await;
    for (s, doc, text) in std::mem::take(&mut ranked.read) {
        loaded[s].2.keep_text(doc, text);
    }
    for (s, before, buried) in added {
        loaded[s].2.index.remove_last(before);
        loaded[s].2.unbury(buried);
    }
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::{Cache, SessionCache};
    use crate::protocol::Line;
    use crate::store::{MemoryStore, StoreResult, WriterRole};
    use crate::testing::{Hook, Hooked, Op};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// What a [`Counting`] store counts: the reads (`read_end` too) and stats asked of it. It
    /// lets another task run before each write, as a browser's store does.
    #[derive(Default)]
    struct Counts {
        reads: AtomicUsize,
        stats: AtomicUsize,
        lists: AtomicUsize,
    }

    impl Hook for Counts {
        async fn before(&self, op: Op<'_>) -> StoreResult<()> {
            match op {
                Op::Stat(_) => _ = self.stats.fetch_add(1, Ordering::SeqCst),
                Op::List(_) => _ = self.lists.fetch_add(1, Ordering::SeqCst),
                Op::Read(_) | Op::ReadEnd(_) => _ = self.reads.fetch_add(1, Ordering::SeqCst),
                Op::Write(_) => crate::store::yield_now().await,
                _ => {}
            }
            Ok(())
        }
    }

    /// The memory store, counting the reads and stats asked of it.
    type Counting = Hooked<MemoryStore, Counts>;

    /// A store that counts, a session in it that another tab's cache writes (its writes reach
    /// the memo under test only through the store), opened, and the server's folder.
    async fn other_tab() -> (Arc<Counting>, SessionCache<Counting>, String) {
        let store = Arc::new(Counting::default());
        let writer = Cache::new(store.clone(), "example.com", 443).await;
        let mut session = writer.session("s").unwrap();
        session.open().await;
        (store, session, writer.dir().to_string())
    }

    /// The seqs of the hits of `text` over the sessions under `dir`.
    async fn seqs_found(
        store: &Counting,
        dir: &str,
        memo: &Memo,
        live: &Live,
        text: &str,
    ) -> Vec<u64> {
        let hits = search(store, dir, memo, live, text, 10, None).await;
        hits.iter().map(|h| h.seq).collect()
    }

    fn user(seq: u64, text: &str) -> Line {
        let event = serde_json::json!({"type": "userMessage", "text": text});
        Line::parse(&serde_json::json!({"seq": seq, "ts": 1.0, "event": event}).to_string())
            .unwrap()
    }

    /// What another tab's writer wrote is found at a recheck (every [`RECHECK_MS`]): a blob
    /// that grew, and one rebuilt with another conversation. A recheck that finds a blob as
    /// the last read left it (its size and stamp) reads nothing of it, after a query's load
    /// (from the second recheck on) and after the warm-up (from the first).
    #[test]
    fn a_recheck_reads_only_what_another_writer_changed() {
        pollster::block_on(async {
            let (store, mut session, dir) = other_tab().await;
            for seq in 1..=3 {
                session
                    .append(&user(seq, &format!("the aardvark {seq}")))
                    .await;
            }
            let (memo, live) = (Memo::default(), Live::default());
            let found = |text| seqs_found(&store, &dir, &memo, &live, text);
            let recheck = || async { memo.0.lock().await.checked = 0 };
            let reads = || store.hook.reads.load(Ordering::SeqCst);
            let stats = || store.hook.stats.load(Ordering::SeqCst);
            assert_eq!(found("aardvark").await.len(), 3);

            // Nothing changed: the first recheck reads the blob's end (the load took no
            // stamp), the next ones only ask for its size and stamp.
            recheck().await;
            assert!(found("okapi").await.is_empty());
            let (r, s) = (reads(), stats());
            recheck().await;
            assert!(found("okapi").await.is_empty());
            assert_eq!(reads(), r, "nothing changed: nothing read");
            assert!(stats() > s, "the recheck looked");

            // The blob grew: read, and found.
            session.append(&user(4, "an okapi")).await;
            recheck().await;
            assert_eq!(found("okapi").await, vec![4]);
            assert!(reads() > r);

            // Rebuilt with another conversation (purged, then written again).
            session.purge().await;
            for seq in 1..=5 {
                session.append(&user(seq, &format!("a zebu {seq}"))).await;
            }
            recheck().await;
            assert!(found("aardvark").await.is_empty(), "nothing of the old one");
            assert_eq!(found("zebu").await.len(), 5);

            // After the warm-up, the first recheck reads nothing either.
            let warmed = Memo::default();
            warm(&*store, &dir, &warmed).await;
            warmed.0.lock().await.checked = 0;
            let r = reads();
            let hits = search(&*store, &dir, &warmed, &live, "okapi", 10, None).await;
            assert!(hits.is_empty());
            assert_eq!(reads(), r, "warmed up: nothing read at the recheck");
        });
    }

    /// A query keeps the texts it read through a session's segment (its hits' lines): the
    /// same hits again, a letter typed later, read nothing; past the bytes kept, they are read
    /// again. A blob rebuilt with another conversation of the same size (the same document
    /// ids) is loaded afresh, and shows its own texts.
    #[test]
    fn texts_read_through_a_segment_are_kept_for_the_next_query() {
        pollster::block_on(async {
            let (store, mut session, dir) = other_tab().await;
            let folder = format!("{dir}/{}", encode("s").unwrap());
            for seq in 1..=3 {
                session
                    .append(&user(seq, &format!("the aardvark {seq}")))
                    .await;
            }
            super::super::segment::build(&*store, &folder)
                .await
                .unwrap();
            let (memo, live) = (Memo::default(), Live::default());
            let reads = || store.hook.reads.load(Ordering::SeqCst);
            let marked = |hits: &[Hit]| hits.iter().map(Hit::marked).collect::<Vec<_>>();
            let first = search(&*store, &dir, &memo, &live, "aard", 10, None).await;
            let want: Vec<String> = (1..=3).map(|n| format!("the [aardvark] {n}")).collect();
            assert_eq!(marked(&first), want);
            let r = reads();
            let again = search(&*store, &dir, &memo, &live, "aardvark", 10, None).await;
            assert_eq!(marked(&again), want);
            assert_eq!(reads(), r, "the hits' texts were kept: nothing read");

            // Past the bytes kept, the texts kept before go (and one longer is not kept).
            {
                let mut loads = memo.0.lock().await;
                let (_, loaded) = loads.sessions.values_mut().next().unwrap();
                assert!(loaded.segment.is_some(), "read through the segment");
                loaded.keep_text(99, "x".repeat(TEXTS_KEPT));
                assert_eq!(loaded.texts.len(), 1);
                loaded.keep_text(100, "x".repeat(TEXTS_KEPT + 1));
                assert!(!loaded.texts.contains_key(&100));
            }
            let again = search(&*store, &dir, &memo, &live, "aardvark", 10, None).await;
            assert_eq!(marked(&again), want);
            assert!(reads() > r, "read again");

            // Another conversation, its blob as long as the first's: its own texts.
            session.purge().await;
            for seq in 1..=3 {
                session
                    .append(&user(seq, &format!("the zebuzebu {seq}")))
                    .await;
            }
            super::super::segment::build(&*store, &folder)
                .await
                .unwrap();
            memo.0.lock().await.checked = 0; // (a recheck is due)
            let zebu = search(&*store, &dir, &memo, &live, "zebuzebu", 10, None).await;
            let want: Vec<String> = (1..=3).map(|n| format!("the [zebuzebu] {n}")).collect();
            assert_eq!(marked(&zebu), want);
            assert!(search(&*store, &dir, &memo, &live, "aardvark", 10, None)
                .await
                .is_empty());
        });
    }

    /// A session of `cache` opened by a tab that takes its writer role first, as the engine's
    /// views do.
    async fn writing(cache: &Cache<Counting>, id: &str) -> (SessionCache<Counting>, WriterRole) {
        let mut session = cache.session(id).unwrap();
        let role = session.try_writer().await.expect("the role is free");
        session.open().await;
        (session, role)
    }

    /// A worker that starts answers its first query from the server's pack: a read of it, no
    /// stat of a blob no writer changed since ([`marks`]) and its hits' lines, the same
    /// answers as a warmed-up worker's. What a blob gained since is read past its part and
    /// found; a blob rebuilt under the pack is loaded the usual way (nothing of the old
    /// conversation found) and the pack is built again; a pack that does not read is removed,
    /// and the sessions answer all the same.
    #[test]
    fn a_worker_that_starts_answers_from_the_server_pack() {
        pollster::block_on(async {
            let store = Arc::new(Counting::default());
            let writer = Cache::new(store.clone(), "example.com", 443).await;
            let dir = writer.dir().to_string();
            let folder = |id| format!("{dir}/{}", encode(id).unwrap());
            let mut sessions = Vec::new();
            for id in ["a", "b", "c"] {
                let (mut session, _role) = writing(&writer, id).await;
                for seq in 1..=30 {
                    let text = format!("the aardvark {id} {seq} okapi{}", seq % 3);
                    session.append(&user(seq, &text)).await;
                }
                sessions.push(session);
            }
            // "a" has a segment, and rows past it.
            super::super::segment::build(&*store, &folder("a"))
                .await
                .unwrap();
            for seq in 31..=33 {
                sessions[0].append(&user(seq, "past the segment")).await;
            }
            drop(sessions); // their tabs closed
            let live = Live::default();
            let warmed = Memo::default();
            warm(&*store, &dir, &warmed).await;
            assert!(build_pack(&*store, &dir, &warmed).await, "built");
            assert!(
                !build_pack(&*store, &dir, &warmed).await,
                "not behind: not again"
            );
            let queries = ["aardvark", "okapi1", "okap", "\"the aardvark\"", "segment"];
            let mut want = Vec::new();
            for q in queries {
                want.push(search(&*store, &dir, &warmed, &live, q, 10, None).await);
            }
            assert_eq!(want[4].len(), 3);

            let (reads, stats) = (
                || store.hook.reads.load(Ordering::SeqCst),
                || store.hook.stats.load(Ordering::SeqCst),
            );
            let lists = || store.hook.lists.load(Ordering::SeqCst);
            let memo = Memo::default();
            let (r, s, l) = (reads(), stats(), lists());
            let first = search(&*store, &dir, &memo, &live, queries[0], 10, None).await;
            assert_eq!(first, want[0]);
            assert_eq!(stats() - s, 0, "no blob changed since the pack");
            assert_eq!(lists() - l, 1, "the marks, not the sessions' folder");
            assert_eq!(
                reads() - r,
                1 + first.len(),
                "the pack, then the hits' lines"
            );
            for (q, want) in queries.iter().zip(&want) {
                assert_eq!(
                    &search(&*store, &dir, &memo, &live, q, 10, None).await,
                    want,
                    "{q}"
                );
            }
            let packed = |memo: &Memo| {
                let loads = memo.0.try_lock().unwrap();
                let parts = loads.sessions.values();
                parts
                    .filter(|(_, l)| l.segment.as_ref().is_some_and(Segment::packed))
                    .count()
            };
            assert_eq!(packed(&memo), 3);

            // Another tab's writer adds to "b": read past its part, and found.
            let (mut b, role) = writing(&writer, "b").await;
            b.append(&user(31, "a zebu")).await;
            drop((b, role));
            let memo = Memo::default();
            let s = stats();
            assert_eq!(
                seqs_found(&store, &dir, &memo, &live, "zebu").await,
                vec![31]
            );
            assert_eq!(stats() - s, 1, "a stat of the blob marked since");
            assert_eq!(packed(&memo), 3);

            // A session cached since the pack was built: its mark says it is there.
            let (mut d, role) = writing(&writer, "d").await;
            d.append(&user(1, "a new zebu")).await;
            drop((d, role));
            let memo = Memo::default();
            let l = lists();
            let hits = search(&*store, &dir, &memo, &live, "zebu", 10, None).await;
            let mut found: Vec<(&str, u64)> = hits.iter().map(|h| (&*h.session, h.seq)).collect();
            found.sort();
            assert_eq!(found, [("b", 31), ("d", 1)]);
            assert_eq!(lists() - l, 1);

            // "c" rebuilt under the pack, with another conversation.
            let (mut c, _role) = writing(&writer, "c").await;
            c.purge().await; // the Reload button
            for seq in 1..=30 {
                c.append(&user(seq, &format!("a wombat {seq}"))).await;
            }
            let memo = Memo::default();
            let hits = search(&*store, &dir, &memo, &live, "aardvark", 100, None).await;
            assert!(
                hits.iter().all(|h| h.session != "c"),
                "nothing of the old one"
            );
            assert_eq!(
                seqs_found(&store, &dir, &memo, &live, "wombat").await.len(),
                10
            );
            assert_eq!(packed(&memo), 2);
            let warmed = Memo::default();
            warm(&*store, &dir, &warmed).await;
            assert!(build_pack(&*store, &dir, &warmed).await, "built again");
            let memo = Memo::default();
            assert_eq!(
                seqs_found(&store, &dir, &memo, &live, "wombat").await.len(),
                10
            );
            assert_eq!(packed(&memo), 4, "d too");

            // A pack that does not read.
            let path = pack::path(&dir);
            let mut garbled = store.inner.read(&path, 0, usize::MAX).await.unwrap();
            garbled.truncate(garbled.len() / 2);
            store.inner.write(&path, &garbled).await.unwrap();
            let memo = Memo::default();
            assert_eq!(
                seqs_found(&store, &dir, &memo, &live, "wombat").await.len(),
                10
            );
            assert_eq!(
                seqs_found(&store, &dir, &memo, &live, "segment")
                    .await
                    .len(),
                3
            );
            assert_eq!(store.inner.stat(&path).await.unwrap(), None, "removed");
        });
    }

    /// A session whose writer holds its role while the pack is built is recorded as held:
    /// what it writes after is found by a worker that starts, which asks its blob a `stat`
    /// (and no other's). A build removes the marks it recorded: a session keeps its marks
    /// only while its writer held the role at the last build, or wrote since.
    #[test]
    fn a_session_written_during_the_build_is_asked_a_stat() {
        pollster::block_on(async {
            let store = Arc::new(Counting::default());
            let cache = Cache::new(store.clone(), "example.com", 443).await;
            let dir = cache.dir().to_string();
            for id in ["a", "b"] {
                let (mut session, _role) = writing(&cache, id).await;
                session.append(&user(1, "an aardvark")).await;
            }
            let (mut b, role) = writing(&cache, "b").await;
            b.append(&user(2, "a gnu")).await;
            let build = || async {
                let memo = Memo::default();
                warm(&*store, &dir, &memo).await;
                build_pack(&*store, &dir, &memo).await
            };
            let marks = || async {
                let mut listed: Vec<(String, usize)> = (marks::list(&*store, &dir).await)
                    .unwrap()
                    .into_iter()
                    .map(|(key, tokens)| (key, tokens.len()))
                    .collect();
                listed.sort();
                listed
            };
            let first_query = |text: &'static str| {
                let (store, dir) = (store.clone(), dir.clone());
                async move {
                    let s = store.hook.stats.load(Ordering::SeqCst);
                    let found =
                        seqs_found(&store, &dir, &Memo::default(), &Live::default(), text).await;
                    (found, store.hook.stats.load(Ordering::SeqCst) - s)
                }
            };
            assert!(build().await);
            assert_eq!(marks().await, [("b".into(), 2)], "a's recorded: removed");
            b.append(&user(3, "a yak")).await; // no new mark: its writer held the role
            assert_eq!(first_query("yak").await, (vec![3], 1), "a stat of b's blob");
            // Grown past a sixteenth: the next build is behind.
            b.append(&user(4, &"a long reply ".repeat(6000))).await;
            drop((b, role));
            assert!(build().await);
            assert!(marks().await.is_empty(), "b's recorded: removed");
            assert_eq!(
                first_query("yak").await,
                (vec![3], 0),
                "every record trusted"
            );
        });
    }

    /// Refuses to write marks while `refuse` is set (a full disk).
    #[derive(Default)]
    struct RefuseMarks {
        refuse: std::sync::atomic::AtomicBool,
    }

    impl Hook for RefuseMarks {
        async fn before(&self, op: Op<'_>) -> StoreResult<()> {
            match op {
                Op::Write(path)
                    if path.contains(marks::MARKS) && self.refuse.load(Ordering::SeqCst) =>
                {
                    Err(crate::store::StoreError::QuotaExceeded)
                }
                _ => Ok(()),
            }
        }
    }

    /// A writer that cannot mark its session removes the server's pack instead (a worker that
    /// starts would take the pack's record of the blob for the blob), and what it writes is
    /// found.
    #[test]
    fn a_writer_that_cannot_mark_removes_the_pack() {
        pollster::block_on(async {
            let store = Arc::new(Hooked::new(MemoryStore::new(), RefuseMarks::default()));
            let cache = Cache::new(store.clone(), "example.com", 443).await;
            let dir = cache.dir().to_string();
            let open = || async {
                let mut session = cache.session("a").unwrap();
                let role = session.try_writer().await.expect("free");
                session.open().await;
                (session, role)
            };
            let (mut a, role) = open().await;
            a.append(&user(1, "an aardvark")).await;
            drop((a, role));
            let memo = Memo::default();
            warm(&*store, &dir, &memo).await;
            assert!(build_pack(&*store, &dir, &memo).await);
            let pack = pack::path(&dir);
            assert!(store.stat(&pack).await.unwrap().is_some());

            store.hook.refuse.store(true, Ordering::SeqCst);
            let (mut a, role) = open().await;
            a.append(&user(2, "a zebu")).await;
            drop((a, role));
            assert_eq!(store.stat(&pack).await.unwrap(), None, "the pack removed");
            let live = Live::default();
            let hits = search(&*store, &dir, &Memo::default(), &live, "zebu", 10, None).await;
            assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [2]);
        });
    }

    /// Two workers warmed up at once build the server's pack one after the other: the second
    /// finds it fresh and writes nothing (in OPFS two writing its new file at once locked each
    /// other out of renaming it, and neither pack landed).
    #[test]
    fn two_workers_build_the_pack_one_at_a_time() {
        pollster::block_on(async {
            let (store, mut session, dir) = other_tab().await;
            for seq in 1..=5 {
                session.append(&user(seq, "the aardvark")).await;
            }
            let (a, b) = (Memo::default(), Memo::default());
            warm(&*store, &dir, &a).await;
            warm(&*store, &dir, &b).await;
            let built =
                futures::join!(build_pack(&*store, &dir, &a), build_pack(&*store, &dir, &b));
            assert!(built.0 != built.1, "one of them built it: {built:?}");
            let memo = Memo::default();
            assert_eq!(
                seqs_found(&store, &dir, &memo, &Live::default(), "aardvark")
                    .await
                    .len(),
                5
            );
            let loads = memo.0.try_lock().unwrap();
            assert!(loads
                .sessions
                .values()
                .all(|(_, l)| l.segment.as_ref().is_some_and(Segment::packed)));
        });
    }

    /// A query typed while the pack is built is answered before the build ends: the build
    /// merges a copy of what the worker holds, in turns, and lets the memo go meanwhile.
    #[test]
    fn a_query_during_the_pack_build_does_not_wait_for_it() {
        pollster::block_on(async {
            // The memory store, whose operations never wait: the build's only pauses are its own.
            let store = Arc::new(MemoryStore::new());
            let cache = Cache::new(store.clone(), "example.com", 443).await;
            let dir = cache.dir().to_string();
            let mut session = cache.session("s").unwrap();
            session.open().await;
            let lines: Vec<Line> = (1..=30_000)
                .map(|seq| {
                    user(
                        seq,
                        &format!("the aardvark {seq} w{} v{}", seq % 97, seq % 89),
                    )
                })
                .collect();
            session.append_all(&lines).await;
            let memo = Memo::default();
            warm(&*store, &dir, &memo).await;
            let built = std::cell::Cell::new(false);
            let ((), answered_first) = futures::join!(
                async {
                    assert!(build_pack(&*store, &dir, &memo).await);
                    built.set(true);
                },
                async {
                    let hits = search(&*store, &dir, &memo, &Live::default(), "w7 ", 5, None).await;
                    assert_eq!(hits.len(), 5);
                    !built.get()
                },
            );
            assert!(answered_first, "answered before the build ended");
        });
    }

    /// The worker's recheck in idle time ([`recheck`]) brings what another tab wrote, so the
    /// query after it finds it without asking the store about any session; before a first
    /// query it does nothing.
    #[test]
    fn an_idle_recheck_spares_the_next_query() {
        pollster::block_on(async {
            let (store, mut session, dir) = other_tab().await;
            session.append(&user(1, "the aardvark")).await;
            let (memo, live) = (Memo::default(), Live::default());
            let stats = || store.hook.stats.load(Ordering::SeqCst);
            let seqs = |hits: Vec<Hit>| hits.iter().map(|h| h.seq).collect::<Vec<_>>();

            let (r, s) = (store.hook.reads.load(Ordering::SeqCst), stats());
            recheck(&*store, &dir, &memo, &live).await;
            assert_eq!(
                (store.hook.reads.load(Ordering::SeqCst), stats()),
                (r, s),
                "nothing loaded yet: nothing asked"
            );

            let hits = search(&*store, &dir, &memo, &live, "aardvark", 10, None).await;
            assert_eq!(seqs(hits), vec![1]);
            session.append(&user(2, "an okapi")).await;
            // Within RECHECK_MS of the first query, a query alone would not look again.
            recheck(&*store, &dir, &memo, &live).await;
            let s = stats();
            let hits = search(&*store, &dir, &memo, &live, "okapi", 10, None).await;
            assert_eq!(seqs(hits), vec![2], "the idle recheck read it");
            assert_eq!(stats(), s, "the query asked the store about no session");
        });
    }

    /// What another tab's writer tells ([`Live::on_written`], posted by the worker to the
    /// other tabs; [`Live::told`] where it is heard) is read at the next query, well within
    /// [`RECHECK_MS`] of the last look at every session: a blob that grew, and the blob of a
    /// session this worker had not listed, and a blob rebuilt there (smaller). A notice of a
    /// size the blob has not reached yet (the other tab's write still buffered) is looked at
    /// by the queries after it too, until a read reaches it; one that was read is not read
    /// again.
    #[test]
    fn what_another_tab_tells_is_read_at_the_next_query() {
        pollster::block_on(async {
            let store = Arc::new(Counting::default());
            let writer = Cache::new(store.clone(), "example.com", 443).await;
            let notices = Arc::new(std::sync::Mutex::new(Vec::new()));
            let heard = notices.clone();
            writer.on_search_written(Arc::new(move |key: &str, size| {
                heard.lock().unwrap().push((key.to_string(), size));
            }));
            let dir = writer.dir().to_string();
            let mut session = writer.session("s").unwrap();
            session.open().await;
            session.append(&user(1, "the aardvark")).await;
            let (memo, live) = (Memo::default(), Live::default());
            let found = |text| seqs_found(&store, &dir, &memo, &live, text);
            let reads = || store.hook.reads.load(Ordering::SeqCst);
            let last = || notices.lock().unwrap().last().cloned().unwrap();
            assert_eq!(found("aardvark").await, vec![1]);

            session.append(&user(2, "an okapi")).await;
            let (key, size) = last();
            let blob = format!("{dir}/{key}/{INDEX}");
            let stat = store.inner.stat(&blob).await.unwrap().unwrap();
            assert_eq!(
                size, stat.size,
                "the notice: the blob's size after the write"
            );
            assert!(
                found("okapi").await.is_empty(),
                "not told: not looked at before RECHECK_MS"
            );
            live.told(&key, size);
            assert_eq!(
                found("okapi").await,
                vec![2],
                "told: read at the next query"
            );
            let r = reads();
            assert!(found("nothing").await.is_empty());
            assert_eq!(reads(), r, "read as far as told: not read again");

            // Told of a size its read does not reach yet: looked at again by the next query.
            live.told(&key, size + 1000);
            let r = reads();
            found("nothing").await;
            assert!(reads() > r, "told: looked at");
            let r = reads();
            found("nothing").await;
            assert!(reads() > r, "not reached yet: looked at again");

            // Rebuilt there with another conversation: smaller than what was read here.
            session.purge().await;
            session.append(&user(1, "a zebu")).await;
            let (_, size) = last();
            live.told(&key, size);
            assert_eq!(found("zebu").await, vec![1], "told: reloaded");
            assert!(found("okapi").await.is_empty(), "nothing of the old one");

            // A session this worker had not listed.
            let mut other = writer.session("t").unwrap();
            other.open().await;
            other.append(&user(1, "a pangolin")).await;
            let (other_key, size) = last();
            assert_ne!(other_key, key);
            live.told(&other_key, size);
            let hits = search(&*store, &dir, &memo, &live, "pangolin", 10, None).await;
            let sessions: Vec<_> = hits.iter().map(|h| h.session.as_str()).collect();
            assert_eq!(sessions, ["t"], "a new session told: listed and read");

            // Removed there, whole (a purge, an eviction, a sign-out) or its cache thrown away
            // (a Reload): told, and nothing of it found at the next query.
            writer.purge("t").await;
            assert_eq!(last(), (other_key.clone(), 0), "the notice: nothing left");
            live.told(&other_key, 0);
            assert!(found("pangolin").await.is_empty(), "told: gone");
            session.purge().await;
            assert_eq!(last(), (key.clone(), 0), "the notice: nothing left");
            live.told(&key, 0);
            assert!(found("zebu").await.is_empty(), "told: gone");
        });
    }
}
