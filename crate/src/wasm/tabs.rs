//! The other tabs of this origin, told what this worker's search index writers grew, and
//! telling it what theirs grew, through a `BroadcastChannel` (one per store and server): a
//! search then finds what another tab just cached, where it would wait up to
//! [`RECHECK_MS`](crate::search::reader::RECHECK_MS) for its next look at every session.

use super::client::BrowserEngine;
use crate::store::BrowserStore;
use serde::{Deserialize, Serialize};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{BroadcastChannel, MessageEvent};

/// The largest integer a JS number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// What a worker posts when one of its writers grew a session's search index blob.
#[derive(Debug, Serialize, Deserialize)]
struct Notice {
    /// Who posted it (a worker hears its own notices: they are left alone).
    from: String,
    /// The session's folder name.
    key: String,
    /// The blob's size after the write (bytes).
    size: f64,
}

/// This worker on its store and server's channel: listening while it lives.
pub(super) struct Tabs {
    channel: BroadcastChannel,
    _listen: Closure<dyn FnMut(MessageEvent)>,
}

impl Tabs {
    /// Joins the channel of `engine`'s store and server: its writers' notices are posted
    /// there, and the notices of the other workers tell its searches. `None` for a memory
    /// store, and where the browser has no `BroadcastChannel` (each search then looks at every
    /// session at most every `RECHECK_MS`, as before).
    pub(super) fn join(engine: &Rc<BrowserEngine>) -> Option<Tabs> {
        let cache = engine.cache();
        if let BrowserStore::Memory(_) = **cache.store() {
            return None; // this worker's alone: no other one writes to it
        }
        let name = format!("scrollback:search:{}:{}", cache.store().name(), cache.dir());
        let channel = BroadcastChannel::new(&name).ok()?;
        let me = format!("{}", js_sys::Math::random());
        // Posted on a channel object of its own (the notifier holds no JS value, so that the
        // core's `Live` stays `Send`), which this worker's own channel hears too: `from` says
        // it is its own.
        let (from, out) = (me.clone(), name);
        cache.on_search_written(Arc::new(move |key, size| {
            let notice = Notice {
                from: from.clone(),
                key: key.to_string(),
                size: size as f64,
            };
            if let (Ok(channel), Ok(data)) = (
                BroadcastChannel::new(&out),
                serde_wasm_bindgen::to_value(&notice),
            ) {
                let _ = channel.post_message(&data);
                channel.close();
            }
        }));
        let engine: Weak<BrowserEngine> = Rc::downgrade(engine);
        let listen = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let Ok(notice) = serde_wasm_bindgen::from_value::<Notice>(event.data()) else {
                return; // not a notice of this version: nothing to do
            };
            let size = notice.size;
            if notice.from == me || !(0.0..=MAX_SAFE).contains(&size) {
                return;
            }
            if let Some(engine) = engine.upgrade() {
                engine.cache().search_told(&notice.key, size as u64);
            }
        });
        channel.set_onmessage(Some(listen.as_ref().unchecked_ref()));
        Some(Tabs {
            channel,
            _listen: listen,
        })
    }
}

impl Drop for Tabs {
    fn drop(&mut self) {
        self.channel.set_onmessage(None);
        self.channel.close();
    }
}
