//! What this worker's index writers did, told to its reader without asking the store.
//!
//! - **The rows still streaming.** A reply whose next delta may still join it is not written
//!   to the index blob until the next row starts ([`super::writer`]); a transcript whose newest
//!   line is an assistant delta would hide its last reply. Each writer shares its fold here
//!   ([`Shared`]) and a query searches the fold's open row, as it stands then, as one more
//!   document of that session: a delta costs the writer nothing here. Memory only: the blob
//!   gets the row once it completes.
//! - **The blobs changed.** A query re-reads from the store only the sessions whose blob this
//!   worker changed since the last query (and, for what another tab's writer did, every
//!   session at most every [`super::reader::RECHECK_MS`]), instead of asking the store about
//!   every session on every query (a stat per session: hundreds of ms in OPFS at 50 sessions).
//!   The idle build of the segments ([`super::segment`]) looks at those sessions too.
//! - **What other tabs wrote.** A writer tells the other contexts of its origin when a blob
//!   grew ([`Live::on_written`]: the worker posts it on a `BroadcastChannel`), and a context
//!   told so ([`Live::told`]) reads that session again at its next query, rather than at its
//!   next recheck of every session, up to [`super::reader::RECHECK_MS`] later. A notice carries
//!   the blob's size: a read that does not reach it yet (another tab's write still buffered)
//!   looks again at the next query.

use super::doc::{Doc, Folder};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A writer's fold, shared with this worker's queries (which read its open row).
#[derive(Debug, Clone, Default)]
pub struct Shared(Arc<Mutex<Folder>>);

impl Shared {
    /// A fold starting as `folder`.
    pub fn new(folder: Folder) -> Self {
        Shared(Arc::new(Mutex::new(folder)))
    }

    /// The fold, to read or to push lines into (nothing panics while holding it, so a poisoned
    /// lock still holds a whole fold).
    pub fn lock(&self) -> MutexGuard<'_, Folder> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is(&self, other: &Shared) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[derive(Debug, Default)]
struct State {
    /// The writers' folds, by session: the few sessions this worker writes.
    open: Vec<(String, Shared)>,
    changed: HashSet<String>,
    relist: bool,
    /// The blobs written since the last segment build looked at them.
    unbuilt: HashSet<String>,
    /// The blobs another context said it wrote, by session.
    told: HashMap<String, Told>,
}

/// What another context said of a session's blob.
#[derive(Debug)]
struct Told {
    /// The blob's size after its write.
    size: u64,
    /// When (ms since the epoch).
    at: u64,
    /// A query has looked at the blob since.
    looked: bool,
}

/// Told of each blob this worker's writers grew: the session's folder name and the blob's new
/// size ([`Live::on_written`]).
pub type Notify = Arc<dyn Fn(&str, u64) + Send + Sync>;

/// One server's sessions as this worker's writers changed them, by session folder name.
/// Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Live(Arc<Inner>);

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    /// Counts the removals that dropped shared folds: a writer whose fold was dropped shares
    /// it again with its next lines ([`Live::tracks`]).
    removals: AtomicU64,
    /// Told of each blob grown ([`Live::on_written`]).
    notify: Mutex<Option<Notify>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("state", &self.state)
            .field("removals", &self.removals)
            .finish_non_exhaustive()
    }
}

impl Live {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        self.0.state.lock().ok().map(|mut s| f(&mut s))
    }

    /// Whether a fold shared when [`Live::removals`] answered `seen` is still shared: no
    /// removal came since (one atomic read, for every delta appended).
    pub fn tracks(&self, seen: u64) -> bool {
        self.removals() == seen
    }

    /// The removals so far (see [`Live::tracks`]).
    pub fn removals(&self) -> u64 {
        self.0.removals.load(Ordering::Acquire)
    }

    fn dropped_folds(&self) {
        self.0.removals.fetch_add(1, Ordering::AcqRel);
    }

    /// Session `key`'s writer folds into `folder` from now on: its open row is searched (in
    /// place of another fold shared for `key` before).
    pub fn track(&self, key: &str, folder: &Shared) {
        self.with(|s| match s.open.iter_mut().find(|(k, _)| k == key) {
            Some((_, held)) => *held = folder.clone(),
            None => s.open.push((key.to_string(), folder.clone())),
        });
    }

    /// Session `key`'s writer stopped folding into `folder` (it resyncs): its open row is no
    /// longer searched, unless another fold was shared for `key` since.
    pub fn untrack(&self, key: &str, folder: &Shared) {
        self.with(|s| s.open.retain(|(k, held)| k != key || !held.is(folder)));
    }

    /// The sessions with an open row.
    pub fn streaming(&self) -> Vec<String> {
        let open = self.with(|s| s.open.clone()).unwrap_or_default();
        open.into_iter()
            .filter(|(_, folder)| folder.lock().pending().is_some())
            .map(|(k, _)| k)
            .collect()
    }

    /// Session `key`'s open row, if any (a copy of it as it stands).
    pub fn open(&self, key: &str) -> Option<Doc> {
        let folder = self
            .with(|s| {
                s.open
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, f)| f.clone())
            })
            .flatten()?;
        let row = folder.lock().pending().cloned();
        row
    }

    /// Session `key`'s index blob was written, cut or removed by this worker.
    pub fn changed(&self, key: &str) {
        self.with(|s| {
            for set in [&mut s.changed, &mut s.unbuilt] {
                if !set.contains(key) {
                    set.insert(key.to_string());
                }
            }
        });
    }

    /// Has `notify` told of every blob this worker's writers grow from now on (what the
    /// worker posts to the other tabs).
    pub fn on_written(&self, notify: Notify) {
        *self.0.notify.lock().unwrap_or_else(PoisonError::into_inner) = Some(notify);
    }

    /// Session `key`'s blob was appended to by this worker and is now `size` bytes.
    pub fn written(&self, key: &str, size: u64) {
        let notify = self.0.notify.lock().ok().and_then(|n| n.clone());
        if let Some(notify) = notify {
            notify(key, size);
        }
    }

    /// Session `key`'s folder, its blob with it, was removed by this worker (a purge, an
    /// eviction, a sign-out): told as a blob of no bytes ([`Live::on_written`]), so that the
    /// other contexts' next query drops it rather than answer from what it read before.
    pub fn gone(&self, key: &str) {
        self.written(key, 0);
    }

    /// Another context wrote session `key`'s blob, which is now `size` bytes: the next query
    /// looks at it (and the queries after it too, until a read reaches `size`, or for
    /// [`super::reader::RECHECK_MS`], when every session is looked at anyway). A blob rebuilt
    /// there is smaller than the one read here: that look reloads it.
    pub fn told(&self, key: &str, size: u64) {
        let at = crate::store::now_millis();
        let told = Told {
            size,
            at,
            looked: false,
        };
        self.with(|s| s.told.insert(key.to_string(), told));
    }

    /// The sessions that other contexts said they wrote and that a query is to look at: those
    /// not looked at since, and those not read as far as told yet (given how far a read
    /// reached, `read(key)`); forgets the others, and those told too long ago.
    pub(super) fn told_unread(&self, read: impl Fn(&str) -> u64) -> HashSet<String> {
        let now = crate::store::now_millis();
        self.with(|s| {
            s.told.retain(|key, told| {
                (!told.looked || read(key) < told.size)
                    && now.saturating_sub(told.at) < super::reader::RECHECK_MS
            });
            s.told.iter_mut().for_each(|(_, told)| told.looked = true);
            s.told.keys().cloned().collect()
        })
        .unwrap_or_default()
    }

    /// The sessions whose blob this worker changed since the last call (for the idle build of
    /// their segments).
    pub fn take_unbuilt(&self) -> HashSet<String> {
        self.with(|s| std::mem::take(&mut s.unbuilt))
            .unwrap_or_default()
    }

    /// Session `key` is to be looked at by the next idle build again (its writer was busy).
    pub fn unbuilt(&self, key: &str) {
        self.with(|s| s.unbuilt.insert(key.to_string()));
    }

    /// Session `key`'s folder was removed by this worker: the next query lists the sessions,
    /// and its open row is not searched (a view still streaming shares its fold again with
    /// its next delta).
    pub fn removed(&self, key: &str) {
        self.with(|s| {
            s.open.retain(|(k, _)| k != key);
            s.changed.insert(key.to_string());
            s.relist = true;
        });
        self.dropped_folds();
    }

    /// Every session may have changed (the server's whole folder was removed).
    pub fn relist(&self) {
        self.with(|s| s.relist = true);
    }

    /// Every session was removed: no open row is searched any more (a view still streaming
    /// shares its fold again with its next delta).
    pub fn removed_all(&self) {
        self.with(|s| {
            s.open.clear();
            s.relist = true;
        });
        self.dropped_folds();
    }

    /// What changed since the last call: the sessions, and whether to list them again.
    pub(super) fn take_changes(&self) -> (HashSet<String>, bool) {
        self.with(|s| {
            (
                std::mem::take(&mut s.changed),
                std::mem::take(&mut s.relist),
            )
        })
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Line;

    /// A fold of assistant deltas `texts` from seq `seq` (one reply, still open).
    fn fold(seq: u64, texts: &[&str]) -> Shared {
        let lines: Vec<Line> = (seq..)
            .zip(texts)
            .map(|(seq, text)| {
                let event =
                    serde_json::json!({"type": "assistantText", "text": text, "messageId": "m"});
                let line = serde_json::json!({"seq": seq, "ts": 1.0, "event": event});
                Line::parse(&line.to_string()).unwrap()
            })
            .collect();
        let folder = Shared::new(Folder::default());
        folder.lock().push_all(None, &lines, &mut Vec::new());
        folder
    }

    fn text(live: &Live, key: &str) -> Option<String> {
        live.open(key).map(|d| d.text)
    }

    #[test]
    fn each_session_streaming_keeps_its_own_open_row() {
        let live = Live::default();
        let (a, b) = (fold(1, &["one"]), fold(7, &["seven"]));
        live.track("a", &a);
        live.track("b", &b);
        assert_eq!(text(&live, "a").as_deref(), Some("one"));
        // Grown in its writer's fold: searched as it stands, with no copy made per delta.
        let more = Line::parse(
            r#"{"seq":2,"ts":1,"event":{"type":"assistantText","text":" two","messageId":"m"}}"#,
        )
        .unwrap();
        let first = Line::parse(
            r#"{"seq":1,"ts":1,"event":{"type":"assistantText","text":"one","messageId":"m"}}"#,
        )
        .unwrap();
        a.lock().push_all(Some(&first), &[more], &mut Vec::new());
        assert_eq!(
            live.open("a").map(|d| (d.seq, d.end, d.text)),
            Some((1, 3, "one two".into()))
        );
        let mut streaming = live.streaming();
        streaming.sort();
        assert_eq!(streaming, ["a", "b"]);
        // A writer that resyncs takes its row away; one that starts again shares a new fold,
        // which an older writer's untracking leaves alone.
        live.untrack("a", &a);
        assert_eq!(text(&live, "a"), None);
        let a2 = fold(4, &["four"]);
        live.track("a", &a2);
        live.untrack("a", &a);
        assert_eq!(text(&live, "a").as_deref(), Some("four"));
        // A removed session has none, and its writer sees it must share its fold again.
        let seen = live.removals();
        live.removed("b");
        assert_eq!(text(&live, "b"), None);
        assert!(!live.tracks(seen));
        assert_eq!(text(&live, "a").as_deref(), Some("four"));
        assert_eq!(text(&live, "c"), None);
        // A fold whose row completed has none open.
        live.track("b", &Shared::new(Folder::default()));
        assert_eq!(live.streaming(), ["a"]);
    }
}
