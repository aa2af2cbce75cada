//! The origin private file system backend.
//!
//! Each path segment is a real OPFS directory or file (`transcripts/v1/<server>/<session>/
//! <chunk>`), so devtools show the cache as it is. Writes go through
//! `FileSystemSyncAccessHandle`, which exists only in dedicated workers: appends and ranged
//! reads cost O(bytes) whatever the file's size. Opening a sync handle is slow and takes an
//! exclusive lock on the file, so handles stay open, cached per blob (the least recently used
//! closed past [`OpfsStore::MAX_OPEN`]), until a rename or remove of that blob, [`OpfsStore::close_handles`],
//! or the store is dropped. Reads of a blob without an open handle go through `getFile()`, which
//! takes no lock, so other tabs can read what a worker writes.
//!
//! Durability: appends are not flushed one by one (the cache is never load-bearing, and a torn
//! last line is repaired above); whole-blob writes are flushed, closing a handle flushes, and
//! [`Store::flush`] flushes every open handle. Every write's returned byte count is checked:
//! a short write is undone and answers [`StoreError::QuotaExceeded`]. A whole-blob write over a
//! blob that holds bytes goes to a hidden sibling first, moved over the blob once complete, so
//! a write the quota refuses leaves the old bytes ([`OpfsStore::replace`]).
//!
//! Other contexts: a rename is one `move()`, so a reader sees the old name or the new one, never
//! a half-renamed blob; a reader that listed the old name and then finds it gone
//! ([`StoreError::NotFound`]) lists again. A directory removed under a running store (site
//! data cleared, another context) answers empty lists, `None` and `NotFound`, never a panic.

use super::browser::{error_name, js_error, method, now_millis, sleep, storage_manager, wait};
use super::{segments, span, Entry, Meta, Store, StoreError, StoreResult};
use js_sys::{Promise, Reflect, Uint8Array};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    File, FileSystemDirectoryHandle, FileSystemFileHandle, FileSystemGetDirectoryOptions,
    FileSystemGetFileOptions, FileSystemHandle, FileSystemHandleKind, FileSystemReadWriteOptions,
    FileSystemRemoveOptions, FileSystemSyncAccessHandle,
};

/// How long opening a sync handle retries while another context still holds the file (a
/// worker that was just terminated releases its handles a moment later).
const LOCKED_RETRY_MS: u32 = 2_000;

/// How long a `File` a `stat` took serves the reads of that blob that follow.
const SEEN_MS: u64 = 1_000;
/// The `File`s kept from stats at most (all forgotten past this: a search's first query stats
/// a server's sessions, 64 in its benchmark).
const SEEN_KEPT: usize = 512;

/// A file at the store's root whose presence says a sync handle opened here before
/// ([`OpfsStore::check_sync_handles`] passed in this origin's file system), so later opens
/// look it up (under a millisecond) instead of probing again (5-10 ms on every start).
const SYNC_HANDLES_WORK: &str = ".sync-handles-work";

/// How the hidden sibling a rewrite goes through is named: this, then the blob's own name, in
/// the blob's folder ([`OpfsStore::replace`]). Never a blob's name: `:` is in no name the layers
/// above write (keys are escaped, chat names are `portable`), and [`Store::list`] and
/// [`Store::names`] never show such a file. One a crash left behind is overwritten by the next
/// rewrite of its blob, and goes with its folder.
const REWRITE_PREFIX: &str = ".~rewrite:";

#[wasm_bindgen]
extern "C" {
    /// A handle with `move()`, which web-sys does not have yet.
    #[wasm_bindgen(extends = FileSystemHandle)]
    type MovableHandle;

    /// `FileSystemHandle.move(directory, name)`.
    #[wasm_bindgen(method, catch, js_name = "move")]
    fn move_to(
        this: &MovableHandle,
        dir: &FileSystemDirectoryHandle,
        name: &str,
    ) -> Result<Promise, JsValue>;
}

/// Blobs as files in the origin private file system, below a root directory.
#[derive(Debug)]
pub struct OpfsStore {
    root: FileSystemDirectoryHandle,
    open: RefCell<HashMap<String, Open>>,
    /// Folder handles by path, for reads: a read of a chunk does not walk from the root each
    /// time (four lookups, each a hop to the browser's storage thread). A handle whose folder
    /// another context removed answers NotFound; the read then walks afresh.
    dirs: RefCell<HashMap<String, Dir>>,
    /// The `File` each recent `stat` took, by path, with when ([`OpfsStore::read_seen`]).
    seen: RefCell<HashMap<String, (File, u64)>>,
    tick: Cell<u64>,
    stamp: Cell<u64>,
    budget: Cell<Option<u64>>,
}

/// An open sync handle and what this store knows of its file (it holds the file's lock, so
/// nobody else changes it).
#[derive(Debug)]
struct Open {
    handle: FileSystemSyncAccessHandle,
    size: u64,
    modified: u64,
    used: u64,
}

impl OpfsStore {
    /// Sync handles kept open at once; the least recently used is closed past this.
    pub const MAX_OPEN: usize = 16;

    /// Whether OPFS writes can work here: a dedicated worker with sync access handles.
    pub fn available() -> bool {
        let global = js_sys::global();
        let in_worker = Reflect::get(&global, &"DedicatedWorkerGlobalScope".into())
            .ok()
            .and_then(|c| Reflect::get(&c, &"prototype".into()).ok())
            .and_then(|p| p.dyn_into::<js_sys::Object>().ok())
            .is_some_and(|p| p.is_prototype_of(&global));
        let has_sync = Reflect::get(&global, &"FileSystemFileHandle".into())
            .ok()
            .and_then(|c| Reflect::get(&c, &"prototype".into()).ok())
            .is_some_and(|p| method(&p, "createSyncAccessHandle").is_some());
        in_worker && has_sync && storage_manager().is_some()
    }

    /// Whether a sync access handle really opens here: creates a probe file below the store's
    /// root, opens and closes a handle on it, removes it. WebKitGTK has
    /// `createSyncAccessHandle` but rejects it (NotSupportedError: WebKit implements it on
    /// Apple platforms only), so [`OpfsStore::available`] alone cannot tell. A probe that
    /// passes leaves `SYNC_HANDLES_WORK` behind, and a store that finds it does not probe.
    pub async fn check_sync_handles(&self) -> StoreResult<()> {
        if !Self::available() {
            return Err(StoreError::Io(
                "OPFS writes need a dedicated worker (FileSystemSyncAccessHandle)".into(),
            ));
        }
        if JsFuture::from(self.root.get_file_handle(SYNC_HANDLES_WORK))
            .await
            .is_ok()
        {
            return Ok(());
        }
        let name = format!(".probe-{}", (js_sys::Math::random() * 1e15) as u64);
        let opts = FileSystemGetFileOptions::new();
        opts.set_create(true);
        let file: FileHandle = wait(&name, self.root.get_file_handle_with_options(&name, &opts))
            .await?
            .unchecked_into();
        let opened = JsFuture::from(file.create_sync_access_handle()).await;
        if let Ok(h) = &opened {
            h.unchecked_ref::<SyncHandle>().close();
        }
        let _ = JsFuture::from(self.root.remove_entry(&name)).await;
        match opened {
            Ok(_) => {
                let marked = self
                    .root
                    .get_file_handle_with_options(SYNC_HANDLES_WORK, &opts);
                if let Err(e) = JsFuture::from(marked).await {
                    log::info!("scrollback: OPFS: could not note that sync handles work: {e:?}");
                }
                Ok(())
            }
            Err(e) => Err(StoreError::Io(format!(
                "OPFS sync access handles do not work here: {}",
                js_error(&name, &e)
            ))),
        }
    }

    /// The store at the root of this origin's private file system.
    pub async fn open() -> StoreResult<Self> {
        Self::open_in("").await
    }

    /// The store below `dir` (created if missing; `""` is the root), so that tests and
    /// applications can keep separate trees.
    pub async fn open_in(dir: &str) -> StoreResult<Self> {
        let storage = storage_manager()
            .ok_or_else(|| StoreError::Io("OPFS: no navigator.storage here".into()))?;
        let mut root: FileSystemDirectoryHandle =
            wait(dir, storage.get_directory()).await?.unchecked_into();
        if !dir.is_empty() {
            for seg in segments(dir)? {
                root = child_dir(&root, seg, true, dir).await?.expect("created");
            }
        }
        Ok(OpfsStore {
            root,
            open: RefCell::default(),
            dirs: RefCell::default(),
            seen: RefCell::default(),
            tick: Cell::new(0),
            stamp: Cell::new(0),
            budget: Cell::new(None),
        })
    }

    /// Simulates a full disk: at most `bytes` more bytes are written from now on, and the
    /// write that reaches the limit is cut short (as a browser may do without throwing), then
    /// undone and answered with [`StoreError::QuotaExceeded`]. `None` lifts the limit.
    pub fn limit_writes(&self, bytes: Option<u64>) {
        self.budget.set(bytes);
    }

    /// Closes every open sync handle (they flush as they close), releasing the files' locks to
    /// other contexts, for example when this tab gives up the writer role.
    pub fn close_handles(&self) {
        for (_, o) in self.open.borrow_mut().drain() {
            o.handle.close();
        }
    }

    /// Closes the sync handles of the blobs below folder `dir` (a session's chunks), or of
    /// blob `dir` itself, so another context can open them: when this tab gives up that
    /// session's writer role, or has written a blob every tab writes (the session list).
    pub fn close_handles_below(&self, dir: &str) {
        let prefix = format!("{dir}/");
        self.open.borrow_mut().retain(|path, o| {
            let below = path == dir || path.starts_with(&prefix);
            if below {
                o.handle.close();
            }
            !below
        });
    }

    /// The number of sync handles open now.
    pub fn open_handles(&self) -> usize {
        self.open.borrow().len()
    }

    /// The next modification stamp: now, never less than one given before.
    fn next_stamp(&self) -> u64 {
        let s = now_millis().max(self.stamp.get());
        self.stamp.set(s);
        s
    }

    /// The directory at `segs`, created if asked; `None` when it (or a parent) is missing.
    ///
    /// Without `create`, walked from the deepest parent folder held (a listing holds the
    /// folders it lists), and each folder walked is held: a worker's first search stats every
    /// session's blob while the server's folder is being listed, and from the root each stat
    /// took six calls, not three. A folder another tab removed and made again is walked
    /// through from the handle held (a handle names a path, in Chromium and Firefox alike:
    /// tested); a walk that fails is walked again from the root. Created folders are walked
    /// from the root.
    async fn dir(&self, segs: &[&str], create: bool, path: &str) -> StoreResult<Option<Dir>> {
        if !create {
            // A strict ancestor: the folder asked for is always looked up (a fresh handle).
            let held = (1..segs.len()).rev().find_map(|n| {
                let dir = self.dirs.borrow().get(&segs[..n].join("/")).cloned()?;
                Some((n, dir))
            });
            if let Some((n, dir)) = held {
                if let Ok(Some(dir)) = self.walk(dir, segs, n, false, path).await {
                    return Ok(Some(dir));
                }
                self.dirs.borrow_mut().remove(&segs[..n].join("/"));
            }
        }
        self.walk(self.root.clone(), segs, 0, create, path).await
    }

    /// [`OpfsStore::dir`]'s walk from `dir`, the folder of the first `from` segments, holding
    /// each folder it meets.
    async fn walk(
        &self,
        mut dir: Dir,
        segs: &[&str],
        from: usize,
        create: bool,
        path: &str,
    ) -> StoreResult<Option<Dir>> {
        for n in from + 1..=segs.len() {
            match child_dir(&dir, segs[n - 1], create, path).await? {
                Some(d) => dir = d,
                None => return Ok(None),
            }
            self.dirs
                .borrow_mut()
                .insert(segs[..n].join("/"), dir.clone());
        }
        Ok(Some(dir))
    }

    /// A blob's directory and file handle; `None` when it is missing (and not created).
    async fn file(&self, path: &str, create: bool) -> StoreResult<Option<(Dir, FileHandle)>> {
        let segs = segments(path)?;
        let (name, parents) = segs.split_last().expect("split gives one segment at least");
        let Some(dir) = self.dir(parents, create, path).await? else {
            return Ok(None);
        };
        let opts = FileSystemGetFileOptions::new();
        opts.set_create(create);
        match JsFuture::from(dir.get_file_handle_with_options(name, &opts)).await {
            Ok(f) => Ok(Some((dir, f.unchecked_into()))),
            Err(e) if !create && missing(&e) => Ok(None),
            Err(e) => Err(create_error(path, &e)),
        }
    }

    /// A blob's file handle for a read or a stat, through the folder cache; `None` when it is
    /// missing.
    async fn file_for_reading(&self, path: &str) -> StoreResult<Option<FileHandle>> {
        let segs = segments(path)?;
        let (name, parents) = segs.split_last().expect("split gives one segment at least");
        let key = parents.join("/");
        let cached = self.dirs.borrow().get(&key).cloned();
        if let Some(dir) = cached {
            match JsFuture::from(dir.get_file_handle(name)).await {
                Ok(f) => return Ok(Some(f.unchecked_into())),
                // Missing, or the folder was removed under the cached handle (each engine says
                // so its own way): walk afresh, which answers as an uncached read would.
                Err(_) => {
                    self.dirs.borrow_mut().remove(&key);
                }
            }
        }
        let Some((dir, file)) = self.file(path, false).await? else {
            return Ok(None);
        };
        self.dirs.borrow_mut().insert(key, dir);
        Ok(Some(file))
    }

    /// Forgets the cached folder handles at and below `path` (removed by this store).
    fn forget_dirs(&self, path: &str) {
        let prefix = format!("{path}/");
        self.dirs
            .borrow_mut()
            .retain(|k, _| k != path && !k.starts_with(&prefix));
    }

    /// The blob's open sync handle, opening (and creating the blob, if asked) when needed;
    /// `None` when the blob is missing and not created.
    async fn handle(&self, path: &str, create: bool) -> StoreResult<Option<SyncHandle>> {
        if let Some(h) = self.cached(path) {
            return Ok(Some(h));
        }
        if !Self::available() {
            return Err(StoreError::Io(
                "OPFS writes need a dedicated worker (FileSystemSyncAccessHandle)".into(),
            ));
        }
        let Some((_, file)) = self.file(path, create).await? else {
            return Ok(None);
        };
        let handle = open_sync(&file, path).await?;
        // Every write goes through this handle: what a stat took before it is forgotten once
        // here, not at each append.
        self.seen.borrow_mut().remove(path);
        if let Some(h) = self.cached(path) {
            // Another call opened it meanwhile: keep that one.
            handle.close();
            return Ok(Some(h));
        }
        let size = handle.get_size().map_err(|e| js_error(path, &e))? as u64;
        let mut open = self.open.borrow_mut();
        if open.len() >= Self::MAX_OPEN {
            let oldest = open
                .iter()
                .min_by_key(|(_, o)| o.used)
                .map(|(k, _)| k.clone());
            if let Some(o) = oldest.and_then(|k| open.remove(&k)) {
                o.handle.close();
            }
        }
        open.insert(
            path.to_string(),
            Open {
                handle: handle.clone(),
                size,
                modified: 0,
                used: self.bump(),
            },
        );
        Ok(Some(handle))
    }

    /// What this store knows of a blob it holds open (nobody else changes it meanwhile).
    fn open_meta(&self, path: &str) -> Option<Meta> {
        self.open.borrow().get(path).map(|o| Meta {
            size: o.size,
            modified: o.modified,
        })
    }

    fn cached(&self, path: &str) -> Option<SyncHandle> {
        let used = self.bump();
        let mut open = self.open.borrow_mut();
        let o = open.get_mut(path)?;
        o.used = used;
        Some(o.handle.clone())
    }

    fn bump(&self) -> u64 {
        self.tick.set(self.tick.get() + 1);
        self.tick.get()
    }

    /// Records a blob's new size and stamps it.
    fn wrote(&self, path: &str, size: u64) {
        let stamp = self.next_stamp();
        if let Some(o) = self.open.borrow_mut().get_mut(path) {
            o.size = size;
            o.modified = stamp;
        }
    }

    /// Closes the blob's handle (if open), and those of every blob below it as a folder (and
    /// forgets the `File`s their stats took: it is about to be moved or removed).
    fn close(&self, path: &str) {
        let prefix = format!("{path}/");
        self.seen
            .borrow_mut()
            .retain(|k, _| k != path && !k.starts_with(&prefix));
        self.open.borrow_mut().retain(|k, o| {
            let keep = k != path && !k.starts_with(&prefix);
            if !keep {
                o.handle.close();
            }
            keep
        });
    }

    /// After a failed operation on an open handle: closes it, and answers `NotFound` when the
    /// blob is gone (storage cleared under the page), else the error itself.
    async fn failed(&self, path: &str, err: StoreError) -> StoreError {
        if err == StoreError::QuotaExceeded {
            return err;
        }
        self.close(path);
        match self.file(path, false).await {
            Ok(Some(_)) => err,
            _ => StoreError::NotFound(path.to_string()),
        }
    }

    /// Writes all of `bytes` at `at`, checking the count the browser returns; a short write is
    /// cut back to `at` and answers `QuotaExceeded`.
    fn write_at(&self, path: &str, h: &SyncHandle, bytes: &[u8], at: u64) -> StoreResult<()> {
        let allowed = match self.budget.get() {
            Some(b) => bytes.len().min(b as usize),
            None => bytes.len(),
        };
        let opts = FileSystemReadWriteOptions::new();
        opts.set_at(at as f64);
        let written = if allowed == 0 && !bytes.is_empty() {
            0
        } else {
            h.write_with_u8_array_and_options(&bytes[..allowed], &opts)
                .map_err(|e| js_error(path, &e))? as usize
        };
        if written < bytes.len() {
            let _ = h.truncate_with_f64(at as f64);
            return Err(StoreError::QuotaExceeded);
        }
        if let Some(b) = self.budget.get() {
            self.budget.set(Some(b - written as u64));
        }
        Ok(())
    }

    /// The blob's size and up to `len` bytes of it from `offset(size)`: through its open sync
    /// handle when this store holds one, else through a `File` snapshot.
    async fn read_span(
        &self,
        path: &str,
        offset: &dyn Fn(u64) -> u64,
        len: usize,
    ) -> StoreResult<(u64, Vec<u8>)> {
        segments(path)?;
        let Some(h) = self.cached(path) else {
            return self.read_file(path, offset, len).await;
        };
        let size = self.open.borrow().get(path).map_or(0, |o| o.size);
        let (start, end) = span(size, offset(size), len);
        let mut buf = vec![0u8; (end - start) as usize];
        let opts = FileSystemReadWriteOptions::new();
        opts.set_at(start as f64);
        match h.read_with_u8_array_and_options(&mut buf, &opts) {
            Ok(n) => {
                buf.truncate(n as usize);
                Ok((size, buf))
            }
            Err(e) => Err(self.failed(path, js_error(path, &e)).await),
        }
    }

    /// A read of `len` bytes at `offset` from the `File` a `stat` of the blob took within the
    /// last [`SEEN_MS`], when the range lies within it: one call instead of three (the
    /// folder's file handle, its `File`, the bytes), as a search's first query reads its hits'
    /// lines from the blobs it has just stat'ed. `None` when there is none, or it does not
    /// read: a `File` is a snapshot, and reading one whose file changed since fails
    /// (NotReadableError) in every engine tested, so what it gives is what the file holds now.
    async fn read_seen(&self, path: &str, offset: u64, len: usize) -> Option<Vec<u8>> {
        let (file, at) = self.seen.borrow().get(path).cloned()?;
        let end = offset.checked_add(len as u64)?;
        if now_millis().saturating_sub(at) > SEEN_MS || end > file.size() as u64 {
            return None;
        }
        let part = file
            .slice_with_f64_and_f64(offset as f64, end as f64)
            .ok()?;
        match JsFuture::from(part.array_buffer()).await {
            Ok(buf) => Some(Uint8Array::new(&buf).to_vec()),
            Err(_) => {
                self.seen.borrow_mut().remove(path);
                None
            }
        }
    }

    async fn read_file(
        &self,
        path: &str,
        offset: &dyn Fn(u64) -> u64,
        len: usize,
    ) -> StoreResult<(u64, Vec<u8>)> {
        // A `File` is a snapshot: if another context writes after it was taken, reading it
        // fails with NotReadableError, and a fresh one is taken.
        let mut last = None;
        for _ in 0..3 {
            let Some(file) = self.file_for_reading(path).await? else {
                return Err(StoreError::NotFound(path.to_string()));
            };
            let f: File = wait(path, file.get_file()).await?.unchecked_into();
            let size = f.size() as u64;
            let (start, end) = span(size, offset(size), len);
            if start == end {
                return Ok((size, Vec::new()));
            }
            let part = f
                .slice_with_f64_and_f64(start as f64, end as f64)
                .map_err(|e| js_error(path, &e))?;
            match JsFuture::from(part.array_buffer()).await {
                Ok(buf) => return Ok((size, Uint8Array::new(&buf).to_vec())),
                Err(e) if error_name(&e) == "NotReadableError" => last = Some(e),
                Err(e) => return Err(js_error(path, &e)),
            }
        }
        Err(js_error(path, &last.expect("a retry had an error")))
    }
}

impl OpfsStore {
    /// [`Store::write`] of a blob that holds bytes: the new bytes go to its hidden sibling
    /// ([`REWRITE_PREFIX`]), whose sync handle is flushed and closed, and the sibling is then
    /// moved over the blob in one step. A write the quota refuses (or any failure before the
    /// move) leaves the blob as it was, as the trait promises; a reader sees the old bytes or
    /// the new ones, never a blob cut to nothing.
    ///
    /// The blob's own sync handle, if this store holds one, is closed before the move (its lock
    /// would refuse it, and it names the old file): the next operation opens the new one.
    async fn replace(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        let segs = segments(path)?;
        let (name, parents) = segs.split_last().expect("one segment at least");
        let tmp_name = format!("{REWRITE_PREFIX}{name}");
        let tmp = match parents {
            [] => tmp_name.clone(),
            _ => format!("{}/{tmp_name}", parents.join("/")),
        };
        let (dir, file) = match self.file(&tmp, true).await {
            Ok(created) => created.expect("created"),
            // The folder went (site data cleared): the blob's error, as a write in place gives.
            Err(StoreError::NotFound(_)) => return Err(StoreError::NotFound(path.to_string())),
            Err(e) => return Err(e),
        };
        // Its own handle, never cached: opened, written whole and closed here.
        let h = open_sync(&file, path).await?;
        let written = h
            .truncate_with_f64(0.0)
            .map_err(|e| js_error(path, &e))
            .and_then(|_| self.write_at(path, &h, bytes, 0))
            .and_then(|_| h.flush().map_err(|e| js_error(path, &e)));
        h.close();
        let moved = match written {
            Ok(()) => {
                self.close(path);
                move_over(&file, &dir, name, path).await
            }
            Err(e) => Err(e),
        };
        if moved.is_err() {
            // Nothing of the write stays (a sibling left anyway is overwritten next time).
            let _ = JsFuture::from(dir.remove_entry(&tmp_name)).await;
        }
        moved
    }
}

/// Whether this engine's file handles have `move()` (Chromium and Firefox do).
fn can_move() -> bool {
    Reflect::get(&js_sys::global(), &"FileSystemFileHandle".into())
        .ok()
        .and_then(|c| Reflect::get(&c, &"prototype".into()).ok())
        .is_some_and(|p| method(&p, "move").is_some())
}

/// Moves `file` into `dir` as `name`, replacing the file of that name, in one step. Retried for
/// a while when a file is still locked: Firefox releases a closed sync handle's lock a moment
/// after `close()`, and another context may be closing its handle on the target.
async fn move_over(file: &FileHandle, dir: &Dir, name: &str, path: &str) -> StoreResult<()> {
    let mut waited = 0;
    loop {
        let promise = file
            .unchecked_ref::<MovableHandle>()
            .move_to(dir, name)
            .map_err(|e| js_error(path, &e))?;
        match JsFuture::from(promise).await {
            Ok(_) => return Ok(()),
            Err(e)
                if error_name(&e) == "NoModificationAllowedError" && waited < LOCKED_RETRY_MS =>
            {
                sleep(25).await;
                waited += 25;
            }
            Err(e) => return Err(js_error(path, &e)),
        }
    }
}

impl Drop for OpfsStore {
    fn drop(&mut self) {
        self.close_handles();
    }
}

type Dir = FileSystemDirectoryHandle;
type FileHandle = FileSystemFileHandle;
type SyncHandle = FileSystemSyncAccessHandle;

/// Whether an error says the entry is not there (or is the other kind).
fn missing(e: &JsValue) -> bool {
    matches!(
        error_name(e).as_str(),
        "NotFoundError" | "TypeMismatchError"
    )
}

/// An error from getting (or creating) an entry below a directory handle. Creating in a
/// directory that was removed (site data cleared) is NotFoundError in Chromium and WebKit, and
/// UnknownError in Firefox (on the old handle): both say the tree is gone, so both are `NotFound`.
fn create_error(path: &str, e: &JsValue) -> StoreError {
    if error_name(e) == "UnknownError" {
        StoreError::NotFound(path.to_string())
    } else {
        js_error(path, e)
    }
}

async fn child_dir(parent: &Dir, name: &str, create: bool, path: &str) -> StoreResult<Option<Dir>> {
    let opts = FileSystemGetDirectoryOptions::new();
    opts.set_create(create);
    match JsFuture::from(parent.get_directory_handle_with_options(name, &opts)).await {
        Ok(d) => Ok(Some(d.unchecked_into())),
        Err(e) if !create && missing(&e) => Ok(None),
        Err(e) => Err(create_error(path, &e)),
    }
}

/// A blob's size and time from the answer of its `getFile()`; `None` when it is gone.
fn file_meta(file: Result<JsValue, JsValue>, path: &str) -> StoreResult<Option<Meta>> {
    match file {
        Ok(f) => {
            let f: File = f.unchecked_into();
            Ok(Some(Meta {
                size: f.size() as u64,
                modified: f.last_modified() as u64,
            }))
        }
        Err(e) if missing(&e) => Ok(None),
        Err(e) => Err(js_error(path, &e)),
    }
}

/// Opens a sync handle, retrying for a while when another context still holds the file.
async fn open_sync(file: &FileHandle, path: &str) -> StoreResult<SyncHandle> {
    let mut waited = 0;
    loop {
        match JsFuture::from(file.create_sync_access_handle()).await {
            Ok(h) => return Ok(h.unchecked_into()),
            Err(e)
                if error_name(&e) == "NoModificationAllowedError" && waited < LOCKED_RETRY_MS =>
            {
                sleep(25).await;
                waited += 25;
            }
            Err(e) => return Err(js_error(path, &e)),
        }
    }
}

impl OpfsStore {
    /// [`Store::list`]'s walk through a folder; each file's size and stamp asked when `sizes`
    /// (else 0: what [`Store::names`] skips).
    async fn entries(&self, dir: &str, sizes: bool) -> StoreResult<Vec<Entry>> {
        let segs = segments(dir)?;
        let Some(d) = self.dir(&segs, false, dir).await? else {
            return Ok(Vec::new());
        };
        // The blobs listed are read next (a session's open reads its newest chunks): their
        // reads start from this folder, not from the root.
        self.dirs.borrow_mut().insert(segs.join("/"), d.clone());
        let it = d.entries();
        let mut out = Vec::new();
        // Files whose size and time are being read: each `getFile()` starts at once, from the
        // handle the listing gave (no walk from the root per file), and all run together.
        let mut pending = Vec::new();
        loop {
            let next = match it.next() {
                Ok(p) => JsFuture::from(p).await,
                Err(e) => Err(e),
            };
            let step = match next {
                Ok(step) => step,
                // The directory went away while it was being listed.
                Err(e) if missing(&e) => return Ok(Vec::new()),
                Err(e) => return Err(js_error(dir, &e)),
            };
            let field =
                |name: &str| Reflect::get(&step, &name.into()).map_err(|e| js_error(dir, &e));
            if field("done")?.is_truthy() {
                break;
            }
            let pair: js_sys::Array = field("value")?.unchecked_into();
            let name = pair.get(0).as_string().unwrap_or_default();
            if name.starts_with(REWRITE_PREFIX) {
                continue; // a rewrite under way (or one a crash cut off): not a blob
            }
            let handle: FileSystemHandle = pair.get(1).unchecked_into();
            if handle.kind() == FileSystemHandleKind::Directory {
                // Its blobs' reads start from it too (a search lists a server's sessions, then
                // reads each one's index): one call each, not a walk from the root.
                let sub = format!("{}/{name}", segs.join("/"));
                self.dirs.borrow_mut().insert(sub, handle.unchecked_into());
                out.push(Entry {
                    name,
                    is_dir: true,
                    size: 0,
                    modified: 0,
                });
                continue;
            }
            let path = format!("{dir}/{name}");
            if !sizes {
                out.push(Entry {
                    name,
                    is_dir: false,
                    size: 0,
                    modified: 0,
                });
                continue;
            }
            if let Some(meta) = self.open_meta(&path) {
                out.push(Entry {
                    name,
                    is_dir: false,
                    size: meta.size,
                    modified: meta.modified,
                });
                continue;
            }
            let file: &FileHandle = handle.unchecked_ref();
            pending.push((name, path, JsFuture::from(file.get_file())));
        }
        for (name, path, file) in pending {
            let Some(meta) = file_meta(file.await, &path)? else {
                continue; // removed since it was listed
            };
            out.push(Entry {
                name,
                is_dir: false,
                size: meta.size,
                modified: meta.modified,
            });
        }
        Ok(out)
    }
}

impl Store for OpfsStore {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        self.entries(dir, true).await
    }

    async fn names(&self, dir: &str) -> StoreResult<Vec<String>> {
        let entries = self.entries(dir, false).await?;
        Ok(entries.into_iter().map(|e| e.name).collect())
    }

    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        if let Some(meta) = self.open_meta(path) {
            return Ok(Some(meta));
        }
        // Through the folder cache, as a read: a search's recheck asks it of every session.
        let Some(file) = self.file_for_reading(path).await? else {
            return Ok(None);
        };
        let file = JsFuture::from(file.get_file()).await;
        if let Ok(f) = &file {
            // Kept for the reads that follow at once (`read_seen`).
            let mut seen = self.seen.borrow_mut();
            if seen.len() >= SEEN_KEPT {
                seen.clear();
            }
            seen.insert(path.to_string(), (f.clone().unchecked_into(), now_millis()));
        }
        file_meta(file, path)
    }

    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        if self.cached(path).is_none() {
            if let Some(bytes) = self.read_seen(path, offset, len).await {
                return Ok(bytes);
            }
        }
        let (_, bytes) = self.read_span(path, &|_| offset, len).await?;
        Ok(bytes)
    }

    /// Each blob's `File` (one per blob, all asked together), then one `Blob` of every range
    /// read in one call: 20 ranges of 18 blobs took about 55 calls to the storage thread, and
    /// now 37. A range whose blob this store holds open, or that does not read that way (a
    /// file changed since its `File` was taken fails the whole call), is read on its own.
    async fn read_many(&self, reads: &[(&str, u64, usize)]) -> Vec<StoreResult<Vec<u8>>> {
        let mut paths: Vec<&str> = (reads.iter())
            .map(|r| r.0)
            .filter(|p| self.cached(p).is_none())
            .collect();
        paths.sort_unstable();
        paths.dedup();
        let files = futures::future::join_all(paths.iter().map(|&path| async move {
            let fresh = (self.seen.borrow().get(path).cloned())
                .filter(|(_, at)| now_millis().saturating_sub(*at) <= SEEN_MS);
            if let Some((file, _)) = fresh {
                return Some((path, file));
            }
            let handle = self.file_for_reading(path).await.ok()??;
            let file = JsFuture::from(handle.get_file()).await.ok()?;
            Some((path, file.unchecked_into::<File>()))
        }));
        let files: HashMap<&str, File> = files.await.into_iter().flatten().collect();
        let (parts, mut spans) = (js_sys::Array::new(), Vec::new());
        for (i, &(path, offset, len)) in reads.iter().enumerate() {
            let Some(file) = files.get(path) else {
                continue;
            };
            let (start, end) = span(file.size() as u64, offset, len);
            if let Ok(part) = file.slice_with_f64_and_f64(start as f64, end as f64) {
                parts.push(&part);
                spans.push((i, (end - start) as usize));
            }
        }
        let mut out: Vec<Option<StoreResult<Vec<u8>>>> = vec![None; reads.len()];
        let whole = (!spans.is_empty())
            .then(|| web_sys::Blob::new_with_blob_sequence(&parts).ok())
            .flatten();
        if let Some(whole) = whole {
            if let Ok(buf) = JsFuture::from(whole.array_buffer()).await {
                let bytes = Uint8Array::new(&buf).to_vec();
                let mut at = 0;
                for (i, len) in spans {
                    out[i] = bytes.get(at..at + len).map(|b| Ok(b.to_vec()));
                    at += len;
                }
            }
        }
        let rest = out
            .into_iter()
            .zip(reads)
            .map(|(done, &(path, offset, len))| async move {
                match done {
                    Some(done) => done,
                    None => self.read(path, offset, len).await,
                }
            });
        futures::future::join_all(rest).await
    }

    async fn read_end(&self, path: &str, len: usize) -> StoreResult<(u64, Vec<u8>)> {
        self.read_span(path, &|size| size.saturating_sub(len as u64), len)
            .await
    }

    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        if bytes.is_empty()
            && self.cached(path).is_none()
            && self.file(path, false).await?.is_none()
        {
            // A new empty blob (a search mark) made without a sync handle: the file's handle,
            // asked with `create`, makes it (a handle took 5-10 ms more, on a session's first
            // index write). One that is there is written the usual way (a touch moves its
            // stamp), and so is one another context filled meanwhile.
            if let Some((_, file)) = self.file(path, true).await? {
                let f: File = wait(path, file.get_file()).await?.unchecked_into();
                if f.size() == 0.0 {
                    return Ok(());
                }
            }
        }
        if !bytes.is_empty() && can_move() && self.stat(path).await?.is_some_and(|m| m.size > 0) {
            // Not in place: emptied first, the blob would be lost to a write the quota refuses.
            return self.replace(path, bytes).await;
        }
        // Nothing to lose (a new or empty blob, or an empty write): in place, through the
        // blob's sync handle, which stays open for the appends that usually follow.
        let h = self.handle(path, true).await?.expect("created");
        let done = h
            .truncate_with_f64(0.0)
            .map_err(|e| js_error(path, &e))
            .and_then(|_| self.write_at(path, &h, bytes, 0))
            .and_then(|_| h.flush().map_err(|e| js_error(path, &e)));
        match done {
            Ok(()) => {
                self.wrote(path, bytes.len() as u64);
                Ok(())
            }
            Err(e) => {
                self.wrote(path, 0);
                Err(self.failed(path, e).await)
            }
        }
    }

    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        let h = self.handle(path, true).await?.expect("created");
        let size = self.open.borrow().get(path).map_or(0, |o| o.size);
        match self.write_at(path, &h, bytes, size) {
            Ok(()) => {
                let new = size + bytes.len() as u64;
                self.wrote(path, new);
                Ok(new)
            }
            Err(e) => Err(self.failed(path, e).await),
        }
    }

    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        let Some(h) = self.handle(path, false).await? else {
            return Err(StoreError::NotFound(path.to_string()));
        };
        let size = self.open.borrow().get(path).map_or(0, |o| o.size);
        let len = len.min(size);
        match h.truncate_with_f64(len as f64) {
            Ok(()) => {
                self.wrote(path, len);
                Ok(())
            }
            Err(e) => Err(self.failed(path, js_error(path, &e)).await),
        }
    }

    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        let to_segs = segments(to)?;
        segments(from)?;
        if from == to {
            return match self.stat(from).await? {
                Some(_) => Ok(()),
                None => Err(StoreError::NotFound(from.to_string())),
            };
        }
        // A handle holds its file's lock: `move()` needs both files free.
        self.close(from);
        self.close(to);
        let Some((_, file)) = self.file(from, false).await? else {
            return Err(StoreError::NotFound(from.to_string()));
        };
        let (name, parents) = to_segs.split_last().expect("one segment at least");
        let dir = self.dir(parents, true, to).await?.expect("created");
        if method(&file, "move").is_some() {
            // Chromium's move() replaces an existing file of the new name in one step.
            let promise = file
                .unchecked_ref::<MovableHandle>()
                .move_to(&dir, name)
                .map_err(|e| js_error(from, &e))?;
            wait(from, promise).await?;
            return Ok(());
        }
        // No move() (older engines): copy, then remove. Not atomic; readers list again.
        let (_, bytes) = self.read_file(from, &|_| 0, usize::MAX).await?;
        self.write(to, &bytes).await?;
        self.close(to);
        self.remove(from).await
    }

    async fn remove(&self, path: &str) -> StoreResult<()> {
        let segs = segments(path)?;
        self.close(path);
        self.forget_dirs(path);
        let (name, parents) = segs.split_last().expect("one segment at least");
        let Some(dir) = self.dir(parents, false, path).await? else {
            return Ok(());
        };
        let opts = FileSystemRemoveOptions::new();
        opts.set_recursive(true);
        // Firefox releases a closed sync handle's lock a moment after `close()`: until then a
        // remove fails with NoModificationAllowedError, so it is retried for a while.
        let mut waited = 0;
        loop {
            match JsFuture::from(dir.remove_entry_with_options(name, &opts)).await {
                Ok(_) => return Ok(()),
                Err(e) if missing(&e) => return Ok(()),
                Err(e)
                    if error_name(&e) == "NoModificationAllowedError"
                        && waited < LOCKED_RETRY_MS =>
                {
                    sleep(25).await;
                    waited += 25;
                }
                Err(e) => return Err(js_error(path, &e)),
            }
        }
    }

    async fn flush(&self) -> StoreResult<()> {
        let open = self.open.borrow();
        for (path, o) in open.iter() {
            o.handle.flush().map_err(|e| js_error(path, &e))?;
        }
        Ok(())
    }

    async fn hand_over(&self, key: &str) {
        self.close_handles_below(key);
    }
}
