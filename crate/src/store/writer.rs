//! One writer per session across tabs and workers, over Web Locks.
//!
//! Every tab (or its worker) that opens a session asks for the session's writer lock; the one
//! holding it appends to the cache, the others only read. The lock is the browser's: when the
//! holder's page or worker goes away (tab closed, worker terminated) the browser releases it and
//! the next tab waiting for it gets it. A holder that gives the role up (drops the
//! [`WriterLock`]) should call [`Store::flush`](super::Store::flush) on its store first, so the
//! next writer continues from everything written.

use super::browser::lock_manager;
use super::{StoreError, StoreResult, WriterRole};
use js_sys::{Function, Promise, Reflect};
use std::collections::HashSet;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::LockOptions;

/// The writer role for one session key, held until dropped.
#[derive(Debug)]
pub struct WriterLock {
    name: String,
    release: Function,
    /// Settles once the browser has released the lock.
    released: Promise,
}

impl WriterLock {
    /// The writer role for `key` (for example `"transcripts/v1/<server>/<sessionId>"`) if
    /// nobody holds it now, else `None` at once.
    pub async fn try_acquire(key: &str) -> StoreResult<Option<WriterLock>> {
        request(key, true).await
    }

    /// The writer role for `key`, waiting (possibly forever) until its holder gives it up or
    /// goes away.
    pub async fn acquire(key: &str) -> StoreResult<WriterLock> {
        request(key, false)
            .await?
            .ok_or_else(|| StoreError::Io(format!("writer lock for {key} was not granted")))
    }

    /// Gives the role up and waits until the browser has released the lock (dropping the
    /// lock releases it too, a moment later).
    pub async fn release(self) {
        let released = self.released.clone();
        drop(self);
        let _ = JsFuture::from(released).await;
    }

    /// The Web Locks name this holds (`scrollback-writer:<key>`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The writer role of [`Store::writer`](super::Store::writer) over Web Locks. Where Web Locks
/// are missing the role is granted at once (one tab is the common case; the cache is never
/// load-bearing).
pub(super) async fn web_writer(key: &str, wait: bool) -> Option<WriterRole> {
    let got = match wait {
        true => WriterLock::acquire(key).await.map(Some),
        false => WriterLock::try_acquire(key).await,
    };
    match got {
        Ok(Some(lock)) => Some(WriterRole::holding(lock)),
        Ok(None) => None,
        Err(e) => {
            log::info!("scrollback: no writer lock ({e}); writing without one");
            Some(WriterRole::unshared())
        }
    }
}

/// [`Store::writers_held`](super::Store::writers_held) over Web Locks: the names below `dir`
/// whose writer lock any tab holds or asks for now (one query, however many sessions); `None`
/// where Web Locks cannot say (missing, or the query failed: a writer may then be writing
/// without a lock).
pub(super) async fn web_writers_held(dir: &str) -> Option<HashSet<String>> {
    let locks = lock_manager()?;
    let query = super::browser::method(&locks, "query")?
        .call0(&locks)
        .ok()?;
    let snapshot = JsFuture::from(Promise::from(query)).await.ok()?;
    let prefix = format!("scrollback-writer:{dir}/");
    let mut out = HashSet::new();
    for list in ["held", "pending"] {
        let locks: js_sys::Array = Reflect::get(&snapshot, &list.into())
            .ok()?
            .dyn_into()
            .ok()?;
        for lock in locks.iter() {
            let name = Reflect::get(&lock, &"name".into()).ok()?.as_string()?;
            match name.strip_prefix(&prefix) {
                Some(key) if !key.contains('/') => _ = out.insert(key.to_string()),
                _ => {}
            }
        }
    }
    Some(out)
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        let _ = self.release.call0(&JsValue::NULL);
    }
}

/// A lock request still waiting for its answer. Dropped before the answer (the session was
/// closed, or its reader gave up waiting for the role), it takes the request out of the
/// browser's queue, and gives back at once a lock granted anyway: a request nobody waits for
/// must never hold the role, or no tab would write the session again until this worker ends.
struct Asking {
    abort: web_sys::AbortController,
    release: Option<Function>,
}

impl Drop for Asking {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            self.abort.abort();
            let _ = release.call0(&JsValue::NULL);
        }
    }
}

async fn request(key: &str, if_available: bool) -> StoreResult<Option<WriterLock>> {
    let locks =
        lock_manager().ok_or_else(|| StoreError::Io("Web Locks are not available here".into()))?;
    let name = format!("scrollback-writer:{key}");
    // `held` settles when the lock is to be released; the browser keeps the lock until then.
    let mut release = None;
    let held = Promise::new(&mut |resolve, _| release = Some(resolve));
    let mut answer = None;
    let granted = Promise::new(&mut |resolve, _| answer = Some(resolve));
    let answer = answer.expect("set");
    let abort = web_sys::AbortController::new().map_err(|e| super::browser::js_error(&name, &e))?;
    let mut asking = Asking { abort, release };
    let tell = answer.clone();
    // Owned here, not given to JS for good (`once_into_js` frees a closure only when it is
    // called, and a request given up, or granted while another was asked, never calls it): it
    // goes with this call, once the browser has called it or will not. (Called after anyway, it
    // throws, and the browser gives the lock back: no one waits for it.)
    let callback = Closure::once(move |lock: JsValue| -> JsValue {
        let got = !lock.is_null() && !lock.is_undefined();
        let _ = tell.call1(&JsValue::NULL, &got.into());
        if got {
            held.into()
        } else {
            JsValue::UNDEFINED
        }
    });
    let opts = LockOptions::new();
    opts.set_if_available(if_available);
    if !if_available {
        opts.set_signal(&asking.abort.signal());
    }
    let finished = locks.request_with_options(&name, &opts, callback.as_ref().unchecked_ref());
    // A request that fails outright never calls back: answer "not granted" (a JS function bound
    // to its answer, nothing of the module's, so it goes with the promise).
    let refused = answer.bind1(&JsValue::NULL, &JsValue::FALSE);
    if let Some(catch) = super::browser::method(&finished, "catch") {
        let _ = catch.call1(&finished, &refused);
    }
    let got = JsFuture::from(granted)
        .await
        .map_err(|e| super::browser::js_error(&name, &e))?;
    let release = asking.release.take().expect("taken once");
    if got.as_bool() == Some(true) {
        Ok(Some(WriterLock {
            name,
            release,
            released: finished,
        }))
    } else {
        let _ = release.call0(&JsValue::NULL);
        Ok(None)
    }
}
