//! The IndexedDB backend.
//!
//! Two object stores. `meta` maps a blob's path (the same names as OPFS) to `[id, size,
//! modified]`; `seg` holds the blob's bytes in segments of [`SEGMENT`] bytes, never one
//! growing record. Segment `index` (bytes `index * SEGMENT ..`) is the record `[id, index]`,
//! and, in the blob's last segment only, the pieces appended after it: `[id, index, at]`
//! holds the bytes from `at` within the segment. A commit that does not fill the last segment
//! adds a piece of its own bytes; the commit that fills it writes the segment whole as one
//! record (its bytes before the commit kept from the commits before, not read again) and drops
//! its pieces. So a commit writes its bytes, and a segment's bytes once more when it fills
//! (a streamed line, committed on its own, writes its few hundred bytes, not the 8 kB that
//! rewriting a half-full record averaged), and a ranged read fetches only the segments it
//! covers: both cost O(bytes), not O(blob). The size and stamp in `meta` change in the same
//! transaction as the segments; a rename moves only the `meta` record (segments are keyed by
//! id), so readers see the old name or the new one; a folder's `meta` records go by one key
//! range.
//!
//! Chromium pays per transaction, so appends are coalesced: an append lands in a per-blob tail
//! buffer and returns; the buffer is committed as one transaction when it reaches
//! [`FLUSH_AT`] bytes (that append waits for it) or [`FLUSH_DELAY_MS`] after the first
//! buffered append. Every other operation commits pending tails first, so this store always
//! reads its own writes; other contexts see them up to [`FLUSH_DELAY_MS`] later, or after
//! [`Store::flush`]. A commit that fails (quota, or the blob changed or vanished under it) drops
//! its bytes and is answered by the next `append` or `flush` on that blob. A tab that gives up
//! the writer role calls `flush` first. A blob's tail keeps its committed size and its last
//! segment's bytes from one commit to the next, across lists and other blobs' operations: only
//! an operation that changes the blob (a write, truncate, rename or remove) and a `flush` (the
//! writer role may change hands after it) make its next append read them again.
//!
//! Reads issued together share one read-only transaction while it is active (a search's first
//! query reads each session's index at once): one read's requests, and the reads begun beside
//! it, instead of a transaction each. A read begun after a write of this store takes a new one.
//! A `list` keeps the `meta` records it read (every blob below the folder) with its
//! transaction, and a read that rides that transaction takes its blob's record from there
//! rather than asking for it: a search lists a server's sessions, then reads each one's index
//! at once, and each read is then one request, not two in turn (a quarter off a search's first
//! query in Chromium).
//!
//! A database deleted or closed under a running store (site data cleared, another context
//! deleting it) is reopened empty: lists are empty, `stat` is `None`, reads are `NotFound`.

use super::browser::{error_name, js_error, now_millis, sleep, wait};
use super::{entries_below, segments, span, Entry, Meta, Store, StoreError, StoreResult};
use js_sys::{Array, JsString, Promise, Reflect, Uint8Array};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::spawn_local;
use web_sys::{
    Event, IdbDatabase, IdbFactory, IdbKeyRange, IdbObjectStore, IdbOpenDbRequest, IdbRequest,
    IdbTransaction, IdbTransactionDurability, IdbTransactionMode, IdbTransactionOptions,
};

/// Bytes per segment record.
pub const SEGMENT: u64 = 16 * 1024;
/// Buffered append bytes that make an append commit before it returns.
pub const FLUSH_AT: usize = 256 * 1024;
/// How long a buffered append waits for others to join its transaction.
pub const FLUSH_DELAY_MS: u32 = 4;

const META: &str = "meta";
const SEG: &str = "seg";
/// The id counter's key in `meta`; a path never contains NUL.
const NEXT_ID: &str = "\u{0}next-id";

/// Blobs as segment records in an IndexedDB database.
#[derive(Debug)]
pub struct IdbStore {
    inner: Rc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    db: RefCell<Option<IdbDatabase>>,
    tails: RefCell<HashMap<String, Tail>>,
    /// Commits that failed, by blob: each is answered to that blob's next `append` or
    /// `rename` (taken then), and once to a `flush` (the flag: reported), which keeps it.
    failures: RefCell<HashMap<String, (StoreError, bool)>>,
    budget: Cell<Option<u64>>,
    /// Commits running now (a timer's may run beside an explicit flush).
    running: Cell<usize>,
    /// The read-only transaction that reads share while it is active (reads issued together,
    /// as a search's over every session, ride one transaction instead of one each: a quarter
    /// off a search's first query in Chromium), with the count of read-write transactions this
    /// store had opened when it began. A read-write transaction waits for every read-only one
    /// begun before it (which is also why a read always sees this store's finished writes):
    /// a read never joins one begun before a write of this store, so that reads that keep
    /// coming cannot hold the write back; it takes a new one, queued behind the write.
    reading: RefCell<Option<(Rc<Tx>, u64)>>,
    /// Read-write transactions opened so far.
    writes: Cell<u64>,
    /// Bytes of segment records put so far ([`IdbStore::bytes_put`]).
    put_bytes: Cell<u64>,
    /// Bytes of segment records read so far ([`IdbStore::bytes_read`]).
    read_bytes: Cell<u64>,
}

/// Appends not committed yet, after `base` committed bytes.
#[derive(Debug)]
struct Tail {
    base: u64,
    buf: Vec<u8>,
    scheduled: bool,
    /// The bytes of the partial last segment that ends at `base` (as the commits before left
    /// it), when known: the commit that fills it writes it whole without reading it first.
    partial: Option<Vec<u8>>,
}

impl Tail {
    /// Takes the buffered bytes for a commit at `base`, with the partial record they extend
    /// (if known), and moves `base` and `partial` past them for the commit after.
    fn take(&mut self) -> (u64, Vec<u8>, Option<Vec<u8>>) {
        let bytes = std::mem::take(&mut self.buf);
        let base = self.base;
        let partial = self.partial.take();
        self.base += bytes.len() as u64;
        let keep = (self.base % SEGMENT) as usize;
        self.partial = match keep <= bytes.len() {
            true => Some(bytes[bytes.len() - keep..].to_vec()),
            false => partial.as_ref().map(|p| [p.as_slice(), &bytes].concat()),
        };
        (base, bytes, partial)
    }
}

/// A blob's `meta` record.
#[derive(Debug, Clone, Copy)]
struct Rec {
    id: f64,
    size: u64,
    modified: u64,
}

impl IdbStore {
    /// The store in the database named `scrollback`.
    pub async fn open() -> StoreResult<Self> {
        Self::open_named("scrollback").await
    }

    /// The store in the database `name` (created if missing), so that tests and applications
    /// can keep separate databases.
    pub async fn open_named(name: &str) -> StoreResult<Self> {
        let db = open_db(name).await?;
        Ok(IdbStore {
            inner: Rc::new(Inner {
                name: name.to_string(),
                db: RefCell::new(Some(db)),
                tails: RefCell::default(),
                failures: RefCell::default(),
                budget: Cell::new(None),
                running: Cell::new(0),
                reading: RefCell::new(None),
                writes: Cell::new(0),
                put_bytes: Cell::new(0),
                read_bytes: Cell::new(0),
            }),
        })
    }

    /// Deletes the database `name`; open stores on it close their connection and start over
    /// empty on their next operation.
    pub async fn delete_database(name: &str) -> StoreResult<()> {
        let req = factory()?
            .delete_database(name)
            .map_err(|e| js_error(name, &e))?;
        request(name, Ok(req.into())).await.map(|_| ())
    }

    /// Simulates a full origin: at most `bytes` more bytes are accepted from now on, and a
    /// write past that fails with [`StoreError::QuotaExceeded`], changing nothing. `None` lifts
    /// the limit.
    pub fn limit_writes(&self, bytes: Option<u64>) {
        self.inner.budget.set(bytes);
    }

    /// The bytes of segment records this store has put since it opened, committed or not:
    /// what its writes cost IndexedDB. A commit puts its own bytes, and a segment's bytes once
    /// more when it fills, so an append's share does not grow with the blob (the tests check
    /// it).
    pub fn bytes_put(&self) -> u64 {
        self.inner.put_bytes.get()
    }

    /// The bytes of segment records this store has read since it opened: its reads', and its
    /// commits' that had to read a segment's start back (the tests check that appends, with
    /// lists and other blobs' writes between them, read nothing back).
    pub fn bytes_read(&self) -> u64 {
        self.inner.read_bytes.get()
    }

    /// The blob's size and up to `len` bytes of it from `offset(size)`, read in the shared read
    /// transaction: its `meta` record (from a listing that transaction made, when one covers
    /// the blob, else asked for), then the segment records the span covers.
    async fn read_span(
        &self,
        path: &str,
        offset: &dyn Fn(u64) -> u64,
        len: usize,
    ) -> StoreResult<(u64, Vec<u8>)> {
        segments(path)?;
        self.inner.flush_all().await;
        // Only a read that asks the listing's transaction for records may trust its listing:
        // asking fails once the transaction is over. A blob the listing did not find, or a
        // read of nothing, asks for its record (the blob may have been made since).
        if let Some((tx, rec)) = self.inner.listed(path) {
            let (start, end) = span(rec.size, offset(rec.size), len);
            if start < end {
                let read = &self.inner.read_bytes;
                match read_segments(read, &tx, path, rec.id, rec.size, start, end) {
                    Ok(read) => return Ok((rec.size, read.await?)),
                    // The transaction finished since: the record is asked for in a new one.
                    Err(e) if error_name(&e) == "TransactionInactiveError" => {}
                    Err(e) => return Err(js_error(path, &e)),
                }
            }
        }
        let (tx, rec) = self
            .inner
            .reading(path, |tx| tx.meta.get(&path.into()))
            .await?;
        let Some(rec) = rec_of(&rec.await?) else {
            return Err(StoreError::NotFound(path.to_string()));
        };
        let (start, end) = span(rec.size, offset(rec.size), len);
        if start == end {
            return Ok((rec.size, Vec::new()));
        }
        let read = &self.inner.read_bytes;
        let read = read_segments(read, &tx, path, rec.id, rec.size, start, end)
            .map_err(|e| js_error(path, &e))?;
        Ok((rec.size, read.await?))
    }

    /// Takes `len` bytes from the simulated quota, or fails.
    fn spend(&self, len: usize) -> StoreResult<()> {
        if let Some(b) = self.inner.budget.get() {
            if len as u64 > b {
                return Err(StoreError::QuotaExceeded);
            }
            self.inner.budget.set(Some(b - len as u64));
        }
        Ok(())
    }
}

impl Inner {
    /// A transaction over both object stores, reopening the database once if it was closed
    /// under us (deleted by another context, or site data cleared).
    async fn tx(&self, mode: IdbTransactionMode, path: &str) -> StoreResult<Tx> {
        for attempt in 0..2 {
            if self.db.borrow().is_none() {
                let db = open_db(&self.name).await?;
                *self.db.borrow_mut() = Some(db);
            }
            let db = self.db.borrow().clone().expect("opened above");
            if mode == IdbTransactionMode::Readwrite {
                self.writes.set(self.writes.get() + 1);
            }
            let names = [JsString::from(META), JsString::from(SEG)];
            let opts = IdbTransactionOptions::new();
            opts.set_durability(IdbTransactionDurability::Relaxed);
            match db.transaction_with_str_sequence_and_mode_and_options(&names, mode, &opts) {
                Ok(tx) => return Tx::new(tx, path),
                Err(e) if attempt == 0 && error_name(&e) == "InvalidStateError" => {
                    db.close();
                    *self.db.borrow_mut() = None;
                }
                Err(e) => return Err(js_error(path, &e)),
            }
        }
        unreachable!("the second attempt returns")
    }

    /// The shared read transaction and the record of `path` in it, when a `list` in that
    /// transaction found it and no write of this store began since.
    fn listed(&self, path: &str) -> Option<(Rc<Tx>, Rec)> {
        let (tx, writes) = self.reading.borrow().as_ref().cloned()?;
        if writes != self.writes.get() {
            return None;
        }
        let rec = tx.listed(path)?;
        Some((tx, rec))
    }

    /// The committed record of a blob, read in the shared read transaction.
    async fn committed(&self, path: &str) -> StoreResult<Option<Rec>> {
        let (_, rec) = self.reading(path, |tx| tx.meta.get(&path.into())).await?;
        Ok(rec_of(&rec.await?))
    }

    /// Asks a read's first request in the shared read-only transaction while it is active and
    /// no write of this store began after it, else in a new one (which the reads after it
    /// share). The transaction is answered with the request, for the read's further requests,
    /// asked before it awaits anything but their answers (while the transaction is active).
    async fn reading(
        &self,
        path: &str,
        ask: impl Fn(&Tx) -> Result<IdbRequest, JsValue>,
    ) -> StoreResult<(Rc<Tx>, impl Future<Output = StoreResult<JsValue>>)> {
        let writes = self.writes.get();
        let shared = self.reading.borrow().as_ref().cloned();
        if let Some((tx, _)) = shared.filter(|(_, w)| *w == writes) {
            match ask(&tx) {
                Ok(req) => return Ok((tx, read_request(path, req))),
                // Finished (or between two of its events): a new one.
                Err(e) if error_name(&e) == "TransactionInactiveError" => {}
                Err(e) => return Err(js_error(path, &e)),
            }
        }
        let tx = Rc::new(self.tx(IdbTransactionMode::Readonly, path).await?);
        *self.reading.borrow_mut() = Some((tx.clone(), self.writes.get()));
        let req = ask(&tx).map_err(|e| js_error(path, &e))?;
        Ok((tx, read_request(path, req)))
    }

    /// Puts `bytes` as the segment record (or piece) `key`, counted in [`IdbStore::bytes_put`].
    fn put(
        &self,
        seg: &IdbObjectStore,
        path: &str,
        bytes: &[u8],
        key: &JsValue,
    ) -> StoreResult<()> {
        seg.put_with_key(&Uint8Array::from(bytes), key)
            .map_err(|e| js_error(path, &e))?;
        self.put_bytes
            .set(self.put_bytes.get() + bytes.len() as u64);
        Ok(())
    }

    /// Writes `data` as the segment records from `first` on.
    fn put_segments(
        &self,
        seg: &IdbObjectStore,
        path: &str,
        id: f64,
        first: u64,
        data: &[u8],
    ) -> StoreResult<()> {
        for (i, part) in data.chunks(SEGMENT as usize).enumerate() {
            self.put(seg, path, part, &key(id, (first + i as u64) as f64))?;
        }
        Ok(())
    }

    /// Commits a blob's buffered appends as one transaction.
    async fn flush_path(&self, path: &str) -> StoreResult<()> {
        self.running.set(self.running.get() + 1);
        let result = self.commit_tail(path).await;
        self.running.set(self.running.get() - 1);
        result
    }

    async fn commit_tail(&self, path: &str) -> StoreResult<()> {
        if !self
            .tails
            .borrow()
            .get(path)
            .is_some_and(|t| !t.buf.is_empty())
        {
            return Ok(());
        }
        let tx = match self.tx(IdbTransactionMode::Readwrite, path).await {
            Ok(tx) => tx,
            Err(e) => {
                self.tails.borrow_mut().remove(path);
                return Err(e);
            }
        };
        // Taken only now that the transaction exists: transactions run in the order they are
        // created, so buffers are committed in the order they were taken.
        let (base, bytes, partial) = {
            let mut tails = self.tails.borrow_mut();
            let Some(t) = tails.get_mut(path) else {
                return Ok(());
            };
            t.take()
        };
        if bytes.is_empty() {
            return Ok(());
        }
        let done = async {
            let rec = get_rec(&tx.meta, path).await?;
            let size = rec.map_or(0, |r| r.size);
            if size != base {
                tx.abort();
                return Err(match rec {
                    None => StoreError::NotFound(path.to_string()),
                    Some(_) => {
                        StoreError::Contended(format!("{path} ({size} bytes, expected {base})"))
                    }
                });
            }
            let id = match rec {
                Some(r) => r.id,
                None => new_id(&tx.meta, path).await?,
            };
            let first = base / SEGMENT;
            let head = (base % SEGMENT) as usize;
            if head > 0 && head + bytes.len() < SEGMENT as usize {
                // The last segment does not fill: the bytes are a piece of it.
                let k = piece(id, first, head as f64);
                self.put(&tx.seg, path, &bytes, &k)?;
            } else {
                // Whole segments from `first` on; the one begun before is written whole, its
                // pieces dropped.
                let mut data = Vec::with_capacity(head + bytes.len());
                if head > 0 {
                    match partial.filter(|p| p.len() == head) {
                        Some(p) => data.extend_from_slice(&p),
                        None => {
                            let read = &self.read_bytes;
                            let read =
                                read_segments(read, &tx, path, id, base, first * SEGMENT, base);
                            data.extend(read.map_err(|e| js_error(path, &e))?.await?);
                        }
                    }
                    tx.seg
                        .delete(&pieces_of(id, first)?)
                        .map_err(|e| js_error(path, &e))?;
                }
                data.extend_from_slice(&bytes);
                self.put_segments(&tx.seg, path, id, first, &data)?;
            }
            let modified = now_millis().max(rec.map_or(0, |r| r.modified));
            put_rec(&tx.meta, path, id, base + bytes.len() as u64, modified)?;
            tx.done().await
        }
        .await;
        if done.is_err() {
            self.tails.borrow_mut().remove(path);
        }
        done
    }

    /// Commits every blob's buffered appends; failures are kept for that blob's next `append`
    /// or `rename` (and reported once to `flush`).
    async fn flush_all(&self) {
        loop {
            let paths: Vec<String> = self
                .tails
                .borrow()
                .iter()
                .filter(|(_, t)| !t.buf.is_empty())
                .map(|(k, _)| k.clone())
                .collect();
            for path in &paths {
                if let Err(e) = self.flush_path(path).await {
                    self.failures.borrow_mut().insert(path.clone(), (e, false));
                }
            }
            // A commit started elsewhere (the delay timer's) may still be running: its outcome
            // belongs to this flush too.
            if paths.is_empty() && self.running.get() == 0 {
                return;
            }
            if paths.is_empty() {
                sleep(1).await;
            }
        }
    }

    /// Commits pending appends, then forgets what it knew of the blobs an operation about to
    /// run may change (`changes` names them): their committed sizes and last segments' bytes,
    /// read again when next needed (a tail still buffering keeps its size: its commit checks
    /// it). Other blobs keep theirs, so a streamed line's commit after a page written or a
    /// chunk renamed beside it still needs no read.
    async fn settle(&self, changes: impl Fn(&str) -> bool) {
        self.flush_all().await;
        self.tails.borrow_mut().retain(|path, t| {
            if !changes(path) {
                return true;
            }
            t.partial = None;
            !t.buf.is_empty()
        });
    }
}

thread_local! {
    /// Does nothing with a rejection (see [`Tx::new`]).
    static IGNORE: Closure<dyn FnMut(JsValue)> = Closure::new(|_: JsValue| {});
}

/// A transaction, its two object stores, and its outcome (listened for from the start).
#[derive(Debug)]
struct Tx {
    tx: IdbTransaction,
    meta: IdbObjectStore,
    seg: IdbObjectStore,
    outcome: Promise,
    path: String,
    /// The `meta` records of the blobs that a `list` in this transaction read (every blob
    /// below the folder listed), by path: a read in this transaction of one of them takes
    /// its record from here instead of asking for it (the records cannot change while a
    /// read-only transaction runs).
    listed: RefCell<HashMap<String, Rec>>,
}

impl Tx {
    fn new(tx: IdbTransaction, path: &str) -> StoreResult<Tx> {
        let t = tx.clone();
        let outcome = Promise::new(&mut |resolve, reject| {
            let failed = t.clone();
            let done = Closure::once_into_js(move |ev: Event| {
                if ev.type_() == "complete" {
                    let _ = resolve.call0(&JsValue::NULL);
                } else {
                    let err = failed
                        .error()
                        .map(JsValue::from)
                        .unwrap_or_else(|| js_sys::Error::new("transaction aborted").into());
                    let _ = reject.call1(&JsValue::NULL, &err);
                }
            });
            t.set_oncomplete(Some(done.unchecked_ref()));
            t.set_onabort(Some(done.unchecked_ref()));
        });
        // Handled, whether or not anything waits for it: a transaction nobody awaits that is
        // aborted (its database deleted under it) is not an uncaught error in the worker.
        IGNORE.with(|ignore| {
            let _ = outcome.catch(ignore);
        });
        let meta = tx.object_store(META).map_err(|e| js_error(path, &e))?;
        let seg = tx.object_store(SEG).map_err(|e| js_error(path, &e))?;
        Ok(Tx {
            tx,
            meta,
            seg,
            outcome,
            path: path.to_string(),
            listed: RefCell::default(),
        })
    }

    /// The record of `path` as a `list` in this transaction found it, if one did.
    fn listed(&self, path: &str) -> Option<Rec> {
        self.listed.borrow().get(path).copied()
    }

    /// Waits for the transaction to commit.
    async fn done(&self) -> StoreResult<()> {
        wait(&self.path, self.outcome.clone()).await.map(|_| ())
    }

    fn abort(&self) {
        let _ = self.tx.abort();
    }
}

fn factory() -> StoreResult<IdbFactory> {
    let f = Reflect::get(&js_sys::global(), &"indexedDB".into())
        .map_err(|e| js_error("indexedDB", &e))?;
    if f.is_object() {
        Ok(f.unchecked_into())
    } else {
        Err(StoreError::Io("IndexedDB is not available here".into()))
    }
}

async fn open_db(name: &str) -> StoreResult<IdbDatabase> {
    let req: IdbOpenDbRequest = factory()?
        .open_with_u32(name, 1)
        .map_err(|e| js_error(name, &e))?;
    let upgrade = Closure::once_into_js(move |ev: Event| {
        let req: IdbOpenDbRequest = ev.target().expect("a request").unchecked_into();
        let db: IdbDatabase = req.result().expect("the database").unchecked_into();
        let names = db.object_store_names();
        for store in [META, SEG] {
            if !names.contains(store) {
                let _ = db.create_object_store(store);
            }
        }
    });
    req.set_onupgradeneeded(Some(upgrade.unchecked_ref()));
    let db: IdbDatabase = request(name, Ok(req.into())).await?.unchecked_into();
    // Another context deleting the database: close, so it can, and reopen on the next use.
    let closing = db.clone();
    let on_change = Closure::<dyn FnMut(Event)>::new(move |_: Event| closing.close());
    db.set_onversionchange(Some(on_change.as_ref().unchecked_ref()));
    on_change.forget();
    Ok(db)
}

/// The result of a request, listened for at once (so it can be awaited after others). A failed
/// request aborts its transaction (a write's other requests are undone with it).
fn request(
    path: &str,
    req: Result<IdbRequest, JsValue>,
) -> impl Future<Output = StoreResult<JsValue>> {
    answer(path, req, false)
}

/// The result of a request in the shared read transaction: a failed one fails its read alone,
/// not the others sharing the transaction.
fn read_request(path: &str, req: IdbRequest) -> impl Future<Output = StoreResult<JsValue>> {
    answer(path, Ok(req), true)
}

fn answer(
    path: &str,
    req: Result<IdbRequest, JsValue>,
    alone: bool,
) -> impl Future<Output = StoreResult<JsValue>> {
    let promise = req.map(|req| {
        Promise::new(&mut |resolve, reject| {
            let r = req.clone();
            let done = Closure::once_into_js(move |ev: Event| {
                if ev.type_() == "success" {
                    let _ = resolve.call1(&JsValue::NULL, &r.result().unwrap_or_default());
                } else {
                    if alone {
                        ev.prevent_default(); // the transaction goes on for the others
                    }
                    let err = r.error().ok().flatten().map(JsValue::from);
                    let _ = reject.call1(&JsValue::NULL, &err.unwrap_or_default());
                }
            });
            req.set_onsuccess(Some(done.unchecked_ref()));
            req.set_onerror(Some(done.unchecked_ref()));
        })
    });
    let path = path.to_string();
    async move {
        match promise {
            Ok(p) => wait(&path, p).await,
            Err(e) => Err(js_error(&path, &e)),
        }
    }
}

fn key(id: f64, index: f64) -> JsValue {
    Array::of2(&id.into(), &index.into()).into()
}

/// The key of the piece of segment `index` that starts `at` bytes into it.
fn piece(id: f64, index: u64, at: f64) -> JsValue {
    Array::of3(&id.into(), &(index as f64).into(), &at.into()).into()
}

/// The pieces of blob `id`'s segment `index` (not its own record).
fn pieces_of(id: f64, index: u64) -> StoreResult<JsValue> {
    IdbKeyRange::bound(
        &piece(id, index, f64::NEG_INFINITY),
        &piece(id, index, f64::INFINITY),
    )
    .map(JsValue::from)
    .map_err(|e| js_error("segments", &e))
}

/// Every segment of blob `id` from `index` on, pieces included.
fn segs_from(id: f64, index: u64) -> StoreResult<JsValue> {
    IdbKeyRange::bound(&key(id, index as f64), &key(id, f64::INFINITY))
        .map(JsValue::from)
        .map_err(|e| js_error("segments", &e))
}

/// Every path below folder `dir`: `dir/` up to, not including, `dir0` ('0' follows '/').
fn below(dir: &str) -> StoreResult<IdbKeyRange> {
    IdbKeyRange::bound_with_lower_open_and_upper_open(
        &format!("{dir}/").into(),
        &format!("{dir}0").into(),
        false,
        true,
    )
    .map_err(|e| js_error(dir, &e))
}

/// Asks `tx` (at once: an error if it is no longer active) for the segment records of blob
/// `id` (at `path`) that bytes `start..end` (not empty) cover; the future answers those bytes,
/// counted in `read` ([`IdbStore::bytes_read`]).
fn read_segments<'a>(
    read: &'a Cell<u64>,
    tx: &Tx,
    path: &str,
    id: f64,
    size: u64,
    start: u64,
    end: u64,
) -> Result<impl Future<Output = StoreResult<Vec<u8>>> + 'a, JsValue> {
    let (first, last) = (start / SEGMENT, (end - 1) / SEGMENT);
    let range = IdbKeyRange::bound(&key(id, first as f64), &piece(id, last, f64::INFINITY))?;
    let parts = tx.seg.get_all_with_key(&range)?;
    let path = path.to_string();
    Ok(async move {
        let parts: Array = read_request(&path, parts).await?.into();
        // In key order: a record per full segment, then the last segment's record and pieces,
        // which together hold the blob's bytes up to its size (or its full segment).
        let covered = size.min((last + 1) * SEGMENT);
        let full_below = covered / SEGMENT * SEGMENT; // (where a segment may have pieces)
        let mut out = Vec::with_capacity((end - start) as usize);
        let mut at = first * SEGMENT;
        for part in parts.iter() {
            let part: Uint8Array = part.dyn_into().map_err(|_| damaged(&path))?;
            let len = part.length() as u64;
            if (at < full_below && len != SEGMENT) || at + len > covered {
                return Err(damaged(&path));
            }
            if at < end && at + len > start {
                let from = start.saturating_sub(at) as u32;
                let to = (end - at).min(len) as u32;
                out.extend_from_slice(&part.subarray(from, to).to_vec());
            }
            at += len;
        }
        if at != covered {
            return Err(damaged(&path));
        }
        read.set(read.get() + out.len() as u64);
        Ok(out)
    })
}

/// Whether a path is `key` or below it.
fn at_or_below(key: &str) -> impl Fn(&str) -> bool + '_ {
    move |p| {
        p.strip_prefix(key)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

fn damaged(path: &str) -> StoreError {
    StoreError::Io(format!("{path}: a segment record is missing or short"))
}

fn rec_of(v: &JsValue) -> Option<Rec> {
    let a = v.dyn_ref::<Array>()?;
    Some(Rec {
        id: a.get(0).as_f64()?,
        size: a.get(1).as_f64()? as u64,
        modified: a.get(2).as_f64()? as u64,
    })
}

async fn get_rec(meta: &IdbObjectStore, path: &str) -> StoreResult<Option<Rec>> {
    let v = request(path, meta.get(&path.into())).await?;
    Ok(rec_of(&v))
}

fn put_rec(
    meta: &IdbObjectStore,
    path: &str,
    id: f64,
    size: u64,
    modified: u64,
) -> StoreResult<()> {
    let v = Array::of3(&id.into(), &(size as f64).into(), &(modified as f64).into());
    meta.put_with_key(&v, &path.into())
        .map(|_| ())
        .map_err(|e| js_error(path, &e))
}

/// A fresh blob id from the counter in `meta`.
async fn new_id(meta: &IdbObjectStore, path: &str) -> StoreResult<f64> {
    let v = request(path, meta.get(&NEXT_ID.into())).await?;
    let id = v.as_f64().unwrap_or(1.0);
    meta.put_with_key(&(id + 1.0).into(), &NEXT_ID.into())
        .map_err(|e| js_error(path, &e))?;
    Ok(id)
}

impl Store for IdbStore {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        segments(dir)?;
        self.inner.flush_all().await;
        let range = below(dir)?;
        let (tx, keys) = self
            .inner
            .reading(dir, |tx| tx.meta.get_all_keys_with_key(&range))
            .await?;
        let values = tx.meta.get_all_with_key(&range);
        let values = read_request(dir, values.map_err(|e| js_error(dir, &e))?);
        let (keys, values): (Array, Array) = (keys.await?.into(), values.await?.into());
        let keys: Vec<String> = keys
            .iter()
            .map(|k| k.as_string().unwrap_or_default())
            .collect();
        let values: Vec<JsValue> = values.iter().collect();
        // Kept with the transaction: the reads of these blobs that follow in it (a search
        // reads each session's index just after listing them) need not ask for their records.
        let recs = keys.iter().zip(&values);
        let recs = recs.filter_map(|(k, v)| Some((k.clone(), rec_of(v)?)));
        tx.listed.borrow_mut().extend(recs);
        Ok(entries_below(
            dir,
            keys.into_iter().zip(values.iter()),
            |v| {
                rec_of(v).map(|r| Meta {
                    size: r.size,
                    modified: r.modified,
                })
            },
        ))
    }

    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        segments(path)?;
        self.inner.flush_all().await;
        Ok(self.inner.committed(path).await?.map(|r| Meta {
            size: r.size,
            modified: r.modified,
        }))
    }

    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        let (_, bytes) = self.read_span(path, &|_| offset, len).await?;
        Ok(bytes)
    }

    /// Half the default: a read pays per 16 kB record here (a search's first query right
    /// after a start, reading every session's segment header: 55-62 ms at 64 kB against 81-84
    /// at 128 kB in Chromium, with a read per word after it where the dictionary did not fit).
    fn read_ahead(&self) -> usize {
        super::READ_AHEAD / 2
    }
    async fn read_end(&self, path: &str, len: usize) -> StoreResult<(u64, Vec<u8>)> {
        self.read_span(path, &|size| size.saturating_sub(len as u64), len)
            .await
    }

    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        segments(path)?;
        self.inner.settle(|p| p == path).await;
        self.inner.failures.borrow_mut().remove(path); // what it lost is replaced whole
        self.spend(bytes.len())?;
        let tx = self.inner.tx(IdbTransactionMode::Readwrite, path).await?;
        let rec = get_rec(&tx.meta, path).await?;
        let id = match rec {
            Some(r) => {
                tx.seg
                    .delete(&segs_from(r.id, 0)?)
                    .map_err(|e| js_error(path, &e))?;
                r.id
            }
            None => new_id(&tx.meta, path).await?,
        };
        self.inner.put_segments(&tx.seg, path, id, 0, bytes)?;
        let modified = now_millis().max(rec.map_or(0, |r| r.modified));
        put_rec(&tx.meta, path, id, bytes.len() as u64, modified)?;
        tx.done().await
    }

    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        segments(path)?;
        let inner = &self.inner;
        if let Some((e, _)) = inner.failures.borrow_mut().remove(path) {
            return Err(e);
        }
        if bytes.is_empty() {
            // Nothing to buffer; the blob must exist afterwards all the same.
            return match self.stat(path).await? {
                Some(m) => Ok(m.size),
                None => self.write(path, b"").await.map(|()| 0),
            };
        }
        if !inner.tails.borrow().contains_key(path) {
            let size = inner.committed(path).await?.map_or(0, |r| r.size);
            inner
                .tails
                .borrow_mut()
                .entry(path.to_string())
                .or_insert(Tail {
                    base: size,
                    buf: Vec::new(),
                    scheduled: false,
                    partial: None,
                });
        }
        self.spend(bytes.len())?;
        let (size, full, schedule) = {
            let mut tails = inner.tails.borrow_mut();
            let t = tails.get_mut(path).expect("inserted above");
            t.buf.extend_from_slice(bytes);
            let full = t.buf.len() >= FLUSH_AT;
            let schedule = !full && !t.scheduled;
            t.scheduled |= schedule;
            (t.base + t.buf.len() as u64, full, schedule)
        };
        if full {
            inner.flush_path(path).await?;
        } else if schedule {
            let inner = self.inner.clone();
            let path = path.to_string();
            spawn_local(async move {
                sleep(FLUSH_DELAY_MS).await;
                if let Some(t) = inner.tails.borrow_mut().get_mut(&path) {
                    t.scheduled = false;
                }
                if let Err(e) = inner.flush_path(&path).await {
                    inner.failures.borrow_mut().insert(path, (e, false));
                }
            });
        }
        Ok(size)
    }

    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        segments(path)?;
        self.inner.settle(|p| p == path).await;
        self.inner.failures.borrow_mut().remove(path); // its size is asked afresh after
        let tx = self.inner.tx(IdbTransactionMode::Readwrite, path).await?;
        let Some(rec) = get_rec(&tx.meta, path).await? else {
            tx.abort();
            return Err(StoreError::NotFound(path.to_string()));
        };
        let len = len.min(rec.size);
        let keep = len.div_ceil(SEGMENT);
        tx.seg
            .delete(&segs_from(rec.id, keep)?)
            .map_err(|e| js_error(path, &e))?;
        if len % SEGMENT != 0 {
            // The new last segment, cut, as one record.
            let index = len / SEGMENT;
            // (Read after the delete above, which left this segment's records.)
            let read = &self.inner.read_bytes;
            let cut = read_segments(read, &tx, path, rec.id, rec.size, index * SEGMENT, len)
                .map_err(|e| js_error(path, &e))?
                .await?;
            tx.seg
                .delete(&pieces_of(rec.id, index)?)
                .map_err(|e| js_error(path, &e))?;
            let k = key(rec.id, index as f64);
            self.inner.put(&tx.seg, path, &cut, &k)?;
        }
        put_rec(&tx.meta, path, rec.id, len, now_millis().max(rec.modified))?;
        tx.done().await
    }

    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        segments(from)?;
        segments(to)?;
        self.inner.settle(|p| p == from || p == to).await;
        // Appends to `from` that failed to commit: the blob does not hold what its writer
        // appended, so it is not moved under a name that says it does (a chunk's close).
        if let Some((e, _)) = self.inner.failures.borrow_mut().remove(from) {
            return Err(e);
        }
        self.inner.failures.borrow_mut().remove(to); // replaced by `from`
        let tx = self.inner.tx(IdbTransactionMode::Readwrite, from).await?;
        let old = request(from, tx.meta.get(&from.into()));
        let dest = request(to, tx.meta.get(&to.into()));
        let (Some(rec), dest) = (rec_of(&old.await?), rec_of(&dest.await?)) else {
            tx.abort();
            return Err(StoreError::NotFound(from.to_string()));
        };
        if from == to {
            return tx.done().await;
        }
        if let Some(d) = dest {
            tx.seg
                .delete(&segs_from(d.id, 0)?)
                .map_err(|e| js_error(to, &e))?;
        }
        put_rec(&tx.meta, to, rec.id, rec.size, rec.modified)?;
        tx.meta
            .delete(&from.into())
            .map_err(|e| js_error(from, &e))?;
        tx.done().await
    }

    async fn remove(&self, path: &str) -> StoreResult<()> {
        segments(path)?;
        self.inner.settle(at_or_below(path)).await;
        let tx = self.inner.tx(IdbTransactionMode::Readwrite, path).await?;
        let range = below(path)?;
        let own = request(path, tx.meta.get(&path.into()));
        let under = request(path, tx.meta.get_all_with_key(&range));
        let own = rec_of(&own.await?);
        let under: Array = under.await?.into();
        for rec in own
            .into_iter()
            .chain(under.iter().filter_map(|v| rec_of(&v)))
        {
            tx.seg
                .delete(&segs_from(rec.id, 0)?)
                .map_err(|e| js_error(path, &e))?;
        }
        tx.meta
            .delete(&path.into())
            .map_err(|e| js_error(path, &e))?;
        tx.meta.delete(&range).map_err(|e| js_error(path, &e))?;
        tx.done().await?;
        let below = at_or_below(path);
        self.inner.failures.borrow_mut().retain(|k, _| !below(k));
        Ok(())
    }

    /// The writer role for folder `key` is given up: the next writer reads the disk again,
    /// so the failures of its blobs are no longer anyone's to report.
    async fn hand_over(&self, key: &str) {
        let below = at_or_below(key);
        self.inner.failures.borrow_mut().retain(|k, _| !below(k));
    }

    async fn flush(&self) -> StoreResult<()> {
        // Forgets every blob's size: the writer role may go to another tab after a flush.
        self.inner.settle(|_| true).await;
        // Reported once here, and kept for each blob's next append or rename: a chunk whose
        // appends failed must not be closed under a name that says it holds them.
        let mut failures = self.inner.failures.borrow_mut();
        let mut first = None;
        for (e, reported) in failures.values_mut() {
            if !std::mem::replace(reported, true) {
                first.get_or_insert_with(|| e.clone());
            }
        }
        first.map_or(Ok(()), Err)
    }
}
