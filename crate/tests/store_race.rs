//! One writer per session across workers: two dedicated workers (as two tabs' workers would)
//! race to append one session's lines through the writer lock, on OPFS and on IndexedDB.
//! Each writer, holding the lock, continues from the last line in the store, as the engine
//! streams from the newest cached seq. Nothing may be lost or doubled: the blob must end up
//! holding lines 1..=N exactly once, in order, also when a worker is terminated while it holds
//! the lock (the tab closed) and the other takes over.
#![cfg(target_arch = "wasm32")]

use js_sys::{Array, Function, Object, Promise, Reflect};
use scrollback::store::{IdbStore, OpfsStore, Store, WriterLock};
use scrollback::testing::unique;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use web_sys::{Blob, BlobPropertyBag, MessageEvent, Url, Worker, WorkerOptions, WorkerType};

wasm_bindgen_test_configure!(run_in_browser);

const BLOB: &str = "v1/h_1/s/1-open.raw.jsonl";

/// The worker: loads this very test module and runs `race_writer` with the message's arguments.
const WORKER_JS: &str = r#"
self.onmessage = async (e) => {
  const { glue, wasm, args } = e.data;
  try {
    const m = await import(glue);
    await m.default({ module_or_path: wasm });
    const n = await m.race_writer(...args, (note) => postMessage({ note }));
    postMessage({ done: n });
  } catch (err) {
    postMessage({ error: String((err && err.stack) || err) });
  }
};
"#;

/// Runs in a worker: takes the writer lock, appends `batch` lines after the store's last one,
/// flushes, lets go, and again, until line `total` is written. With `hold`, it keeps the lock
/// after its first batch and tells the page (which then terminates it). Returns its line count.
#[wasm_bindgen]
pub async fn race_writer(
    backend: String,
    root: String,
    key: String,
    total: u32,
    batch: u32,
    hold: bool,
    notify: Function,
) -> Result<u32, JsValue> {
    let err = |e: scrollback::store::StoreError| JsValue::from_str(&e.to_string());
    let (opfs, idb) = if backend == "opfs" {
        (Some(OpfsStore::open_in(&root).await.map_err(err)?), None)
    } else {
        (None, Some(IdbStore::open_named(&root).await.map_err(err)?))
    };
    let mut mine = 0;
    loop {
        let lock = WriterLock::acquire(&key).await.map_err(err)?;
        let last = match (&opfs, &idb) {
            (Some(s), _) => last_line(s).await,
            (_, Some(s)) => last_line(s).await,
            _ => unreachable!(),
        }
        .map_err(err)?;
        if last >= total {
            return Ok(mine);
        }
        for seq in last + 1..=(last + batch).min(total) {
            let line = format!("{seq:06} {}\n", "x".repeat(40));
            match (&opfs, &idb) {
                (Some(s), _) => s.append(BLOB, line.as_bytes()).await,
                (_, Some(s)) => s.append(BLOB, line.as_bytes()).await,
                _ => unreachable!(),
            }
            .map_err(err)?;
            mine += 1;
        }
        if hold {
            notify.call1(&JsValue::NULL, &"holding".into())?;
            // Keep the lock (and, on OPFS, the file's handle) until terminated.
            JsFuture::from(Promise::new(&mut |_, _| {})).await?;
        }
        match (&opfs, &idb) {
            (Some(s), _) => s.flush().await,
            (_, Some(s)) => s.flush().await,
            _ => unreachable!(),
        }
        .map_err(err)?;
        if let Some(s) = &opfs {
            s.close_handles(); // let the other worker open the file
        }
        drop(lock);
        scrollback::testing::sleep(1).await;
    }
}

/// The seq of the blob's last line (0 when it is empty or missing).
async fn last_line<S: Store>(s: &S) -> Result<u32, scrollback::store::StoreError> {
    let Some(meta) = s.stat(BLOB).await? else {
        return Ok(0);
    };
    let tail = s.read(BLOB, meta.size.saturating_sub(200), 200).await?;
    let text = String::from_utf8_lossy(&tail);
    Ok(text
        .lines()
        .last()
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}

fn spawn() -> Worker {
    let parts = Array::of1(&WORKER_JS.into());
    let bag = BlobPropertyBag::new();
    bag.set_type("text/javascript");
    let blob = Blob::new_with_str_sequence_and_options(&parts, &bag).unwrap();
    let url = Url::create_object_url_with_blob(&blob).unwrap();
    let opts = WorkerOptions::new();
    opts.set_type(WorkerType::Module);
    Worker::new_with_options(&url, &opts).unwrap()
}

/// Starts `race_writer` in `w`; the promise resolves with its line count (and `on_note` hears
/// its notes).
fn run(w: &Worker, args: Array, on_note: impl Fn(String) + 'static) -> Promise {
    let location = Reflect::get(&js_sys::global(), &"location".into()).unwrap();
    let href = Reflect::get(&location, &"href".into())
        .unwrap()
        .as_string()
        .unwrap();
    let resolve_url = |name: &str| Url::new_with_base(name, &href).unwrap().href();
    let msg = Object::new();
    Reflect::set(
        &msg,
        &"glue".into(),
        &resolve_url("wasm-bindgen-test.js").into(),
    )
    .unwrap();
    Reflect::set(
        &msg,
        &"wasm".into(),
        &resolve_url("wasm-bindgen-test_bg.wasm").into(),
    )
    .unwrap();
    Reflect::set(&msg, &"args".into(), &args).unwrap();
    let w2 = w.clone();
    let mut on_note = Some(on_note);
    let promise = Promise::new(&mut |resolve, reject| {
        let on_note = on_note.take().expect("called once");
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
            let data = e.data();
            if let Some(note) = Reflect::get(&data, &"note".into())
                .ok()
                .and_then(|n| n.as_string())
            {
                on_note(note);
            } else if let Some(err) = Reflect::get(&data, &"error".into())
                .ok()
                .filter(|v| !v.is_undefined())
            {
                let _ = reject.call1(&JsValue::NULL, &err);
            } else {
                let _ = resolve.call1(
                    &JsValue::NULL,
                    &Reflect::get(&data, &"done".into()).unwrap(),
                );
            }
        });
        w2.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        on_message.forget();
    });
    w.post_message(&msg).unwrap();
    promise
}

fn args(backend: &str, root: &str, key: &str, total: u32, batch: u32, hold: bool) -> Array {
    [
        JsValue::from(backend),
        root.into(),
        key.into(),
        total.into(),
        batch.into(),
        hold.into(),
    ]
    .into_iter()
    .collect()
}

/// The blob's lines must be 1..=total, once each, in order.
fn assert_exactly_once(bytes: &[u8], total: u32) {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let seqs: Vec<u32> = text.lines().map(|l| l[..6].parse().unwrap()).collect();
    let want: Vec<u32> = (1..=total).collect();
    assert_eq!(seqs.len(), want.len(), "line count");
    assert_eq!(seqs, want);
}

async fn read_all(backend: &str, root: &str) -> Vec<u8> {
    if backend == "opfs" {
        // The page reads OPFS through getFile(): no lock needed.
        let s = OpfsStore::open_in(root).await.unwrap();
        s.read(BLOB, 0, usize::MAX).await.unwrap()
    } else {
        let s = IdbStore::open_named(root).await.unwrap();
        s.read(BLOB, 0, usize::MAX).await.unwrap()
    }
}

async fn race(backend: &str) {
    let root = unique(&format!("test-race-{backend}"));
    let key = unique("h_1/s");
    let total = 1_500;
    let (a, b) = (spawn(), spawn());
    let pa = run(&a, args(backend, &root, &key, total, 20, false), |_| {});
    let pb = run(&b, args(backend, &root, &key, total, 20, false), |_| {});
    let (na, nb) = futures::future::join(JsFuture::from(pa), JsFuture::from(pb)).await;
    let (na, nb) = (
        na.unwrap().as_f64().unwrap() as u32,
        nb.unwrap().as_f64().unwrap() as u32,
    );
    a.terminate();
    b.terminate();
    web_sys::console::log_1(&format!("{backend}: worker a wrote {na} lines, worker b {nb}").into());
    assert_eq!(na + nb, total);
    assert_exactly_once(&read_all(backend, &root).await, total);
}

async fn hand_over(backend: &str) {
    let root = unique(&format!("test-handover-{backend}"));
    let key = unique("h_1/s");
    let total = 300;
    let a = spawn();
    let (held, tell) = {
        let mut tell = None;
        let p = Promise::new(&mut |resolve, _| tell = Some(resolve));
        (p, tell.unwrap())
    };
    let _pa = run(&a, args(backend, &root, &key, total, 50, true), move |_| {
        let _ = tell.call0(&JsValue::NULL);
    });
    JsFuture::from(held).await.unwrap();
    // `a` holds the lock after 50 lines; `b` waits for it.
    let b = spawn();
    let pb = run(&b, args(backend, &root, &key, total, 50, false), |_| {});
    scrollback::testing::sleep(300).await;
    let before = read_all(backend, &root).await;
    assert!(before.len() <= 50 * 48, "b wrote while a held the lock");
    // The tab closes: the browser releases a's lock (and its file handles); b takes over.
    a.terminate();
    let nb = JsFuture::from(pb).await.unwrap().as_f64().unwrap() as u32;
    b.terminate();
    let all = read_all(backend, &root).await;
    assert_exactly_once(&all, total);
    assert!(nb >= total - 50, "b wrote {nb}");
}

#[wasm_bindgen_test]
async fn two_workers_race_on_opfs_and_lose_or_double_nothing() {
    race("opfs").await;
}

#[wasm_bindgen_test]
async fn two_workers_race_on_indexeddb_and_lose_or_double_nothing() {
    race("indexeddb").await;
}

#[wasm_bindgen_test]
async fn a_terminated_writer_hands_over_on_opfs() {
    hand_over("opfs").await;
}

#[wasm_bindgen_test]
async fn a_terminated_writer_hands_over_on_indexeddb() {
    hand_over("indexeddb").await;
}
