//! `SessionHandle`: one open session, kept live in the worker until closed.

use super::client::Tally;
use super::error::{anchor, BindingError};
use crate::engine::{Change, Session};
use crate::store::BrowserStore;
use crate::transport::BrowserTransport;
use futures::channel::oneshot;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{future_to_promise, spawn_local};

/// The sessions of the worker's engine.
type BrowserSession = Session<BrowserStore, BrowserTransport>;

/// A running session and the reloads waiting for their purge.
pub(super) struct Live {
    pub(super) session: BrowserSession,
    reloads: RefCell<Vec<oneshot::Sender<()>>>,
}

/// One open session. Its `run` is driven by the worker's event loop from `start` until
/// `close`; the page learns of changes through the `on_change` callback and reads the state
/// with `stateJson`.
#[wasm_bindgen]
pub struct SessionHandle {
    live: Rc<Live>,
    tally: Rc<Tally>,
    closed: Cell<bool>,
}

impl SessionHandle {
    pub(super) fn start(
        session: BrowserSession,
        on_change: js_sys::Function,
        tally: Rc<Tally>,
    ) -> SessionHandle {
        let live = Rc::new(Live {
            session,
            reloads: RefCell::new(Vec::new()),
        });
        // The listener must not call into the session: the callback only schedules a read.
        let weak = Rc::downgrade(&live);
        live.session.on_change(move |_, change| {
            if matches!(change, Change::Cleared) {
                if let Some(live) = weak.upgrade() {
                    for done in live.reloads.borrow_mut().drain(..) {
                        let _ = done.send(());
                    }
                }
            }
            let _ = on_change.call0(&JsValue::NULL);
        });
        tally.opened(live.clone());
        let running = live.clone();
        spawn_local(async move { running.session.run().await });
        SessionHandle {
            live,
            tally,
            closed: Cell::new(false),
        }
    }
}

#[wasm_bindgen]
impl SessionHandle {
    /// The state as JSON: `{rows, status, model, permissionMode, banner, moreHistory, ready,
    /// contextTokens, queued, waitingCommands, ...}`.
    #[wasm_bindgen(js_name = stateJson)]
    pub fn state_json(&self) -> String {
        self.live.session.with_view(|view| {
            serde_json::to_string(view).unwrap_or_else(|e| {
                log::error!("scrollback: cannot serialize a session's state: {e}");
                String::from("null")
            })
        })
    }

    /// Shows one older page (from the cache when it has it). Resolves to whether more history
    /// remains above.
    #[wasm_bindgen(js_name = loadOlder)]
    pub fn load_older(&self) -> js_sys::Promise {
        let live = self.live.clone();
        future_to_promise(async move {
            live.session.older().await.map_err(BindingError::from)?;
            Ok(live.session.with_view(|v| v.more_history).into())
        })
    }

    /// Bytes this session holds in the cache.
    #[wasm_bindgen(js_name = cachedSize)]
    pub fn cached_size(&self) -> js_sys::Promise {
        let live = self.live.clone();
        future_to_promise(async move { Ok((live.session.cached_size().await as f64).into()) })
    }

    /// Purges the session's cache and reopens it cold, restoring the reader at `at` (a seq).
    /// Resolves once the cache is purged and what was shown cleared; the reopen follows as
    /// state changes.
    pub fn reload(&self, at: Option<f64>) -> js_sys::Promise {
        let live = self.live.clone();
        let closed = self.closed.get();
        future_to_promise(async move {
            let at = anchor(at)?;
            if closed {
                return Ok(JsValue::UNDEFINED);
            }
            let (done, purged) = oneshot::channel();
            live.reloads.borrow_mut().push(done);
            live.session.reload(at);
            let _ = purged.await;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Closes the stream and stops the session. Idempotent.
    pub fn close(&self) {
        if self.closed.replace(true) {
            return;
        }
        self.live.session.close();
        // A reload still waiting will not happen now.
        self.live.reloads.borrow_mut().clear();
        self.tally.closed(&self.live);
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        self.close();
    }
}
