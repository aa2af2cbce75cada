//! Choosing a browser backend, and the glue the browser backends share: the global scope, error
//! mapping, timers.
//!
//! [`open_store`] picks OPFS where a sync access handle really opens (a dedicated worker in
//! Chromium or Firefox; WebKitGTK has the method but throws NotSupportedError), else IndexedDB,
//! else memory; an application can ask for one by name instead ([`Backend::parse`]: `"opfs"`,
//! `"indexeddb"`, `"memory"`). [`BrowserStore::name`] says which one it got.

use super::{
    Entry, IdbStore, MemoryStore, Meta, OpfsStore, Store, StoreError, StoreResult, WriterRole,
};
use js_sys::{Function, Promise, Reflect};
use std::collections::HashSet;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// Which browser backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The best one that works here: OPFS when a sync access handle opens (tried, not assumed
    /// from the method's presence), else IndexedDB, else memory.
    Auto,
    /// The origin private file system, through sync access handles (dedicated workers only;
    /// an engine without working sync handles is an error at open, not at the first write).
    Opfs,
    /// IndexedDB, as segment records.
    IndexedDb,
    /// Nothing kept past the page: for tests and private windows.
    Memory,
}

impl Backend {
    /// The backend an application names: `"auto"` (or empty), `"opfs"`, `"indexeddb"`,
    /// `"memory"`; `None` for anything else.
    pub fn parse(name: &str) -> Option<Backend> {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Some(Backend::Auto),
            "opfs" => Some(Backend::Opfs),
            "indexeddb" | "idb" => Some(Backend::IndexedDb),
            "memory" => Some(Backend::Memory),
            _ => None,
        }
    }
}

/// One of the browser backends, chosen at run time; implements [`Store`] by delegation.
#[derive(Debug)]
pub enum BrowserStore {
    /// See [`OpfsStore`].
    Opfs(OpfsStore),
    /// See [`IdbStore`].
    IndexedDb(IdbStore),
    /// See [`MemoryStore`].
    Memory(MemoryStore),
}

impl BrowserStore {
    /// The backend's name as [`Backend::parse`] reads it.
    pub fn name(&self) -> &'static str {
        match self {
            BrowserStore::Opfs(_) => "opfs",
            BrowserStore::IndexedDb(_) => "indexeddb",
            BrowserStore::Memory(_) => "memory",
        }
    }
}

/// Opens the backend asked for (see [`Backend`]). With [`Backend::Auto`] a backend that fails
/// to open (OPFS whose sync handles throw, IndexedDB in some private windows) falls through to
/// the next; a backend asked for by name that cannot open is an error.
///
/// Persistent storage is asked for on the side ([`ask_persistence`]), never awaited: Firefox's
/// `persist()` waits on a permission prompt a person may never answer.
pub async fn open_store(backend: Backend) -> StoreResult<BrowserStore> {
    ask_persistence();
    match backend {
        Backend::Opfs => {
            let s = OpfsStore::open().await?;
            s.check_sync_handles().await?;
            Ok(BrowserStore::Opfs(s))
        }
        Backend::IndexedDb => Ok(BrowserStore::IndexedDb(IdbStore::open().await?)),
        Backend::Memory => Ok(BrowserStore::Memory(MemoryStore::new())),
        Backend::Auto => {
            if OpfsStore::available() {
                if let Ok(s) = OpfsStore::open().await {
                    match s.check_sync_handles().await {
                        Ok(()) => return Ok(BrowserStore::Opfs(s)),
                        Err(e) => log::info!("scrollback: OPFS not used: {e}"),
                    }
                }
            }
            match IdbStore::open().await {
                Ok(s) => Ok(BrowserStore::IndexedDb(s)),
                Err(_) => Ok(BrowserStore::Memory(MemoryStore::new())),
            }
        }
    }
}

/// Starts [`request_persistence`] without waiting for its answer.
pub fn ask_persistence() {
    wasm_bindgen_futures::spawn_local(async {
        request_persistence().await;
    });
}

/// Asks the browser to keep this origin's storage under pressure
/// (`navigator.storage.persist()`); `true` when granted. Chromium grants it by engagement,
/// without a prompt; WebKitGTK answers `false`; Firefox resolves only once a person answers its
/// permission prompt (so nothing may wait on this). Where it is refused or missing the cache
/// still works, and may be evicted.
pub async fn request_persistence() -> bool {
    let Some(storage) = storage_manager() else {
        return false;
    };
    let Some(persist) = method(&storage, "persist") else {
        return false;
    };
    match persist.call0(&storage) {
        Ok(p) => match JsFuture::from(Promise::from(p)).await {
            Ok(v) => v.as_bool().unwrap_or(false),
            Err(_) => false,
        },
        Err(_) => false,
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            BrowserStore::Opfs($s) => $e,
            BrowserStore::IndexedDb($s) => $e,
            BrowserStore::Memory($s) => $e,
        }
    };
}

impl Store for BrowserStore {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        delegate!(self, s => s.list(dir).await)
    }
    async fn names(&self, dir: &str) -> StoreResult<Vec<String>> {
        delegate!(self, s => s.names(dir).await)
    }
    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        delegate!(self, s => s.stat(path).await)
    }
    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        delegate!(self, s => s.read(path, offset, len).await)
    }
    async fn read_end(&self, path: &str, len: usize) -> StoreResult<(u64, Vec<u8>)> {
        delegate!(self, s => s.read_end(path, len).await)
    }
    async fn read_many(&self, reads: &[(&str, u64, usize)]) -> Vec<StoreResult<Vec<u8>>> {
        delegate!(self, s => s.read_many(reads).await)
    }
    fn read_ahead(&self) -> usize {
        delegate!(self, s => s.read_ahead())
    }
    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        delegate!(self, s => s.write(path, bytes).await)
    }
    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        delegate!(self, s => s.append(path, bytes).await)
    }
    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        delegate!(self, s => s.truncate(path, len).await)
    }
    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        delegate!(self, s => s.rename(from, to).await)
    }
    async fn remove(&self, path: &str) -> StoreResult<()> {
        delegate!(self, s => s.remove(path).await)
    }
    async fn flush(&self) -> StoreResult<()> {
        delegate!(self, s => s.flush().await)
    }
    /// OPFS and IndexedDB are shared by every tab of the origin: the role is a Web Lock. Memory
    /// is this worker's own.
    async fn writer(&self, key: &str, wait: bool) -> Option<WriterRole> {
        match self {
            BrowserStore::Memory(s) => s.writer(key, wait).await,
            _ => super::writer::web_writer(key, wait).await,
        }
    }
    async fn writers_held(&self, dir: &str) -> Option<HashSet<String>> {
        match self {
            BrowserStore::Memory(s) => s.writers_held(dir).await,
            _ => super::writer::web_writers_held(dir).await,
        }
    }
    async fn hand_over(&self, key: &str) {
        if let BrowserStore::Opfs(s) = self {
            s.close_handles_below(key);
        }
    }
}

/// The global object's `navigator`, in a page or a worker.
pub(crate) fn navigator() -> Option<JsValue> {
    Reflect::get(&js_sys::global(), &"navigator".into())
        .ok()
        .filter(|n| n.is_object())
}

/// `navigator.storage`, in a page or a worker.
pub(crate) fn storage_manager() -> Option<web_sys::StorageManager> {
    let storage = Reflect::get(&navigator()?, &"storage".into()).ok()?;
    storage.is_object().then(|| storage.unchecked_into())
}

/// `navigator.locks`, in a page or a worker.
pub(crate) fn lock_manager() -> Option<web_sys::LockManager> {
    let locks = Reflect::get(&navigator()?, &"locks".into()).ok()?;
    locks.is_object().then(|| locks.unchecked_into())
}

/// `obj[name]` when it is a function.
pub(crate) fn method(obj: &JsValue, name: &str) -> Option<Function> {
    Reflect::get(obj, &name.into())
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
}

/// Milliseconds since the epoch.
pub(crate) fn now_millis() -> u64 {
    js_sys::Date::now() as u64
}

/// Resolves after `ms` milliseconds (`setTimeout` of the page or worker).
pub(crate) async fn sleep(ms: u32) {
    let promise = Promise::new(&mut |resolve, _| {
        if let Some(set_timeout) = method(&js_sys::global(), "setTimeout") {
            let _ = set_timeout.call2(&JsValue::NULL, &resolve, &ms.into());
        } else {
            let _ = resolve.call0(&JsValue::NULL);
        }
    });
    let _ = JsFuture::from(promise).await;
}

/// The `name` of a `DOMException` (or other error object), empty when it has none.
pub(crate) fn error_name(e: &JsValue) -> String {
    Reflect::get(e, &"name".into())
        .ok()
        .and_then(|n| n.as_string())
        .unwrap_or_default()
}

/// Maps a browser error to a [`StoreError`]: quota errors to `QuotaExceeded`, a missing file or
/// directory to `NotFound(path)`, anything else to `Io` with the browser's name and message.
pub(crate) fn js_error(path: &str, e: &JsValue) -> StoreError {
    let name = error_name(e);
    match name.as_str() {
        "QuotaExceededError" => StoreError::QuotaExceeded,
        "NotFoundError" => StoreError::NotFound(path.to_string()),
        _ => {
            let message = Reflect::get(e, &"message".into())
                .ok()
                .and_then(|m| m.as_string())
                .or_else(|| e.as_string())
                .unwrap_or_else(|| format!("{e:?}"));
            StoreError::Io(format!("{path}: {name}: {message}"))
        }
    }
}

/// Awaits a promise, mapping a rejection with [`js_error`].
pub(crate) async fn wait(path: &str, promise: Promise) -> StoreResult<JsValue> {
    JsFuture::from(promise)
        .await
        .map_err(|e| js_error(path, &e))
}
