//! `SessionHandle`: one open session, kept live in the worker until closed.

use super::error::{anchor, BindingError};
use crate::engine::{Change, Session, View};
use crate::fold::Row;
use crate::protocol::SessionSummary;
use crate::store::BrowserStore;
use crate::transport::BrowserTransport;
use futures::channel::oneshot;
use futures::future::{select, Either};
use serde::Serialize;
use serde_json::{Map, Value};
use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::pin::pin;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{future_to_promise, spawn_local};

/// The sessions of the worker's engine.
type BrowserSession = Session<BrowserStore, BrowserTransport>;

/// A running session and the reloads waiting for their purge.
pub(super) struct Live {
    pub(super) session: BrowserSession,
    reloads: RefCell<Vec<oneshot::Sender<()>>>,
    /// The screen was cleared since the last patch: the next one is a reset, since rows of
    /// another file (a replaced transcript) may come back under the same seqs and revisions.
    cleared: Cell<bool>,
    /// Its run loop has ended.
    ended: Cell<bool>,
    /// Older pages still on their way from the server, told when the view closes (no one
    /// waits for them then: a page worker's close must not wait for the network).
    closing: RefCell<Vec<oneshot::Sender<()>>>,
}

/// The cache hits of sessions, open and closed, for `counters()`; and the sessions' run loops
/// still going (a closed session's loop ends once it has given up its writer role), for a
/// close that waits for them.
#[derive(Default)]
pub(super) struct Tally {
    closed: Cell<(u64, u64, u64)>,
    open: RefCell<Vec<Rc<Live>>>,
    running: Cell<usize>,
    idle: RefCell<Vec<oneshot::Sender<()>>>,
    /// Sessions closed whose run loop still goes (giving up its writer role), and who waits
    /// for one to end.
    closing: RefCell<Vec<Rc<Live>>>,
    ended: RefCell<Vec<oneshot::Sender<()>>>,
}

impl Tally {
    /// Resolves once no session's run loop is going.
    pub(super) async fn settled(&self) {
        if self.running.get() == 0 {
            return;
        }
        let (done, ended) = oneshot::channel();
        self.idle.borrow_mut().push(done);
        let _ = ended.await;
    }

    /// Resolves once no session closed in this worker still runs (of `id` only, when given): a
    /// session opened again right after its view closed waits the moment its writer role takes
    /// to be given up, rather than open as a reader and take the role over with a second check;
    /// a search warm-up waits for every such role, rather than skip the sessions that hold one.
    pub(super) async fn closed_runs_ended(&self, id: Option<&str>) {
        while (self.closing.borrow().iter()).any(|l| id.is_none_or(|id| l.session.id() == id)) {
            let (done, ended) = oneshot::channel();
            self.ended.borrow_mut().push(done);
            let _ = ended.await;
        }
    }

    fn run_ended(&self, live: &Rc<Live>) {
        live.ended.set(true);
        self.closing.borrow_mut().retain(|l| !Rc::ptr_eq(l, live));
        for done in self.ended.borrow_mut().drain(..) {
            let _ = done.send(());
        }
        self.running.set(self.running.get() - 1);
        if self.running.get() == 0 {
            for done in self.idle.borrow_mut().drain(..) {
                let _ = done.send(());
            }
        }
    }

    /// Resolves once no session of this worker, open or closing, has a write to its cache
    /// under way ([`Session::stored`]): a page `loadOlder` answered is searchable after it.
    pub(super) async fn stored(&self) {
        let lives: Vec<Rc<Live>> = (self.open.borrow().iter())
            .chain(self.closing.borrow().iter())
            .cloned()
            .collect();
        for live in lives {
            live.session.stored().await;
        }
    }

    /// How many sessions are open (not closed yet).
    pub(super) fn open_count(&self) -> usize {
        self.open.borrow().len()
    }

    pub(super) fn opened(&self, session: Rc<Live>) {
        self.open.borrow_mut().push(session);
    }

    /// Moves a closed session's counts into the closed total.
    pub(super) fn closed(&self, session: &Rc<Live>) {
        let mut open = self.open.borrow_mut();
        let Some(i) = open.iter().position(|s| Rc::ptr_eq(s, session)) else {
            return;
        };
        let c = open.swap_remove(i).session.counters();
        let (pages, passed, failed) = self.closed.get();
        self.closed.set((
            pages + c.local_pages,
            passed + c.probes_passed,
            failed + c.probes_failed,
        ));
    }

    /// Each open session stopped for its token opens again ([`Session::resume`]).
    pub(super) fn resume(&self) {
        for live in self.open.borrow().iter() {
            live.session.resume();
        }
    }

    /// Each open session, given a fresh list: the summary it has there becomes its own.
    pub(super) fn take_summaries(&self, list: &[SessionSummary]) {
        for live in self.open.borrow().iter() {
            if let Some(summary) = list.iter().find(|s| s.id == live.session.id()) {
                live.session.take_summary(summary);
            }
        }
    }

    pub(super) fn sum(&self) -> (u64, u64, u64) {
        self.open
            .borrow()
            .iter()
            .map(|s| s.session.counters())
            .fold(self.closed.get(), |(p, a, f), c| {
                (p + c.local_pages, a + c.probes_passed, f + c.probes_failed)
            })
    }
}

/// One open session. Its `run` is driven by the worker's event loop from `start` until
/// `close`; the page learns of changes through the `on_change` callback and takes them with
/// `changesJson`.
#[wasm_bindgen]
pub struct SessionHandle {
    live: Rc<Live>,
    tally: Rc<Tally>,
    closed: Cell<bool>,
    sent: RefCell<Sent>,
}

/// What the page holds of a view: each row's seq and revision, and every other field as last
/// sent. `changesJson` sends what differs from it, so a streamed delta costs the bytes of the
/// row it grew, never of the rows loaded.
#[derive(Default)]
struct Sent {
    /// Whether anything was sent yet (the first patch is a reset).
    any: bool,
    /// `(seq, revision)` of each row, oldest first.
    rows: Vec<(u64, u64)>,
    /// The other fields, as JSON.
    fields: Map<String, Value>,
}

/// A number that changes whenever a row's content does: rows only grow (an assistant
/// message's last seq), get a result (a tool call) or take a later state (a command, hashed:
/// commands are few and small). Other rows never change once made.
fn revision(row: &Row) -> u64 {
    match row {
        Row::Assistant { last_seq, .. } => *last_seq,
        Row::Tool { result, .. } => result.as_ref().map_or(0, |r| r.seq),
        Row::Command {
            command,
            done,
            output,
            ..
        } => {
            let mut h = DefaultHasher::new();
            (command, done, output).hash(&mut h);
            h.finish()
        }
        _ => 0,
    }
}

/// The patch that takes the page from `sent` to `view` (and records it as sent): `null` when
/// nothing changed, else `{reset?, removed?, rows?, state?}` where `reset` means the rows are
/// `rows` alone, `removed` lists the seqs of rows gone, `rows` the rows added or changed
/// (oldest first, each replacing the row at its seq), and `state` the other fields that changed.
#[derive(Serialize)]
struct Patch<'a> {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    reset: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    removed: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rows: Vec<&'a Row>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    state: Map<String, Value>,
}

fn patch<'a>(sent: &mut Sent, view: &'a View) -> Option<Patch<'a>> {
    let now = view.transcript.rows();
    let mut out = Patch {
        reset: !sent.any,
        removed: Vec::new(),
        rows: Vec::new(),
        state: Map::new(),
    };
    // Both lists are in seq order: one merge walk finds rows added, changed and gone.
    let mut revs = Vec::with_capacity(now.len());
    let mut old = sent.rows.iter().peekable();
    let mut kept = 0usize;
    for row in now {
        let (seq, rev) = (row.seq(), revision(row));
        while let Some(&&(s, _)) = old.peek() {
            if s >= seq {
                break;
            }
            out.removed.push(s);
            old.next();
        }
        match old.peek() {
            Some(&&(s, r)) if s == seq => {
                old.next();
                kept += 1;
                if r != rev {
                    out.rows.push(row);
                }
            }
            _ => out.rows.push(row),
        }
        revs.push((seq, rev));
    }
    out.removed.extend(old.map(|&(s, _)| s));
    if sent.any && kept == 0 && !sent.rows.is_empty() {
        // Nothing kept: say so rather than list every seq gone.
        out.reset = true;
    }
    if out.reset {
        out.removed.clear();
        out.rows = now.iter().collect();
    }
    sent.rows = revs;
    if let Ok(Value::Object(fields)) = serde_json::to_value(view.fields()) {
        for (k, v) in fields {
            if out.reset || sent.fields.get(&k) != Some(&v) {
                out.state.insert(k.clone(), v.clone());
                sent.fields.insert(k, v);
            }
        }
    }
    let empty = !out.reset && out.removed.is_empty() && out.rows.is_empty() && out.state.is_empty();
    sent.any = true;
    (!empty).then_some(out)
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
            cleared: Cell::new(false),
            ended: Cell::new(false),
            closing: RefCell::new(Vec::new()),
        });
        // The listener must not call into the session: the callback only schedules a read.
        let weak = Rc::downgrade(&live);
        live.session.on_change(move |_, change| {
            if matches!(change, Change::Cleared) {
                if let Some(live) = weak.upgrade() {
                    live.cleared.set(true);
                    for done in live.reloads.borrow_mut().drain(..) {
                        let _ = done.send(());
                    }
                }
            }
            let _ = on_change.call0(&JsValue::NULL);
        });
        tally.opened(live.clone());
        tally.running.set(tally.running.get() + 1);
        let (running, ended) = (live.clone(), tally.clone());
        spawn_local(async move {
            running.session.run().await;
            ended.run_ended(&running);
        });
        SessionHandle {
            live,
            tally,
            closed: Cell::new(false),
            sent: RefCell::new(Sent::default()),
        }
    }
}

#[wasm_bindgen]
impl SessionHandle {
    /// The whole state as JSON, as the first patch carries it: for checks that the patches
    /// add up to it (the page applies patches; see `changesJson`).
    #[wasm_bindgen(js_name = stateJson)]
    pub fn state_json(&self) -> String {
        self.live.session.with_view(|view| {
            serde_json::to_string(view).unwrap_or_else(|e| {
                log::error!("scrollback: cannot serialize a session's state: {e}");
                String::from("null")
            })
        })
    }

    /// What changed since the last call, as a JSON patch (see `Patch`: `{reset?, removed?,
    /// rows?, state?}`), or `undefined` when nothing did. The first call's patch is a reset
    /// carrying the whole state: `{rows, status, model, permissionMode, banner, moreHistory,
    /// ready, contextTokens, queued, waitingCommands, ...}`.
    #[wasm_bindgen(js_name = changesJson)]
    pub fn changes_json(&self) -> Option<String> {
        let mut sent = self.sent.borrow_mut();
        if self.live.cleared.take() {
            sent.any = false; // a reset, whatever the seqs say
        }
        self.live.session.with_view(|view| {
            let patch = patch(&mut sent, view)?;
            serde_json::to_string(&patch)
                .map_err(|e| log::error!("scrollback: cannot serialize a session's changes: {e}"))
                .ok()
        })
    }

    /// Shows one older page (from the cache when it has it, or from the pages read ahead after
    /// the last call). Resolves to whether more history remains above, as soon as the page is
    /// shown: a page from the server is stored after that, while the app handles this one.
    #[wasm_bindgen(js_name = loadOlder)]
    pub fn load_older(&self) -> js_sys::Promise {
        let live = self.live.clone();
        let (answer, answered) = oneshot::channel();
        let closed_now = self.closed.get();
        spawn_local(async move {
            if closed_now {
                let _ = answer.send(Err(BindingError::Closed));
                return;
            }
            let answer = Cell::new(Some(answer));
            let more = || live.session.with_view(|v| v.more_history);
            let send = |result: Result<bool, BindingError>| {
                if let Some(answer) = answer.take() {
                    let _ = answer.send(result);
                }
            };
            let (stop, closed) = oneshot::channel();
            let mut closing = live.closing.borrow_mut();
            closing.retain(|s| !s.is_canceled());
            closing.push(stop);
            drop(closing);
            let shown = Cell::new(false);
            let result = {
                let older = pin!(live.session.older_then(|| {
                    shown.set(true);
                    send(Ok(more()))
                }));
                match select(older, closed).await {
                    Either::Left((result, _)) => result.map_err(BindingError::from),
                    // Closed with the page shown: it is stored, which takes a moment.
                    Either::Right((_, older)) if shown.get() => {
                        older.await.map_err(BindingError::from)
                    }
                    // Closed while the page was on its way: no one waits for it now.
                    Either::Right(_) => return send(Err(BindingError::Closed)),
                }
            };
            send(result.map(|_| more()));
            if more() {
                // The pages read ahead topped up, from the cache, while the page handles this one
                // (a task of its own, queued after the answer's).
                spawn_local(async move { live.session.read_ahead().await });
            }
        });
        future_to_promise(async move {
            // The task always answers before it ends, and a spawned task runs to its end.
            let more = answered.await.unwrap_or(Ok(false))?;
            Ok(more.into())
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
    pub fn reload(&self, at: JsValue) -> js_sys::Promise {
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
        // A reload still waiting will not happen now; an older page on its way is not waited for.
        self.live.reloads.borrow_mut().clear();
        for stop in self.live.closing.take() {
            let _ = stop.send(());
        }
        self.tally.closed(&self.live);
        if !self.live.ended.get() {
            self.tally.closing.borrow_mut().push(self.live.clone());
        }
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        self.close();
    }
}
