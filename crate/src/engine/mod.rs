//! The sync engine: what makes a reopened conversation cost one tiny request (seed 000).
//!
//! [`Engine`] is one server: its cache ([`Cache`]) and its [`Transport`]. It lists sessions
//! (pruning the cache of sessions the server no longer has), deletes them (purging their
//! cache), and opens a [`Session`]. A session draws its cached rows before any request returns,
//! checks the cached tail with one probe, streams from the newest cached event, and pages back
//! through the cache, asking the server only for gaps. What it shows is a [`View`]: the fold's
//! rows and state plus the banner, `moreHistory`, `ready` and counters.
//!
//! Generic over [`Store`] and [`Transport`], single-threaded and runtime-agnostic: the same
//! code runs in a browser worker and natively under tokio or any executor.

mod session;
mod view;

pub use session::Session;
pub use view::{Change, Counters, SavedScreen, SessionError, View};

use crate::chunks::{Cache, KeyError};
use crate::protocol::{
    SessionSummary, CACHE_BUDGET_BYTES, HISTORY_PAGE, KEEP_ALIVE_MS, OPENING_WINDOW,
    RECONNECT_DELAY_MS, SILENT_INTERVALS,
};
use crate::store::Store;
use crate::transport::{Transport, TransportResult};
use std::rc::Rc;
use std::sync::Arc;

/// The engine's numbers; [`Config::default`] is the protocol's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Raw events in the opening window, cached or fetched ([`OPENING_WINDOW`]).
    pub opening_window: usize,
    /// Rows in an older page ([`HISTORY_PAGE`]).
    pub page_rows: usize,
    /// A byte budget for older pages fetched from the server: the page stops at whichever of
    /// `page_rows` and this comes first, so a page of huge rows (a long tool output) does not
    /// download more than a screenful. `None` asks by rows only.
    pub page_bytes: Option<usize>,
    /// Milliseconds before the first retry of a failed probe or stream ([`RECONNECT_DELAY_MS`]);
    /// each further failure in a row doubles it, with jitter, up to `reconnect_max_ms`.
    pub reconnect_delay_ms: u32,
    /// The longest wait between two retries.
    pub reconnect_max_ms: u32,
    /// The cache's byte budget for this server ([`CACHE_BUDGET_BYTES`]), enforced beside the
    /// stream of each open that writes (never delaying its first rows or its stream) by
    /// evicting the least recently opened sessions (never the one opening, nor one another tab
    /// writes). A write the storage refuses for its quota evicts too, under the budget
    /// ([`Cache::relieve_quota`]).
    pub budget_bytes: u64,
    /// Whether cached sessions are indexed for [`Engine::search`] (on by default); see
    /// [`Cache::set_search`] for what turning it off does.
    pub search: bool,
    /// How long an event stream may stay silent before its keep-alive has named an interval:
    /// the limit the protocol's default interval sets ([`KEEP_ALIVE_MS`] ×
    /// [`SILENT_INTERVALS`], 45 s). The stream opens with its keep-alive, so a stream silent
    /// that long from its start is held by something in between (a proxy that buffers it), and
    /// is reconnected through its catch-up like any stream that went silent. `None`: not timed
    /// until the server names an interval (a server that sends no keep-alive).
    pub first_frame_ms: Option<u32>,
    /// How long the check or the opening window may go unanswered before the banner says the
    /// server has not answered yet ([`SLOW_ANSWER_MS`]): a stalled connection or a very slow
    /// network is otherwise silent until the request's timeout, a minute.
    pub slow_answer_ms: u32,
}

/// [`Config::slow_answer_ms`]'s default: 5 s.
pub const SLOW_ANSWER_MS: u32 = 5_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            opening_window: OPENING_WINDOW,
            page_rows: HISTORY_PAGE,
            page_bytes: Some(64 << 10),
            reconnect_delay_ms: RECONNECT_DELAY_MS,
            reconnect_max_ms: 8 * RECONNECT_DELAY_MS,
            budget_bytes: CACHE_BUDGET_BYTES,
            search: true,
            first_frame_ms: Some(KEEP_ALIVE_MS * SILENT_INTERVALS),
            slow_answer_ms: SLOW_ANSWER_MS,
        }
    }
}

/// One server: its cache and its transport.
pub struct Engine<S: Store, T: Transport> {
    cache: Rc<Cache<S>>,
    transport: Rc<T>,
    config: Config,
}

impl<S: Store, T: Transport> Engine<S, T> {
    /// The composition root, what every front end (the CLI, the browser worker) starts with:
    /// the engine of the server `transport` reaches, its cache kept in `store` (under the
    /// server's own folder, [`Transport::server`]; a cache of another format version is
    /// deleted on the way), with `config`'s numbers. The store stays reachable through
    /// [`Cache::store`] for whatever else the caller keeps beside the cache.
    pub async fn assemble(store: Arc<S>, transport: T, config: Config) -> Self {
        let cache = Cache::for_server(store, transport.server()).await;
        Engine::new(cache, transport, config)
    }

    /// An engine over `cache` (one server's part of the store) and `transport` (the same
    /// server's routes).
    pub fn new(mut cache: Cache<S>, transport: T, config: Config) -> Self {
        cache.set_search(config.search);
        Engine {
            cache: Rc::new(cache),
            transport: Rc::new(transport),
            config,
        }
    }

    /// The cache.
    pub fn cache(&self) -> &Cache<S> {
        &self.cache
    }

    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The engine's numbers.
    pub fn config(&self) -> Config {
        self.config
    }

    /// The session list; every successful fetch prunes the cache of sessions the server no
    /// longer has (seed 000, decision 9) and is remembered in the store, so that a reopen needs
    /// no list and a start without network can show one ([`Engine::cached_sessions`]).
    pub async fn sessions(&self) -> TransportResult<Vec<SessionSummary>> {
        let list = self.transport.sessions().await?;
        let ids: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
        self.cache.retain_only(&ids).await;
        self.cache.remember_list(&list).await;
        Ok(list)
    }

    /// Full-text search over every cached session of the server (or those in `sessions`),
    /// offline: the best `limit` hits, each with the seq to open its session at
    /// ([`Engine::open_id`] with it as the anchor). See [`crate::search`]. Nothing when the
    /// config turned search off.
    pub async fn search(
        &self,
        query: &str,
        limit: usize,
        sessions: Option<&[String]>,
    ) -> Vec<crate::search::Hit> {
        self.cache.search(query, limit, sessions).await
    }

    /// Readies search ahead of the first [`Engine::search`]: builds the segments that are
    /// behind and loads every session's index ([`Cache::warm_search`]).
    pub async fn warm_search(&self) {
        self.cache.warm_search().await;
    }

    /// Looks at every session's search index again for what another tab wrote
    /// ([`Cache::recheck_search`]): what the worker does in idle time, so that a search does
    /// not.
    pub async fn recheck_search(&self) {
        self.cache.recheck_search().await;
    }

    /// Builds the search segments of the sessions this engine wrote since the last build
    /// ([`Cache::build_written`]): what the worker does in idle time.
    pub async fn build_search(&self) -> usize {
        self.cache.build_written().await
    }

    /// The sessions this cache holds, each with what is known of it without the network: its
    /// summary from the last list fetched (newest first, as the server lists), or for a
    /// session cached but not in that list, its id and newest cached seq. What a start without
    /// network lists.
    pub async fn cached_sessions(&self) -> Vec<SessionSummary> {
        let cached: Vec<String> = self
            .cache
            .sessions()
            .await
            .into_iter()
            .filter(|s| s.size > 0)
            .filter_map(|s| s.id)
            .collect();
        let mut out: Vec<SessionSummary> = self
            .cache
            .remembered_list()
            .await
            .into_iter()
            .filter(|s| cached.contains(&s.id))
            .collect();
        for id in cached {
            if out.iter().any(|s| s.id == id) {
                continue;
            }
            let Ok(mut session) = self.cache.session(&id) else {
                continue;
            };
            // Read only: another tab may be writing it (no repair, no touch, no index).
            session.set_reader(true);
            let Some(cursor) = session.cursor().await else {
                continue;
            };
            out.push(SessionSummary {
                title: id.clone(),
                id,
                status: String::new(),
                model: String::new(),
                permission_mode: String::new(),
                seq: cursor.seq(),
            });
        }
        out
    }

    /// Deletes a session on the server, then purges its cache.
    pub async fn delete(&self, id: &str) -> TransportResult<()> {
        self.transport.delete(id).await?;
        self.cache.purge(id).await;
        Ok(())
    }

    /// Opens `summary`'s session (nothing happens until [`Session::run`] is polled; the
    /// session holds the cache and transport, so it may outlive this borrow), restoring
    /// the reader to `anchor` (a seq saved at the reader's position) when given.
    ///
    /// An id the cache cannot name a folder after (empty, or too long) is refused.
    pub fn open(
        &self,
        summary: SessionSummary,
        anchor: Option<u64>,
    ) -> Result<Session<S, T>, KeyError> {
        let cache = self.cache.session(&summary.id)?;
        Ok(Session::new(
            self.cache.clone(),
            cache,
            self.transport.clone(),
            summary.id.clone(),
            Some(summary),
            anchor,
            self.config,
        ))
    }

    /// Opens session `id` without its summary, and without asking for one: the reopen's check
    /// brings the fresh summary (and until then the remembered one, if the last list had it,
    /// is applied once the cached rows are drawn). The cached rows never wait for the network.
    /// See [`Engine::open`].
    pub async fn open_id(&self, id: &str, anchor: Option<u64>) -> Result<Session<S, T>, KeyError> {
        let cache = self.cache.session(id)?;
        Ok(Session::new(
            self.cache.clone(),
            cache,
            self.transport.clone(),
            id.to_string(),
            None,
            anchor,
            self.config,
        ))
    }
}
