//! `Client`: one server's cache, transport and engine, as the worker holds it.

use super::chats::{ChatOptions, ChatState, Chats};
use super::error::{anchor, to_js, BindingError};
use super::session::{SessionHandle, Tally};
use super::tabs::Tabs;
use crate::engine::{Config, Engine};
use crate::protocol::SessionSummary;
use crate::store::{open_store, Backend, BrowserStore, Store};
use crate::transport::BrowserTransport;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

/// The engine the worker runs: the browser's storage and network.
pub(super) type BrowserEngine = Engine<BrowserStore, BrowserTransport>;

/// `Scrollback.open`'s options, as the page passes them.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    server: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    storage: Option<String>,
    #[serde(default)]
    budget_bytes: Option<u64>,
    #[serde(default)]
    search: Option<bool>,
}

impl Options {
    /// The engine's numbers: the protocol's, with the page's budget and search when it gives
    /// them.
    fn config(&self) -> Config {
        let mut config = Config::default();
        if let Some(budget) = self.budget_bytes {
            config.budget_bytes = budget;
        }
        config.search = self.search.unwrap_or(true);
        config
    }
}

/// What `counters()` answers.
#[derive(Debug, Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
struct Counters {
    requests: u64,
    bytes_downloaded: u64,
    pages_local: u64,
    probes_passed: u64,
    probes_failed: u64,
}

/// One server's cache: lists, opens, deletes and posts. Made by `Client.open(options)`.
#[wasm_bindgen]
pub struct Client {
    engine: Rc<BrowserEngine>,
    summaries: Rc<RefCell<HashMap<String, SessionSummary>>>,
    tally: Rc<Tally>,
    chats: Rc<ChatState>,
    /// The other tabs, told what this worker's search writers grew, and telling its searches.
    tabs: Option<Rc<Tabs>>,
}

#[wasm_bindgen]
impl Client {
    /// Opens the cache for `options.server` (`{server, token?, storage?, budgetBytes?,
    /// search?}`).
    /// Resolves to a `Client`.
    pub fn open(options: JsValue) -> js_sys::Promise {
        future_to_promise(async move {
            let options: Options =
                super::options::read("options", options).map_err(BindingError::Options)?;
            let storage = options.storage.as_deref().unwrap_or("auto");
            let backend =
                Backend::parse(storage).ok_or_else(|| BindingError::Storage(storage.into()))?;
            let config = options.config();
            let transport = BrowserTransport::new(&options.server, options.token)
                .map_err(BindingError::from)?;
            let store = open_store(backend).await.map_err(BindingError::from)?;
            log::info!(
                "scrollback: {} cached in {}",
                transport.base(),
                store.name()
            );
            let engine = Rc::new(Engine::assemble(Arc::new(store), transport, config).await);
            Ok(Client {
                chats: ChatState::new(engine.cache().store().clone()),
                tabs: Tabs::join(&engine).map(Rc::new),
                engine,
                summaries: Rc::default(),
                tally: Rc::default(),
            }
            .into())
        })
    }

    /// Takes over the reopen's check that the page asked at `url` before the worker was up
    /// (`Scrollback.open`'s `opening`): `answer` resolves to `{status, body}` or null. The
    /// session's first check awaits it instead of asking again (`BrowserTransport::expect`).
    pub fn expect(&self, url: String, answer: js_sys::Promise) {
        self.engine.transport().expect(url, answer);
    }

    /// Replaces the server's token (an app's access token refreshed; `null` or empty: none) for
    /// every request and stream from now on, and opens again each open session the server had
    /// stopped for its token (`unauthorized`), from its cache.
    #[wasm_bindgen(js_name = setToken)]
    pub fn set_token(&self, token: Option<String>) {
        self.engine.transport().set_token(token);
        self.tally.resume();
    }

    /// The engine (shared with the benchmark hooks).
    pub(super) fn engine(&self) -> Rc<BrowserEngine> {
        self.engine.clone()
    }

    /// The storage the cache opened on: `"opfs"`, `"indexeddb"` or `"memory"` (with `auto`,
    /// the one that worked here).
    #[wasm_bindgen(getter)]
    pub fn storage(&self) -> String {
        self.engine.cache().store().name().to_string()
    }

    /// The session list (`[{id, title, status, model, permissionMode, seq}]`); prunes the cache
    /// of sessions the server no longer has, and is remembered in the store; each open session
    /// takes its summary from it. When the server cannot be reached, the cached sessions as the
    /// last list described them, each marked `offline: true`.
    pub fn sessions(&self) -> js_sys::Promise {
        let engine = self.engine.clone();
        let summaries = self.summaries.clone();
        let tally = self.tally.clone();
        future_to_promise(async move {
            #[derive(Serialize)]
            struct Offline<'a> {
                #[serde(flatten)]
                summary: &'a SessionSummary,
                offline: bool,
            }
            match engine.sessions().await {
                Ok(list) => {
                    *summaries.borrow_mut() =
                        list.iter().map(|s| (s.id.clone(), s.clone())).collect();
                    tally.take_summaries(&list);
                    Ok(to_js(&list)?)
                }
                Err(e) if !e.is_client_error() => {
                    let cached = engine.cached_sessions().await;
                    // Nothing cached: not an empty list (the server's might hold sessions),
                    // the error, so an app can say it cannot reach the server.
                    if cached.is_empty() {
                        return Err(BindingError::from(e).into());
                    }
                    log::info!("scrollback: {e}: listing the cached sessions");
                    let list: Vec<Offline<'_>> = cached
                        .iter()
                        .map(|summary| Offline {
                            summary,
                            offline: true,
                        })
                        .collect();
                    Ok(to_js(&list)?)
                }
                Err(e) => Err(BindingError::from(e).into()),
            }
        })
    }

    /// Opens a session and keeps it live; `on_change` is called (with no arguments) after each
    /// change. Resolves to a `SessionHandle` at once: nothing is asked of the network first.
    /// The session's summary comes from the last list (this page's, or the one remembered in
    /// the store), and the fresh one travels with the reopen's check.
    #[wasm_bindgen(js_name = openSession)]
    pub fn open_session(
        &self,
        id: String,
        at: JsValue,
        on_change: js_sys::Function,
    ) -> js_sys::Promise {
        let engine = self.engine.clone();
        let summaries = self.summaries.clone();
        let tally = self.tally.clone();
        future_to_promise(async move {
            let at = anchor(at)?;
            // An id no URL can hold is the caller's mistake, refused before a view starts.
            crate::transport::usable_id(&id).map_err(BindingError::from)?;
            tally.closed_runs_ended(Some(&id)).await;
            let known = summaries.borrow().get(&id).cloned();
            let session = match known {
                Some(summary) => engine.open(summary, at),
                None => engine.open_id(&id, at).await,
            }
            .map_err(|e| BindingError::Key(id.clone(), e))?;
            Ok(SessionHandle::start(session, on_change, tally).into())
        })
    }

    /// Finishes what the cache was writing, for a worker about to end: resolves once every
    /// closed session's run has ended (its writer role given up, its appends committed) and
    /// the store's buffered writes are committed, and the other tabs are told what its search
    /// indexes grew since its last notice. Close the sessions first; a session still open
    /// keeps this waiting.
    pub fn close(&self) -> js_sys::Promise {
        let engine = self.engine.clone();
        let tally = self.tally.clone();
        let tabs = self.tabs.clone();
        future_to_promise(async move {
            tally.settled().await;
            if let Err(e) = engine.cache().store().flush().await {
                log::info!("scrollback: a buffered write failed as the cache closed: {e}");
            }
            // What the last writes grew, told now: the other tabs' searches find it at once.
            if let Some(tabs) = tabs {
                tabs.flush();
            }
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Posts a user message to a session.
    #[wasm_bindgen(js_name = postMessage)]
    pub fn post_message(&self, id: String, text: String) -> js_sys::Promise {
        let engine = self.engine.clone();
        future_to_promise(async move {
            use crate::transport::Transport;
            engine
                .transport()
                .post_message(&id, &text)
                .await
                .map_err(BindingError::from)?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Full-text search over every cached session (or those in `sessions`), offline: the best
    /// `limit` hits (`[{session, seq, ts, score, snippet: [{text, hit}]}]`), best first.
    /// Fails when the cache was opened with `search: false`.
    pub fn search(
        &self,
        query: String,
        limit: u32,
        sessions: Option<Vec<String>>,
    ) -> js_sys::Promise {
        let engine = self.engine.clone();
        let tally = self.tally.clone();
        future_to_promise(async move {
            if !engine.cache().searches() {
                return Err(BindingError::SearchOff.into());
            }
            // What the views showed is searched: the pages they are still storing too.
            tally.stored().await;
            let hits = engine
                .search(&query, limit as usize, sessions.as_deref())
                .await;
            Ok(to_js(&hits)?)
        })
    }

    /// Readies search ahead of the first `search`: builds the search segments that are behind
    /// their blobs and loads every session's index (the worker calls it in idle time after
    /// it opens). A view closed just before gives up its session's writer role first (after
    /// the page it was still storing), so that its segment is built now, not skipped until the
    /// next idle build.
    #[wasm_bindgen(js_name = warmSearch)]
    pub fn warm_search(&self) -> js_sys::Promise {
        let engine = self.engine.clone();
        let tally = self.tally.clone();
        future_to_promise(async move {
            tally.closed_runs_ended(None).await;
            engine.warm_search().await;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Looks at every session's search index again for what another tab wrote (the worker
    /// calls it in idle time, more often than a search would, so that a search does not).
    #[wasm_bindgen(js_name = recheckSearch)]
    pub fn recheck_search(&self) -> js_sys::Promise {
        let engine = self.engine.clone();
        future_to_promise(async move {
            engine.recheck_search().await;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Builds the search segments of the sessions this worker wrote since the last build;
    /// resolves to how many were built (the worker calls it in idle time, every minute).
    #[wasm_bindgen(js_name = buildSearch)]
    pub fn build_search(&self) -> js_sys::Promise {
        let engine = self.engine.clone();
        future_to_promise(async move { Ok(JsValue::from(engine.build_search().await as u32)) })
    }

    /// Deletes a session on the server, then purges its cache.
    #[wasm_bindgen(js_name = deleteSession)]
    pub fn delete_session(&self, id: String) -> js_sys::Promise {
        let engine = self.engine.clone();
        let summaries = self.summaries.clone();
        future_to_promise(async move {
            engine.delete(&id).await.map_err(BindingError::from)?;
            summaries.borrow_mut().remove(&id);
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Deletes this server's cache in this browser ([`crate::chunks::Cache::clear`]): every
    /// session's chunks and search index, the server's search pack and the remembered session
    /// list (the chat files are the app's, and stay). Refused while a session of this worker is
    /// open; waits for the runs of the closed ones to end (their writer roles given up).
    /// Resolves to the ids of the sessions kept because another tab is writing them.
    #[wasm_bindgen(js_name = clearCache)]
    pub fn clear_cache(&self) -> js_sys::Promise {
        let engine = self.engine.clone();
        let summaries = self.summaries.clone();
        let tally = self.tally.clone();
        future_to_promise(async move {
            match tally.open_count() {
                0 => {}
                open => return Err(BindingError::ViewsOpen(open).into()),
            }
            tally.settled().await;
            let kept = engine.cache().clear().await;
            summaries.borrow_mut().clear();
            Ok(to_js(&kept)?)
        })
    }

    /// The windowed chat files (`chats/<name>.jsonl`) in the same storage as the cache, with
    /// `{windowLines?, backfillPages?}`. Every handle shares one set of per-chat write locks;
    /// each has its own backfill page cache.
    pub fn chats(&self, options: JsValue) -> Result<Chats, JsValue> {
        let options = ChatOptions::from_js(options)?;
        Ok(Chats::with_options(self.chats.clone(), options)?)
    }

    /// `{requests, bytesDownloaded, pagesLocal, probesPassed, probesFailed}` since `open`:
    /// everything sent and received, and the cache hits of every session opened.
    pub fn counters(&self) -> Result<JsValue, BindingError> {
        let wire = self.engine.transport().counters();
        let (pages_local, probes_passed, probes_failed) = self.tally.sum();
        to_js(&Counters {
            requests: wire.requests,
            bytes_downloaded: wire.bytes,
            pages_local,
            probes_passed,
            probes_failed,
        })
    }
}
