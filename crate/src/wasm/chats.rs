//! `Chats`: the windowed chat files (the `window` module) and prompt backfill, over the same
//! browser storage as the worker's cache.
//!
//! A chat is named by the app; it lives at `chats/<name>.jsonl` in the store, the name
//! normalized by the window module's one rule ([`window::normalize_chat_name`]: trimmed, without
//! `.jsonl`) and checked by its path rules (no empty, `.` or `..` segment), so a hostile name is
//! refused rather than used raw, and a chat stored under an older spelling is still found.
//!
//! A `Chats` handle comes from `Client.chats(options)` (beside a server's cache) or from
//! `Chats.open(options)` (the chat store alone, no server). Its options: `windowLines`, the
//! default window (a tail's and a page's lines), and `backfillPages`, its backfill page cache's
//! capacity (`"desktop"` 12, `"mobile"` 8, or a number). Every window error becomes a JS `Error` named
//! `ChatError` whose `kind` is [`WindowError::kind`] (`signatureMismatch`, `integrityMismatch`,
//! ...), so an app can tell a stale cursor from a bad request (the conversion is
//! [`BindingError`]'s, the one every binding call's error takes).

use super::error::{to_js, BindingError};
use super::options;
use crate::store::{open_store, Backend, BrowserStore, Store};
use crate::window::{
    self, BackfillRequest, BackfillStop, CharsPerToken, Cursor, PatchOp, PromptBackfill,
    WindowError, WriteOptions,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

/// The folder chats live in.
const FOLDER: &str = "chats";

/// The chats of one store: one set of per-chat write locks, shared by every `Chats` handle.
/// The store is the worker's one backend instance, shared with the transcript cache (an `Arc`
/// is a store), so OPFS handles and IndexedDB's buffered appends are never doubled.
pub(super) struct ChatState {
    chats: window::Chats<Arc<BrowserStore>>,
    store: Arc<BrowserStore>,
}

impl ChatState {
    pub(super) fn new(store: Arc<BrowserStore>) -> Rc<Self> {
        Rc::new(ChatState {
            chats: window::Chats::new(store.clone()),
            store,
        })
    }
}

/// A handle's options, as JS gives them (`sb.chats`, `withOptions`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChatOptions {
    #[serde(default)]
    window_lines: Option<usize>,
    #[serde(default)]
    backfill_pages: Option<BackfillPages>,
}

/// `Chats.open`'s options: the storage to open, and the first handle's options.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OpenOptions {
    #[serde(default)]
    storage: Option<String>,
    #[serde(default)]
    window_lines: Option<usize>,
    #[serde(default)]
    backfill_pages: Option<BackfillPages>,
}

/// `backfillPages`: a preset or a number of pages.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum BackfillPages {
    Pages(usize),
    Preset(String),
}

/// Options from JS: none (`undefined`, `null`) or an object with only the keys `T` takes.
fn options_from_js<T: DeserializeOwned + Default>(value: JsValue) -> Result<T, BindingError> {
    if value.is_undefined() || value.is_null() {
        return Ok(T::default());
    }
    options::read("options", value).map_err(BindingError::Options)
}

impl ChatOptions {
    pub(super) fn from_js(value: JsValue) -> Result<Self, BindingError> {
        let storage = match value.is_object() {
            true => js_sys::Reflect::get(&value, &JsValue::from_str("storage")).ok(),
            false => None,
        };
        if storage.is_some_and(|s| !s.is_undefined()) {
            return Err(BindingError::Options(
                "storage is chosen when the store opens (Scrollback.open or Scrollback.chats)"
                    .into(),
            ));
        }
        options_from_js(value)
    }

    fn window_lines(&self) -> Result<usize, BindingError> {
        match self.window_lines {
            None => Ok(DEFAULT_MAX_LINES),
            Some(0) => Err(BindingError::Options(
                "windowLines must be at least 1".into(),
            )),
            Some(n) => Ok(n),
        }
    }

    fn backfill_pages(&self) -> Result<usize, BindingError> {
        match &self.backfill_pages {
            None => Ok(PromptBackfill::DESKTOP_PAGES),
            Some(BackfillPages::Pages(0)) => Err(BindingError::Options(
                "backfillPages must be at least 1".into(),
            )),
            Some(BackfillPages::Pages(n)) => Ok(*n),
            Some(BackfillPages::Preset(p)) => match p.as_str() {
                "desktop" => Ok(PromptBackfill::DESKTOP_PAGES),
                "mobile" => Ok(PromptBackfill::MOBILE_PAGES),
                _ => Err(BindingError::Options(format!(
                    "backfillPages is \"desktop\" (12), \"mobile\" (8) or a number, got {p:?}"
                ))),
            },
        }
    }
}

/// The windowed chat files of a storage, with this handle's window size and backfill cache.
/// Made by `Client.chats(options)` or `Chats.open(options)`.
#[wasm_bindgen]
pub struct Chats {
    state: Rc<ChatState>,
    backfill: Rc<PromptBackfill>,
    window_lines: usize,
}

impl Chats {
    /// A handle on `state` with `options` (which may not name a storage: the store is open).
    pub(super) fn with_options(
        state: Rc<ChatState>,
        options: ChatOptions,
    ) -> Result<Chats, BindingError> {
        Ok(Chats {
            state,
            backfill: Rc::new(PromptBackfill::new(options.backfill_pages()?)),
            window_lines: options.window_lines()?,
        })
    }

    /// Runs `work` on the chat called `name`, converting its result and errors for JS.
    fn with<T, F, Fut>(&self, name: String, work: F) -> js_sys::Promise
    where
        T: Serialize,
        F: FnOnce(Rc<ChatState>, String) -> Fut + 'static,
        Fut: Future<Output = Result<T, WindowError>> + 'static,
    {
        let state = self.state.clone();
        future_to_promise(async move {
            // Normalized and checked first, so a bad name fails before any argument is looked at.
            let key = window::chat_path(FOLDER, &name).map_err(BindingError::from)?;
            // The app's other tabs and workers share the chat: each call holds the chat's Web
            // Lock from start to end, so no other tab's write lands between this call's checks
            // and its write (the in-process lock of `window::Chats` covers this worker only).
            // The window layer lets go of the files when a write ends (see `signature::let_go`).
            let _chat_lock = state.store.writer(&key, true).await;
            // Found under an older spelling (and moved) under the lock too.
            let path = state
                .chats
                .named(FOLDER, &name)
                .await
                .map_err(BindingError::from)?
                .path()
                .to_string();
            let value = work(state, path).await.map_err(BindingError::from)?;
            Ok(to_js(&value)?)
        })
    }
}

/// `tail`'s options.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TailOptions {
    #[serde(default)]
    max_lines: Option<usize>,
    #[serde(default)]
    allow_not_found: bool,
}

/// `backfill`'s request, as JS gives it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsBackfill {
    window: Vec<String>,
    cursor: Cursor,
    has_more_before: bool,
    budget_tokens: usize,
    #[serde(default)]
    page_lines: Option<usize>,
    #[serde(default = "default_max_pages")]
    max_pages: usize,
    #[serde(default)]
    max_messages: Option<usize>,
    #[serde(default)]
    chars_per_token: Option<usize>,
}

fn default_max_pages() -> usize {
    PromptBackfill::DESKTOP_PAGES
}

/// A handle's window when its options do not say (the seed's desktop window).
const DEFAULT_MAX_LINES: usize = 50;

/// What `backfill` resolves to.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct JsBackfillResult {
    older: Vec<String>,
    window_tokens: usize,
    older_tokens: usize,
    stop: &'static str,
    /// The stale cursor's error (`{kind, message}`) when `stop` is `staleCursor`.
    stale: Option<StaleError>,
    pages_cached: usize,
    pages_read: usize,
}

#[derive(Debug, Serialize)]
struct StaleError {
    kind: &'static str,
    message: String,
}

/// A value from JS (a cursor, lines, a number), or an `invalidArgument`.
fn from_js<T: DeserializeOwned>(what: &str, value: JsValue) -> Result<T, WindowError> {
    options::convert(what, value).map_err(WindowError::InvalidArgument)
}

/// An object from JS (options, a patch, a request), every key one it takes, or an
/// `invalidArgument`.
fn object_from_js<T: DeserializeOwned>(what: &str, value: JsValue) -> Result<T, WindowError> {
    options::read(what, value).map_err(WindowError::InvalidArgument)
}

#[wasm_bindgen]
impl Chats {
    /// Opens the chat store alone, with no server: `{storage?, windowLines?, backfillPages?}`.
    /// Resolves to a `Chats`.
    pub fn open(options: JsValue) -> js_sys::Promise {
        future_to_promise(async move {
            let OpenOptions {
                storage,
                window_lines,
                backfill_pages,
            } = options_from_js(options)?;
            let storage = storage.unwrap_or_else(|| "auto".into());
            let backend =
                Backend::parse(&storage).ok_or_else(|| BindingError::Storage(storage.clone()))?;
            let options = ChatOptions {
                window_lines,
                backfill_pages,
            };
            // Options are checked before the store opens.
            let _ = (options.window_lines()?, options.backfill_pages()?);
            let store = open_store(backend).await.map_err(BindingError::from)?;
            log::info!("scrollback: chats in {}", store.name());
            let state = ChatState::new(Arc::new(store));
            Ok(Chats::with_options(state, options)?.into())
        })
    }

    /// Commits the store's buffered writes, for a worker about to end (a chat saved just
    /// before is on disk once this resolves).
    pub fn flush(&self) -> js_sys::Promise {
        let state = self.state.clone();
        future_to_promise(async move {
            state.store.flush().await.map_err(BindingError::from)?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Another handle on the same store and locks, with its own options (`windowLines`,
    /// `backfillPages`) and backfill cache.
    #[wasm_bindgen(js_name = withOptions)]
    pub fn with_options_js(&self, options: JsValue) -> Result<Chats, JsValue> {
        let options = ChatOptions::from_js(options)?;
        Ok(Chats::with_options(self.state.clone(), options)?)
    }

    /// This handle's window: the default `maxLines` of `tail` and `before` and `pageLines` of
    /// `backfill`.
    #[wasm_bindgen(getter, js_name = windowLines)]
    pub fn window_lines(&self) -> usize {
        self.window_lines
    }

    /// The capacity of this handle's backfill page cache, in pages.
    #[wasm_bindgen(getter, js_name = backfillPages)]
    pub fn backfill_pages(&self) -> usize {
        self.backfill.capacity()
    }

    /// The stored name of a chat (trimmed, without `.jsonl`), the rule every call applies.
    #[wasm_bindgen(js_name = normalizeName)]
    pub fn normalize_name(name: &str) -> Result<String, BindingError> {
        Ok(window::normalize_chat_name(name)?)
    }

    /// `{header, lines, cursor, hasMoreBefore}`: the header and the last `maxLines` (default
    /// the handle's `windowLines`) lines. `allowNotFound` answers a missing chat as empty
    /// instead of `notFound`.
    pub fn tail(&self, name: String, options: JsValue) -> js_sys::Promise {
        let window_lines = self.window_lines;
        self.with(name, move |state, path| async move {
            let options: TailOptions = if options.is_undefined() || options.is_null() {
                TailOptions::default()
            } else {
                object_from_js("tail options", options)?
            };
            let max_lines = options.max_lines.unwrap_or(window_lines);
            let chat = state.chats.chat(&path)?;
            chat.tail(max_lines, options.allow_not_found).await
        })
    }

    /// `{lines, cursor, hasMoreBefore}`: up to `maxLines` (default the handle's `windowLines`)
    /// lines just before `cursor`.
    pub fn before(&self, name: String, cursor: JsValue, max_lines: JsValue) -> js_sys::Promise {
        let window_lines = self.window_lines;
        self.with(name, move |state, path| async move {
            let cursor: Cursor = from_js("cursor", cursor)?;
            let max_lines: usize = if max_lines.is_undefined() || max_lines.is_null() {
                window_lines
            } else {
                from_js("maxLines", max_lines)?
            };
            state.chats.chat(&path)?.before(cursor, max_lines).await
        })
    }

    /// Up to `maxPages` pages going backwards from `cursor`, newest page first.
    #[wasm_bindgen(js_name = beforePages)]
    pub fn before_pages(
        &self,
        name: String,
        cursor: JsValue,
        max_lines: JsValue,
        max_pages: JsValue,
    ) -> js_sys::Promise {
        self.with(name, move |state, path| async move {
            let cursor: Cursor = from_js("cursor", cursor)?;
            let max_lines: usize = from_js("maxLines", max_lines)?;
            let max_pages: usize = from_js("maxPages", max_pages)?;
            let chat = state.chats.chat(&path)?;
            chat.before_pages(cursor, max_lines, max_pages).await
        })
    }

    /// Windowed save: keeps the bytes before `cursor`, writes `header` and `lines` (the whole
    /// window) from there. Resolves to the new cursor.
    pub fn save(
        &self,
        name: String,
        cursor: JsValue,
        header: String,
        lines: JsValue,
        options: JsValue,
    ) -> js_sys::Promise {
        self.with(name, move |state, path| async move {
            let cursor: Cursor = from_js("cursor", cursor)?;
            let lines: Vec<String> = from_js("lines", lines)?;
            let options = write_options(options)?;
            let chat = state.chats.chat(&path)?;
            chat.save(cursor, &header, &lines, options).await
        })
    }

    /// Windowed patch: `{append: lines}` or `{rewriteFromIndex: n, lines}`, relative to the
    /// window at `cursor`. Resolves to the new cursor.
    pub fn patch(
        &self,
        name: String,
        cursor: JsValue,
        header: String,
        op: JsValue,
        options: JsValue,
    ) -> js_sys::Promise {
        self.with(name, move |state, path| async move {
            let cursor: Cursor = from_js("cursor", cursor)?;
            let op: PatchOp = object_from_js("patch", op)?;
            let options = write_options(options)?;
            let chat = state.chats.chat(&path)?;
            chat.patch(cursor, &header, &op, options).await
        })
    }

    /// Full save: replaces the whole chat with `header` and `lines`, whatever lines are on disk
    /// (the fallback when the app holds the whole chat, or no window of it); refused as an
    /// `integrityMismatch` when the header is another chat's, unless `options.force`. Every
    /// earlier cursor is stale afterwards. Resolves to the cursor of a window holding all of
    /// `lines`.
    pub fn replace(
        &self,
        name: String,
        header: String,
        lines: JsValue,
        options: JsValue,
    ) -> js_sys::Promise {
        self.with(name, move |state, path| async move {
            let lines: Vec<String> = from_js("lines", lines)?;
            let options = write_options(options)?;
            state
                .chats
                .chat(&path)?
                .replace(&header, &lines, options)
                .await
        })
    }

    /// The chats of this store, `[{name, size, modifiedMillis}]`, sorted by name.
    pub fn list(&self) -> js_sys::Promise {
        let state = self.state.clone();
        future_to_promise(async move {
            let chats = state.chats.list(FOLDER).await.map_err(BindingError::from)?;
            Ok(to_js(&chats)?)
        })
    }

    /// Deletes the chat with its signature and backup; resolves to whether there was one.
    pub fn delete(&self, name: String) -> js_sys::Promise {
        self.with(name, move |state, path| async move {
            state.chats.chat(&path)?.delete().await
        })
    }

    /// Undoes the last write to the chat (from its backup). Rejects with `notFound` when there
    /// is nothing to undo. Every cursor is stale afterwards: reload the tail.
    #[wasm_bindgen(js_name = restoreBackup)]
    pub fn restore_backup(&self, name: String) -> js_sys::Promise {
        self.with(name, move |state, path| async move {
            state.chats.chat(&path)?.restore_backup().await
        })
    }

    /// Older messages behind the window for a prompt, up to a token budget:
    /// `{older, windowTokens, olderTokens, stop, stale, pagesCached, pagesRead}`.
    pub fn backfill(&self, name: String, request: JsValue) -> js_sys::Promise {
        let (backfill, window_lines) = (self.backfill.clone(), self.window_lines);
        self.with(name, move |state, path| async move {
            let r: JsBackfill = object_from_js("backfill request", request)?;
            let chat = state.chats.chat(&path)?;
            let request = BackfillRequest {
                window: &r.window,
                cursor: r.cursor,
                has_more_before: r.has_more_before,
                budget_tokens: r.budget_tokens,
                page_lines: r.page_lines.unwrap_or(window_lines),
                max_pages: r.max_pages,
                max_messages: r.max_messages.unwrap_or(usize::MAX),
            };
            let estimate = match r.chars_per_token {
                None => CharsPerToken::default(),
                Some(0) => {
                    return Err(WindowError::InvalidArgument(
                        "charsPerToken must be at least 1".into(),
                    ))
                }
                Some(n) => CharsPerToken(n),
            };
            let b = backfill.collect(&chat, &request, &estimate).await?;
            let (stop, stale) = match b.stop {
                BackfillStop::Budget => ("budget", None),
                BackfillStop::PageCap => ("pageCap", None),
                BackfillStop::MessageCap => ("messageCap", None),
                BackfillStop::StartOfChat => ("startOfChat", None),
                BackfillStop::StaleCursor(e) => (
                    "staleCursor",
                    Some(StaleError {
                        kind: e.kind(),
                        message: e.to_string(),
                    }),
                ),
            };
            Ok(JsBackfillResult {
                older: b.older,
                window_tokens: b.window_tokens,
                older_tokens: b.older_tokens,
                stop,
                stale,
                pages_cached: b.pages_cached,
                pages_read: b.pages_read,
            })
        })
    }
}

fn write_options(value: JsValue) -> Result<WriteOptions, WindowError> {
    if value.is_undefined() || value.is_null() {
        Ok(WriteOptions::default())
    } else {
        object_from_js("write options", value)
    }
}
