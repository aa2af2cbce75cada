//! Benchmark hooks on `Client` (`npm run bench:search`): not part of the API, left out of the
//! types. They reach the cache directly, as the live stream and the budget do.

use super::client::Client;
use super::error::to_js;
use crate::protocol::Line;
use crate::search::segment::SEGMENT;
use crate::search::INDEX;
use crate::store::{BrowserStore, Store};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

/// What `benchSizes` answers: bytes over every cached session of the server.
#[derive(Serialize)]
struct Sizes {
    cached: u64,
    index: u64,
    sessions: usize,
    /// The sessions with a search segment.
    segments: usize,
    /// The server's search pack's bytes (0: none).
    pack: u64,
}

#[wasm_bindgen]
impl Client {
    /// Appends `jsonl` (lines in seq order) to session `id`'s cache as the live stream does,
    /// `batch` lines per append (1: one append per line, as streamed events arrive), with the
    /// search index or without it. Resolves to the milliseconds the appends took (the parse
    /// left out).
    #[doc(hidden)]
    #[wasm_bindgen(js_name = benchAppend)]
    pub fn bench_append(
        &self,
        id: String,
        jsonl: String,
        batch: u32,
        indexing: bool,
    ) -> js_sys::Promise {
        let engine = self.engine();
        future_to_promise(async move {
            let lines: Vec<Line> = jsonl
                .lines()
                .filter(|l| !l.is_empty())
                .map(Line::parse)
                .collect::<Result<_, _>>()
                .map_err(|e| JsValue::from_str(&e.to_string()))?;
            let mut session = engine
                .cache()
                .session(&id)
                .map_err(|e| JsValue::from_str(&e.to_string()))?;
            session.set_indexing(indexing);
            session.open().await;
            let start = js_sys::Date::now();
            for run in lines.chunks(batch.max(1) as usize) {
                session.append_all(run).await;
            }
            // IndexedDB's appends are stored once their buffered tails commit (a few
            // milliseconds later, or at 256 kB): timed until then, so that the bytes a part
            // leaves buffered are not committed in the next part's time. OPFS's are written
            // when the call returns (its `flush` would add a sync to disk that no stream makes).
            if let BrowserStore::IndexedDb(store) = &**engine.cache().store() {
                let _ = store.flush().await;
            }
            Ok(JsValue::from_f64(js_sys::Date::now() - start))
        })
    }

    /// The bytes cached for this server, the search indexes' share of them (blobs and
    /// segments), and how many sessions have a segment.
    #[doc(hidden)]
    #[wasm_bindgen(js_name = benchSizes)]
    pub fn bench_sizes(&self) -> js_sys::Promise {
        let engine = self.engine();
        future_to_promise(async move {
            let cache = engine.cache();
            let sessions = cache.sessions().await;
            let (mut index, mut segments) = (0, 0);
            for s in &sessions {
                for name in [INDEX, SEGMENT] {
                    let path = format!("{}/{}/{name}", cache.dir(), s.key);
                    let size = cache.store().stat(&path).await.ok().flatten();
                    index += size.as_ref().map_or(0, |m| m.size);
                    segments += usize::from(name == SEGMENT && size.is_some());
                }
            }
            // The server's search pack, beside the sessions' folders.
            let pack = cache.search_pack_size().await;
            let sizes = Sizes {
                cached: sessions.iter().map(|s| s.size).sum::<u64>() + pack,
                index: index + pack,
                sessions: sessions.len(),
                segments,
                pack,
            };
            Ok(to_js(&sizes)?)
        })
    }
}
