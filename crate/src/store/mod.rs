//! The storage trait: plain blob operations that every backend answers efficiently.
//!
//! Paths are `/`-separated segments (`transcripts/v1/<server>/<session>/<chunk>`). The layers
//! above only ever pass segments they have made safe (see `chunks`); backends still refuse an
//! empty segment, `.` or `..`, so no path can escape the store's root.
//!
//! Backends: [`MemoryStore`] and (natively) `FsStore` here; OPFS and IndexedDB beside it. Every
//! backend must make [`Store::append`] cost O(bytes appended), not O(blob): live streaming
//! appends one line at a time to a chunk that grows to the size of the conversation.

#[cfg(target_arch = "wasm32")]
mod browser;
#[cfg(not(target_arch = "wasm32"))]
mod fs;
#[cfg(target_arch = "wasm32")]
mod idb;
mod memory;
#[cfg(target_arch = "wasm32")]
mod opfs;
mod role;
#[cfg(target_arch = "wasm32")]
mod writer;

#[cfg(target_arch = "wasm32")]
pub use browser::{ask_persistence, open_store, request_persistence, Backend, BrowserStore};
#[cfg(not(target_arch = "wasm32"))]
pub use fs::FsStore;
#[cfg(target_arch = "wasm32")]
pub use idb::IdbStore;
pub use memory::MemoryStore;
#[cfg(target_arch = "wasm32")]
pub use opfs::OpfsStore;
pub use role::{WriterRole, Writers};
#[cfg(target_arch = "wasm32")]
pub use writer::WriterLock;

use std::collections::HashSet;

/// What a storage operation can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The blob or folder does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The origin's (or disk's) quota is used up; the write did not happen, or not whole.
    #[error("storage quota exceeded")]
    QuotaExceeded,
    /// A path that is empty, has an empty segment, `.` or `..`.
    #[error("invalid path: {0:?}")]
    InvalidPath(String),
    /// Another tab or worker wrote the blob since this one last did (two writers of one
    /// session, where no Web Locks kept the role one tab's): nothing of this write happened.
    #[error("changed by another writer: {0}")]
    Contended(String),
    /// Anything else the backend reported.
    #[error("storage error: {0}")]
    Io(String),
}

/// A result of a storage operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// One name directly below a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The last segment.
    pub name: String,
    /// Whether it is a folder.
    pub is_dir: bool,
    /// The blob's size in bytes (0 for a folder).
    pub size: u64,
    /// The blob's modification stamp (0 for a folder); see [`Meta::modified`].
    pub modified: u64,
}

/// A blob's size and modification stamp.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// Size in bytes.
    pub size: u64,
    /// When it was last written: milliseconds since the epoch where the backend has a clock
    /// (filesystem, OPFS, IndexedDB), a counter in memory. Later writes never have a smaller
    /// stamp; two writes within the backend's clock granularity may share one.
    pub modified: u64,
}

/// [`Store::read_ahead`]'s default: an OPFS read costs a call to the browser's storage thread
/// (a millisecond or two here) at any size up to hundreds of kilobytes.
pub const READ_AHEAD: usize = 128 * 1024;

/// Plain blob operations over `/`-separated paths. Folders exist implicitly: writing a blob
/// creates its parents, and removing a folder removes everything below it.
#[allow(async_fn_in_trait)]
pub trait Store {
    /// The names directly below `dir`, in no particular order; empty when `dir` does not exist.
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>>;
    /// The names directly below `dir` ([`Store::list`]'s, without sizes or stamps: OPFS asks
    /// each file for those, one call per file).
    async fn names(&self, dir: &str) -> StoreResult<Vec<String>> {
        Ok(self.list(dir).await?.into_iter().map(|e| e.name).collect())
    }
    /// A blob's size and stamp, or `None` when it does not exist.
    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>>;
    /// Up to `len` bytes of a blob starting at `offset` (fewer at its end).
    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>>;
    /// A blob's size and its last `len` bytes (all of it when it is smaller), as one snapshot:
    /// what a reader that does not know the size yet asks in one step instead of two (the
    /// browser's stores answer it as one read). By default a `stat` and a `read`.
    async fn read_end(&self, path: &str, len: usize) -> StoreResult<(u64, Vec<u8>)> {
        let Some(meta) = self.stat(path).await? else {
            return Err(StoreError::NotFound(path.to_string()));
        };
        let start = meta.size.saturating_sub(len as u64);
        let bytes = self.read(path, start, len).await?;
        Ok((start + bytes.len() as u64, bytes))
    }
    /// Several reads at once, each answered as [`Store::read`] answers it, in their order:
    /// what a search's snippets ask of many blobs together. By default each on its own, all
    /// together; OPFS reads them in one call (a call costs about as much as a small read).
    async fn read_many(&self, reads: &[(&str, u64, usize)]) -> Vec<StoreResult<Vec<u8>>> {
        let each = reads
            .iter()
            .map(|&(path, offset, len)| self.read(path, offset, len));
        futures::future::join_all(each).await
    }
    /// How many bytes a read should ask for when it can only guess how far the reader will go
    /// (a search segment's first read: its header, and its dictionary where that fits, or a
    /// read per word after it). A store where a read costs about the same at any size gains
    /// from reading further; one that pays per byte loses. [`READ_AHEAD`] by default;
    /// IndexedDB, which pays per 16 kB record, reads half as far.
    fn read_ahead(&self) -> usize {
        READ_AHEAD
    }
    /// Creates or replaces a whole blob.
    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()>;
    /// Appends to a blob (creating it), in O(`bytes`); returns the blob's new size.
    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64>;
    /// Cuts a blob to `len` bytes; a `len` past its end changes nothing.
    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()>;
    /// Renames a blob within its folder, replacing any blob of the new name (its stamp may
    /// stay or become now).
    async fn rename(&self, from: &str, to: &str) -> StoreResult<()>;
    /// Removes a blob, or a folder and everything below it; a missing path is not an error.
    async fn remove(&self, path: &str) -> StoreResult<()>;
    /// Makes everything written so far durable and visible to other tabs and workers, and
    /// reports a write that failed after its call returned (a backend that buffers appends,
    /// like IndexedDB's, answers it here or on the next append). Call it before giving up the
    /// writer role. Backends that write through answer `Ok` at once.
    async fn flush(&self) -> StoreResult<()> {
        Ok(())
    }
    /// The writer role for `key` (one writer per session across tabs: a session's cache
    /// folder), held until the [`WriterRole`] is dropped or its holder goes away. With `wait`
    /// false, `None` at once when another holds it; with `wait`, resolves once it is free. A
    /// store that nothing else shares grants it at once (the default); the browser's stores use
    /// Web Locks, [`MemoryStore`] an in-process lock.
    async fn writer(&self, key: &str, wait: bool) -> Option<WriterRole> {
        let _ = (key, wait);
        Some(WriterRole::unshared())
    }
    /// The names below `dir` whose [`Store::writer`] role someone holds or waits for now (the
    /// roles keyed `<dir>/<name>`); `None` when the store cannot tell (the default: a store
    /// that grants every role at once).
    async fn writers_held(&self, dir: &str) -> Option<HashSet<String>> {
        let _ = dir;
        None
    }
    /// The writer role for `key` is being given up: lets go of whatever this store holds open
    /// below `key`, so the next writer can write there (OPFS closes its sync access handles,
    /// which lock their files). Called after [`Store::flush`]; a no-op by default.
    async fn hand_over(&self, key: &str) {
        let _ = key;
    }
}

/// A shared store is a store: the transcript cache, the chats and a test can hold one backend
/// instance (one set of OPFS handles, one IndexedDB append buffer) through `Arc`s.
impl<S: Store> Store for std::sync::Arc<S> {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        (**self).list(dir).await
    }
    async fn names(&self, dir: &str) -> StoreResult<Vec<String>> {
        (**self).names(dir).await
    }
    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        (**self).stat(path).await
    }
    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        (**self).read(path, offset, len).await
    }
    async fn read_end(&self, path: &str, len: usize) -> StoreResult<(u64, Vec<u8>)> {
        (**self).read_end(path, len).await
    }
    async fn read_many(&self, reads: &[(&str, u64, usize)]) -> Vec<StoreResult<Vec<u8>>> {
        (**self).read_many(reads).await
    }
    fn read_ahead(&self) -> usize {
        (**self).read_ahead()
    }
    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        (**self).write(path, bytes).await
    }
    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        (**self).append(path, bytes).await
    }
    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        (**self).truncate(path, len).await
    }
    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        (**self).rename(from, to).await
    }
    async fn remove(&self, path: &str) -> StoreResult<()> {
        (**self).remove(path).await
    }
    async fn flush(&self) -> StoreResult<()> {
        (**self).flush().await
    }
    async fn writer(&self, key: &str, wait: bool) -> Option<WriterRole> {
        (**self).writer(key, wait).await
    }
    async fn writers_held(&self, dir: &str) -> Option<HashSet<String>> {
        (**self).writers_held(dir).await
    }
    async fn hand_over(&self, key: &str) {
        (**self).hand_over(key).await
    }
}

/// Whether a path segment names the same one file on every OS: none of `< > : " | ? *` (`:`
/// makes `C:` a drive), no control character, no trailing `.` or space (Windows drops them, so
/// `a.` and `a` would share a file), and not a name Windows reserves for a device (`CON`,
/// `NUL`, `com1.txt`, in any case), nor one beginning with [`STORE_OWN`] (a store's own files:
/// `FsStore`'s writes in progress, which it hides and removes once abandoned). `FsStore`
/// (native) holds only such segments; a chat's name is held to the same rule in every store
/// ([`crate::window::normalize_chat_name`]).
pub fn portable(seg: &str) -> bool {
    !seg.bytes()
        .any(|b| b < 0x20 || matches!(b, b'<' | b'>' | b':' | b'"' | b'|' | b'?' | b'*'))
        && !seg.ends_with(['.', ' '])
        && !seg.starts_with(STORE_OWN)
        && !crate::protocol::is_reserved_name(seg)
}

/// How the files a store keeps for itself begin (a write in progress, a rewrite's sibling):
/// never a blob's name, so never listed, and removed without a question.
pub const STORE_OWN: &str = ".~";

/// Splits and checks a path: no empty segment, no `.` or `..`, no `\` or NUL.
pub fn segments(path: &str) -> StoreResult<Vec<&str>> {
    let segs: Vec<&str> = path.split('/').collect();
    let bad =
        |s: &&str| s.is_empty() || *s == "." || *s == ".." || s.contains('\\') || s.contains('\0');
    if segs.iter().any(bad) {
        return Err(StoreError::InvalidPath(path.to_string()));
    }
    Ok(segs)
}

/// A folder's listing from flat keys in sorted order (the memory and IndexedDB backends keep
/// blobs as `a/b/c` keys): the keys below `dir` with a further `/` name a folder, listed once;
/// the others are blobs, with the size and stamp `meta` reads (one it cannot read is skipped).
pub(crate) fn entries_below<K: AsRef<str>, V>(
    dir: &str,
    keys: impl IntoIterator<Item = (K, V)>,
    meta: impl Fn(&V) -> Option<Meta>,
) -> Vec<Entry> {
    let prefix = format!("{dir}/");
    let mut out: Vec<Entry> = Vec::new();
    for (k, v) in keys {
        let Some(rest) = k.as_ref().strip_prefix(&prefix) else {
            continue;
        };
        match rest.split_once('/') {
            Some((name, _)) => {
                if out.last().is_none_or(|e| e.name != name) {
                    out.push(Entry {
                        name: name.to_string(),
                        is_dir: true,
                        size: 0,
                        modified: 0,
                    });
                }
            }
            None => {
                if let Some(m) = meta(&v) {
                    out.push(Entry {
                        name: rest.to_string(),
                        is_dir: false,
                        size: m.size,
                        modified: m.modified,
                    });
                }
            }
        }
    }
    out
}

/// The bytes a read of up to `len` from `offset` covers in a blob of `size`: `start..end`,
/// clipped to the blob (empty past its end).
#[cfg(target_arch = "wasm32")]
pub(crate) fn span(size: u64, offset: u64, len: usize) -> (u64, u64) {
    let start = offset.min(size);
    (start, start.saturating_add(len as u64).min(size))
}

/// Lets the rest of the worker run (the messages waiting for it, its other tasks) before the
/// caller goes on: a new task of the event loop in the browser (`setTimeout`), one poll's yield
/// natively. Long work in idle time calls it between two parts.
pub(crate) async fn breathe() {
    #[cfg(target_arch = "wasm32")]
    {
        browser::sleep(0).await
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        yield_now().await
    }
}

/// Lets the tasks woken meanwhile run before this one goes on (one poll's yield: in the
/// browser, within the same turn of the event loop, unlike [`breathe`]).
pub(crate) async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// Milliseconds since the epoch: the browser's clock in wasm (where `std::time` panics), the
/// system's natively.
pub(crate) fn now_millis() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        browser::now_millis()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}
