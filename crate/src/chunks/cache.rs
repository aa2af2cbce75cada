//! One server's cache: its sessions, the byte budget, pruning.

use super::names::{decode, encode, server_key, KeyError, TOUCH};
use super::session::{dir_size, SessionCache};
use crate::protocol::{SessionSummary, FORMAT_VERSION};
use crate::search::live::Notify;
use crate::search::writer::{self, IndexWriter, INDEX};
use crate::search::{marks, pack, segment};
use crate::search::{Hit, Live, Memo};
use crate::store::{Store, Writers};
use std::future::Future;
use std::sync::Arc;

/// The folder every format version lives in.
const ROOT: &str = "transcripts";

/// The cache of one server: `transcripts/v1/<server>/<session>/`, `<server>` its
/// [`server_key`] (`<host>_<port>`, or `<host>_<port>_<prefix>` under a path prefix).
#[derive(Debug)]
pub struct Cache<S> {
    store: Arc<S>,
    dir: String,
    /// Where the last session list fetched from this server is kept: beside the server's
    /// folder (`transcripts/v1/<server>.sessions.json`), never inside it, so no session
    /// folder can collide with it.
    list: String,
    /// The sessions' search indexes as loaded into memory.
    search: Memo,
    /// What this cache's index writers did (rows still streaming, blobs changed).
    live: Live,
    /// Whether sessions are indexed and searched ([`Cache::set_search`]).
    indexing: bool,
    /// Whose turn it is to take a session's writer role, in this process: held across each
    /// brief hold of the role ([`Cache::briefly`]: a search segment build, an eviction) and
    /// across a session's claim ([`SessionCache::try_writer`]), so that a session opened
    /// during a brief hold waits for it rather than open as a reader and take the role over
    /// with a second check.
    turns: Arc<Writers>,
}

/// A cached session as the budget sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session id; `None` for a folder this code did not make.
    pub id: Option<String>,
    /// The folder's name.
    pub key: String,
    /// Bytes held.
    pub size: u64,
    /// The stamp of its last open (0 when never opened).
    pub opened: u64,
}

impl<S: Store> Cache<S> {
    /// The cache of the server at `host:port`, at the root of its origin: [`Cache::for_server`]
    /// with no path prefix.
    pub async fn new(store: Arc<S>, host: &str, port: u16) -> Self {
        Cache::for_server(store, (host, port, "")).await
    }

    /// The cache of the server at `(host, port, prefix)`, as a transport names it
    /// ([`crate::transport::Transport::server`]): its folder is [`server_key`]'s, so two
    /// servers behind one origin under two path prefixes keep two caches. On first use, a
    /// folder of another format version under `transcripts/` is deleted.
    pub async fn for_server(store: Arc<S>, (host, port, prefix): (&str, u16, &str)) -> Self {
        if let Ok(entries) = store.list(ROOT).await {
            for entry in entries.iter().filter(|e| e.name != FORMAT_VERSION) {
                if let Err(e) = store.remove(&format!("{ROOT}/{}", entry.name)).await {
                    log::info!("scrollback: could not delete an old cache format: {e}");
                }
            }
        }
        let dir = format!("{ROOT}/{FORMAT_VERSION}/{}", server_key(host, port, prefix));
        let list = format!("{dir}.sessions.json");
        Cache {
            store,
            dir,
            list,
            search: Memo::default(),
            live: Live::default(),
            indexing: true,
            turns: Arc::default(),
        }
    }

    /// Turns search off (or on again; it is on by default). Off, no session is indexed: each
    /// one's first write after its open removes the index it had, [`Cache::warm_search`]
    /// removes the others' and the server's pack (their bytes go back to the budget), and
    /// [`Cache::search`] finds nothing. Turned on again, each session's index is rebuilt from
    /// its chunks at its first write or open. The tabs of one app should agree: one with
    /// search off removes what one with it on builds.
    pub fn set_search(&mut self, on: bool) {
        self.indexing = on;
    }

    /// Whether search is on ([`Cache::set_search`]).
    pub fn searches(&self) -> bool {
        self.indexing
    }

    /// Keeps `list` as the last session list this server gave (what a reopen opens with, and
    /// what a start without network shows). A failure to write is logged and otherwise ignored:
    /// the cache is never load-bearing.
    pub async fn remember_list(&self, list: &[SessionSummary]) {
        let json = serde_json::to_vec(list).expect("plain data serializes");
        if let Err(e) = self.store.write(&self.list, &json).await {
            log::info!("scrollback: could not keep the session list: {e}");
        }
        // Every tab writes it: what this one holds open of it (an OPFS sync handle, whose lock
        // would stop the others writing it until this worker ends) is let go.
        self.store.hand_over(&self.list).await;
    }

    /// The last session list this server gave, as kept by [`Cache::remember_list`]; empty when
    /// none was kept or it cannot be read.
    pub async fn remembered_list(&self) -> Vec<SessionSummary> {
        match self.store.read(&self.list, 0, usize::MAX).await {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// The summary of session `id` in the remembered list, if it was in it.
    pub async fn remembered(&self, id: &str) -> Option<SessionSummary> {
        self.remembered_list()
            .await
            .into_iter()
            .find(|s| s.id == id)
    }

    /// The store the cache is kept in (shared: the caller may keep other data beside it).
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The folder this server's sessions live in.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The cache of one session. The id is encoded into its folder's name (never used raw);
    /// an empty or over-long id is refused.
    pub fn session(&self, id: &str) -> Result<SessionCache<S>, KeyError> {
        let key = encode(id)?;
        let dir = format!("{}/{key}", self.dir);
        let index = IndexWriter::new(self.live.clone(), key, format!("{dir}/{INDEX}"));
        let (store, turns) = (self.store.clone(), self.turns.clone());
        let mut session = SessionCache::new(store, id.to_string(), dir, index, turns);
        if !self.indexing {
            session.set_indexing(false);
        }
        Ok(session)
    }

    /// Every cached session with its size and last open. Unreadable ones are left out.
    pub async fn sessions(&self) -> Vec<SessionInfo> {
        let Ok(entries) = self.store.list(&self.dir).await else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries {
            let dir = format!("{}/{}", self.dir, entry.name);
            let Ok(blobs) = self.store.list(&dir).await else {
                continue;
            };
            out.push(SessionInfo {
                id: decode(&entry.name),
                size: blobs.iter().map(|b| b.size).sum(),
                opened: blobs
                    .iter()
                    .find(|b| b.name == TOUCH)
                    .map_or(0, |b| b.modified),
                key: entry.name,
            });
        }
        out
    }

    /// Full-text search over every cached session of this server (or only those in
    /// `sessions`): the best `limit` hits, best first. Offline: reads only the store. See
    /// [`crate::search`]. Nothing with search off.
    pub async fn search(&self, query: &str, limit: usize, sessions: Option<&[String]>) -> Vec<Hit> {
        if !self.indexing {
            return Vec::new();
        }
        let ask = || {
            crate::search::reader::search(
                &*self.store,
                &self.dir,
                &self.search,
                &self.live,
                query,
                limit,
                sessions,
            )
        };
        let hits = ask().await;
        // A session whose index blob holds a line that does not read has a row no query
        // finds: its index is rebuilt now (unless a view writes it), and the query asked again.
        let mut rebuilt = false;
        for key in self.search.damaged().await {
            rebuilt |= self.rebuild_index(&key).await;
        }
        match rebuilt {
            true => ask().await,
            false => hits,
        }
    }

    /// Rebuilds the search index of the session whose folder is `key` from its chunks, under
    /// its writer role ([`SessionCache::rebuild_index`]); `false` when another holds the role
    /// (a view writing it: its next open rebuilds it, or a query after that).
    async fn rebuild_index(&self, key: &str) -> bool {
        let Some(Ok(mut session)) = decode(key).map(|id| self.session(&id)) else {
            return false;
        };
        let dir = format!("{}/{key}", self.dir);
        let done = self.briefly(&dir, async {
            session.rebuild_index("a line does not read").await;
            session.hand_over().await;
        });
        if done.await.is_none() {
            return false;
        }
        self.search.forget(key).await;
        self.live.changed(key);
        true
    }

    /// Readies search in idle time (the worker calls it after it opens): builds the segment of
    /// every session whose index blob grew past it ([`Cache::build_search`]), then loads every
    /// session's segment header and what lies past it, so the first search does not wait.
    /// With search off, removes every session's index and the server's pack instead.
    pub async fn warm_search(&self) {
        if !self.indexing {
            return self.remove_search().await;
        }
        self.build_search().await;
        crate::search::reader::warm(&*self.store, &self.dir, &self.search).await;
        self.build_search_pack().await;
    }

    /// Builds the server's search pack ([`crate::search::pack`]: every session's index in one,
    /// for a worker's first query) from what the worker holds once warmed up, if the one in
    /// the store is behind; in idle time, after [`Cache::warm_search`]'s warm-up. Answers
    /// whether it wrote one.
    pub async fn build_search_pack(&self) -> bool {
        if !self.indexing {
            return false;
        }
        let store = &*self.store;
        let built = crate::search::reader::build_pack(store, &self.dir, &self.search).await;
        if built {
            let _ = store.flush().await;
            store.hand_over(&pack::path(&self.dir)).await;
        }
        built
    }

    /// Does `work` holding the writer role of the session folder `dir` for it, in this
    /// process's turn (see `turns`): `None`, with nothing done, when another holds the role (a
    /// tab or a session writing it).
    async fn briefly<T>(&self, dir: &str, work: impl Future<Output = T>) -> Option<T> {
        let turn = self.turns.acquire(dir, true).await;
        let role = self.store.writer(dir, false).await?;
        let done = work.await;
        // The role first: a claim waiting for the turn then finds it free.
        drop(role);
        drop(turn);
        Some(done)
    }

    /// Removes every session's search index (not one whose writer role a tab holds: its
    /// writer removes it at its next write when search is off there too) and the server's
    /// search pack.
    async fn remove_search(&self) {
        if let Ok(entries) = self.store.list(&self.dir).await {
            for key in entries.into_iter().filter(|e| e.is_dir).map(|e| e.name) {
                let dir = format!("{}/{key}", self.dir);
                self.briefly(&dir, async {
                    let index = format!("{dir}/{INDEX}");
                    // For the pack's readers (it goes below, perhaps after another tab read it).
                    if !matches!(self.store.stat(&index).await, Ok(None)) {
                        if let Err(e) = marks::mark(&*self.store, &dir).await {
                            log::info!("scrollback: could not mark {dir} for search: {e}");
                        }
                    }
                    if let Err(e) = writer::remove(&*self.store, &index).await {
                        log::info!("scrollback: could not remove the search index of {dir}: {e}");
                    }
                    self.live.changed(&key);
                    self.store.hand_over(&dir).await;
                })
                .await;
            }
        }
        self.remove_search_pack().await;
    }

    /// Removes the server's search pack, once a build under way in any tab is done (so that it
    /// cannot write back the words of a session removed meanwhile), what a build that was
    /// cut short left under its new name, and then the search marks (with no pack, none is
    /// needed: the next build takes every blob's size and stamp anew).
    async fn remove_search_pack(&self) {
        let path = pack::path(&self.dir);
        let _role = self.store.writer(&path, true).await;
        for path in [format!("{path}.new"), path, marks::folder(&self.dir)] {
            if let Err(e) = self.store.remove(&path).await {
                log::info!("scrollback: could not delete the search pack: {e}");
            }
        }
    }

    /// The bytes of the server's search pack (0 when there is none): the budget counts them.
    pub async fn search_pack_size(&self) -> u64 {
        let pack = self.store.stat(&pack::path(&self.dir)).await;
        pack.ok().flatten().map_or(0, |m| m.size)
    }

    /// Looks at every session's search index again for what another tab wrote, in idle time
    /// (the worker calls it more often than [`crate::search::reader::RECHECK_MS`], so that a
    /// query need not): a stat per session, and a read of the blobs that changed. Does
    /// nothing before the first search or warm-up.
    pub async fn recheck_search(&self) {
        if !self.indexing {
            return;
        }
        crate::search::reader::recheck(&*self.store, &self.dir, &self.search, &self.live).await;
    }

    /// Has `notify` told of every search index blob this cache's writers grow (the session's
    /// folder name and the blob's new size), for the other tabs: see [`Cache::search_told`].
    pub fn on_search_written(&self, notify: Notify) {
        self.live.on_written(notify);
    }

    /// Another tab's writer grew the search index blob of the session whose folder is `key` to
    /// `size` bytes (what its [`Cache::on_search_written`] told): the next search reads it, so
    /// that what another tab just wrote is found at once, not at the next recheck of every
    /// session ([`Cache::recheck_search`]).
    pub fn search_told(&self, key: &str, size: u64) {
        if decode(key).is_some() {
            self.live.told(key, size);
        }
    }

    /// Builds the search segment ([`crate::search::segment`]) of every cached session whose
    /// index blob holds enough past its segment, each under its writer role (a session another
    /// tab or this worker is writing is left for later). Answers how many were built.
    pub async fn build_search(&self) -> usize {
        if !self.indexing {
            return 0;
        }
        let Ok(entries) = self.store.list(&self.dir).await else {
            return 0;
        };
        self.live.take_unbuilt(); // every session is looked at below
        let keys = entries.into_iter().filter(|e| e.is_dir).map(|e| e.name);
        self.build_segments(keys.collect()).await
    }

    /// [`Cache::build_search`] over the sessions whose index this worker wrote since the last
    /// build (the worker calls it in idle time, every minute).
    pub async fn build_written(&self) -> usize {
        if !self.indexing {
            return 0;
        }
        let keys = self.live.take_unbuilt();
        self.build_segments(keys.into_iter().collect()).await
    }

    async fn build_segments(&self, keys: Vec<String>) -> usize {
        let mut built = 0;
        for key in keys {
            let dir = format!("{}/{key}", self.dir);
            if !segment::stale(&*self.store, &dir).await {
                continue;
            }
            let done = self.briefly(&dir, async {
                let done = segment::build(&*self.store, &dir).await;
                let _ = self.store.flush().await;
                self.store.hand_over(&dir).await;
                done
            });
            let Some(done) = done.await else {
                self.live.unbuilt(&key);
                continue;
            };
            match done {
                Ok(false) => {
                    // A line that does not read: the index is indexed again (built next time).
                    if self.rebuild_index(&key).await {
                        self.live.unbuilt(&key);
                    }
                }
                Ok(true) => {
                    built += 1;
                    // Loaded again, from the segment, by the next query.
                    self.search.forget(&key).await;
                    self.live.changed(&key);
                }
                Err(e) => log::info!("scrollback: no search segment for {dir}: {e}"),
            }
        }
        built
    }

    /// Deletes every cached session whose id is not in `ids` (the server's list), and any
    /// folder that is not a session's; not one whose writer role a tab holds (a list that
    /// left it out for a moment must not delete what a view is writing: the next list does,
    /// once nobody writes it, and a view of a session the server deleted purges its own).
    pub async fn retain_only<I: AsRef<str>>(&self, ids: &[I]) {
        let keep: Vec<String> = ids
            .iter()
            .filter_map(|id| encode(id.as_ref()).ok())
            .collect();
        // Names only: sizes and stamps are not needed here, and OPFS asks every file for them
        // (a list runs on every fetch of the session list).
        let Ok(names) = self.store.names(&self.dir).await else {
            return;
        };
        for key in names {
            if !keep.contains(&key) {
                self.remove_unless_written(&key).await;
            }
        }
    }

    /// Deletes one session's cache.
    pub async fn purge(&self, id: &str) {
        if let Ok(key) = encode(id) {
            self.remove(&key).await;
        }
    }

    /// Deletes this server's whole cache: every session's chunks and search index, the
    /// server's search pack and the remembered session list; not a session whose writer role
    /// another holds (a tab's view still shows and writes it: deleting its folder under it would
    /// leave that tab writing a cache with a hole). Returns the ids of the sessions kept that
    /// way, oldest opened first: empty when everything went.
    pub async fn clear(&self) -> Vec<String> {
        let (mut kept, mut all_gone) = (Vec::new(), true);
        let mut sessions = self.sessions().await;
        sessions.sort_by(|a, b| (a.opened, &a.key).cmp(&(b.opened, &b.key)));
        for session in sessions {
            if !self.remove_unless_written(&session.key).await {
                all_gone = false;
                kept.extend(session.id);
            }
        }
        if let Err(e) = self.store.remove(&self.list).await {
            log::info!("scrollback: could not delete the remembered session list: {e}");
        }
        self.remove_search_pack().await;
        if all_gone {
            // And whatever else the folder holds (a folder no session id names).
            self.live.removed_all();
            match self.store.remove(&self.dir).await {
                // Told again once it is gone, as for one session (see `remove`).
                Ok(()) => self.live.relist(),
                Err(e) => log::info!("scrollback: could not delete the cache's folder: {e}"),
            }
        }
        kept
    }

    /// The bytes one session's cache holds (0 when nothing or unreadable).
    pub async fn session_size(&self, id: &str) -> u64 {
        let Ok(key) = encode(id) else {
            return 0;
        };
        dir_size(&*self.store, &format!("{}/{key}", self.dir))
            .await
            .unwrap_or(0)
    }

    /// Deletes the least recently opened sessions, never `keep` (the one on screen) nor one
    /// whose writer role another tab holds, until the server's cache (its sessions, their
    /// search indexes, and the search pack) holds at most `budget` bytes. Returns the ids
    /// deleted, oldest first.
    ///
    /// Lists every session and the size of each of its blobs: the engine runs it beside the
    /// stream of each open that writes, never before the first rows or the stream.
    pub async fn enforce_budget(&self, budget: u64, keep: &str) -> Vec<String> {
        let sessions = self.sessions().await;
        let pack = self.search_pack_size().await;
        self.evict_until(sessions, pack, keep, |_| budget).await
    }

    /// What follows a write of session `keep` the store refused for its quota
    /// ([`StoreError::QuotaExceeded`](crate::store::StoreError::QuotaExceeded)): the origin is
    /// full though the cache may be far under its budget (a private window, a small disk, a
    /// webview's small quota), and nothing else would ever free it. Deletes the least recently
    /// opened sessions, never `keep` nor one whose writer role another tab holds, until half
    /// the bytes the other sessions (their indexes with them) and the search pack held are
    /// gone. Returns the ids deleted, oldest first.
    ///
    /// Why half: the quota is the origin's, shared with what this cache does not see (other
    /// servers' caches, the app's own data), and the refusal does not say how much more was
    /// needed. Half frees room for a good while of writing in one scan of every session, and
    /// keeps the more recently opened half; on a quota that stays small, each later refusal
    /// halves again, so it settles in a few opens without throwing the whole cache away at
    /// the first one.
    pub async fn relieve_quota(&self, keep: &str) -> Vec<String> {
        let sessions = self.sessions().await;
        let pack = self.search_pack_size().await;
        let key = encode(keep).ok();
        let others = pack
            + (sessions.iter())
                .filter(|s| Some(&s.key) != key.as_ref())
                .map(|s| s.size)
                .sum::<u64>();
        self.evict_until(sessions, pack, keep, |total| total - others.div_ceil(2))
            .await
    }

    /// Deletes the least recently opened of `sessions`, never `keep` nor one whose writer role
    /// another holds, until they and the search pack (`pack` bytes, deleted with the first)
    /// hold at most `budget(total)` bytes, `total` what they hold now. Returns the ids
    /// deleted, oldest first.
    async fn evict_until(
        &self,
        mut sessions: Vec<SessionInfo>,
        mut pack: u64,
        keep: &str,
        budget: impl FnOnce(u64) -> u64,
    ) -> Vec<String> {
        let keep = encode(keep).ok();
        let mut total = sessions.iter().map(|s| s.size).sum::<u64>() + pack;
        let budget = budget(total);
        sessions.sort_by(|a, b| (a.opened, &a.key).cmp(&(b.opened, &b.key)));
        let mut evicted = Vec::new();
        for session in sessions {
            if total <= budget {
                break;
            }
            if Some(&session.key) == keep.as_ref() {
                continue;
            }
            // A session another tab is writing is not this one's to evict.
            if self.remove_unless_written(&session.key).await {
                total -= session.size + std::mem::take(&mut pack); // the pack went with it
                evicted.extend(session.id);
            }
        }
        evicted
    }

    /// Deletes one session's folder ([`Cache::remove`]) in its turn of the writer role, unless
    /// another holds the role (a tab's view writing it). Returns whether it was deleted.
    async fn remove_unless_written(&self, key: &str) -> bool {
        let dir = format!("{}/{key}", self.dir);
        self.briefly(&dir, self.remove(key)).await == Some(true)
    }

    /// Deletes one session's folder, and the search pack (which holds its words: built again
    /// in idle time without them).
    async fn remove(&self, key: &str) -> bool {
        self.live.removed(key);
        self.remove_search_pack().await;
        match self.store.remove(&format!("{}/{key}", self.dir)).await {
            Ok(()) => {
                // Told again once it is gone: a query that ran while the remove waited (OPFS
                // waits for another tab's handles to close) read the blob back into memory,
                // and would have kept answering with it until the next full recheck. The
                // other tabs are told too.
                self.live.changed(key);
                self.live.gone(key);
                true
            }
            Err(e) => {
                log::info!("scrollback: could not delete a cached session: {e}");
                false
            }
        }
    }
}
