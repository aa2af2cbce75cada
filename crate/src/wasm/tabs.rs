//! The other tabs of this origin, told what this worker's search index writers grew, and
//! telling it what theirs grew, through a `BroadcastChannel` (one per store and server): a
//! search then finds what another tab just cached, where it would wait up to
//! [`RECHECK_MS`](crate::search::reader::RECHECK_MS) for its next look at every session.

use super::client::BrowserEngine;
use crate::store::BrowserStore;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex, PoisonError};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{BroadcastChannel, MessageEvent};

/// The largest integer a JS number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// How long a worker gathers what its writers grew before it posts it, in milliseconds: one
/// message for every blob grown meanwhile, however fast lines are appended (a message a row
/// took three quarters of the indexed append rate in the search bench).
const GATHER_MS: u32 = 50;

/// What a worker posts when its writers grew sessions' search index blobs.
#[derive(Debug, Serialize, Deserialize)]
struct Notice {
    /// Who posted it (a worker hears its own notices: they are left alone).
    from: String,
    /// Each session's folder name, with its blob's size after the last write (bytes).
    sizes: Vec<(String, f64)>,
}

/// The blobs grown since the last notice, by session folder name: their sizes.
type Gathered = Arc<Mutex<HashMap<String, u64>>>;

/// This worker on its store and server's channel: listening while it lives.
pub(super) struct Tabs {
    channel: BroadcastChannel,
    _listen: Closure<dyn FnMut(MessageEvent)>,
    poster: Poster,
}

impl Tabs {
    /// Joins the channel of `engine`'s store and server: what its writers grow is posted
    /// there, and the notices of the other workers tell its searches. `None` for a memory
    /// store, with search off, and where the browser has no `BroadcastChannel` (each search
    /// then looks at every session at most every `RECHECK_MS`, as before).
    pub(super) fn join(engine: &Rc<BrowserEngine>) -> Option<Tabs> {
        let cache = engine.cache();
        if let BrowserStore::Memory(_) = **cache.store() {
            return None; // this worker's alone: no other one writes to it
        }
        if !cache.searches() {
            return None; // it writes no index, and searches none
        }
        let name = format!("scrollback:search:{}:{}", cache.store().name(), cache.dir());
        let channel = BroadcastChannel::new(&name).ok()?;
        let me = format!("{}", js_sys::Math::random());
        let poster = Poster {
            name,
            from: me.clone(),
            gathered: Gathered::default(),
        };
        let gathering = poster.clone();
        cache.on_search_written(Arc::new(move |key, size| {
            let mut sizes = gathering
                .gathered
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let first = sizes.is_empty();
            match sizes.get_mut(key) {
                Some(known) => *known = size,
                None => {
                    sizes.insert(key.to_string(), size);
                }
            }
            drop(sizes);
            if first {
                let poster = gathering.clone();
                wasm_bindgen_futures::spawn_local(async move {
                    gloo_timers::future::TimeoutFuture::new(GATHER_MS).await;
                    poster.post();
                });
            }
        }));
        let engine: Weak<BrowserEngine> = Rc::downgrade(engine);
        let listen = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let Ok(notice) = serde_wasm_bindgen::from_value::<Notice>(event.data()) else {
                return; // not a notice of this version: nothing to do
            };
            let Some(engine) = engine.upgrade().filter(|_| notice.from != me) else {
                return;
            };
            for (key, size) in notice.sizes {
                if (0.0..=MAX_SAFE).contains(&size) {
                    engine.cache().search_told(&key, size as u64);
                }
            }
        });
        channel.set_onmessage(Some(listen.as_ref().unchecked_ref()));
        Some(Tabs {
            channel,
            _listen: listen,
            poster,
        })
    }

    /// Posts what was gathered now, not at the end of the gathering: for a worker about to
    /// end (after its last writes committed), whose timer would never fire.
    pub(super) fn flush(&self) {
        self.poster.post();
    }
}

/// What this worker's writers grew and it has not posted yet, and where it posts it.
#[derive(Clone)]
struct Poster {
    /// The channel's name.
    name: String,
    /// This worker, in its notices.
    from: String,
    gathered: Gathered,
}

impl Poster {
    /// Posts what was gathered (nothing when nothing was), from a channel object of its own
    /// (the writers' notifier holds no JS value, so that the core's `Live` stays `Send`),
    /// which this worker's own channel hears too: `from` says it is its own.
    fn post(&self) {
        let sizes =
            std::mem::take(&mut *self.gathered.lock().unwrap_or_else(PoisonError::into_inner));
        if sizes.is_empty() {
            return;
        }
        let sizes = sizes.into_iter().map(|(k, s)| (k, s as f64)).collect();
        let notice = Notice {
            from: self.from.clone(),
            sizes,
        };
        if let (Ok(channel), Ok(data)) = (
            BroadcastChannel::new(&self.name),
            serde_wasm_bindgen::to_value(&notice),
        ) {
            let _ = channel.post_message(&data);
            channel.close();
        }
    }
}

impl Drop for Tabs {
    fn drop(&mut self) {
        self.flush();
        self.channel.set_onmessage(None);
        self.channel.close();
    }
}
