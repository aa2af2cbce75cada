//! The change notifications' registry (`follow::Watchers`) under a race a server meets: the
//! last stream of a session goes away while a change in its folder is being notified. The
//! notifier's thread must never end up dropping the last hold on a folder (which unwatches it,
//! under the registry's locks, on the thread that would have to answer the unwatch): it
//! deadlocked the server, every later `/events` waiting for the registry for ever. And a
//! session folder replaced under its name: a notification follows the folder it was given, so
//! the folder now at the path must be watched again, for the open streams and for new ones.

mod server_support;

use scrollback_server::follow::Watchers;
use serde_json::json;
use server_support::{line, transcript, Fixture};
use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn streams_ending_while_their_folder_changes_never_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let folders: Vec<_> = (0..4)
        .map(|i| {
            let folder = dir.path().join(format!("s{i}"));
            std::fs::create_dir(&folder).unwrap();
            folder.join("transcript.jsonl")
        })
        .collect();
    let (done, finished) = mpsc::channel();
    let paths = folders.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let watchers = Watchers::new();
            for round in 0..3_000 {
                let path = &paths[round % paths.len()];
                // A stream starts following the session, a line is appended (a notification
                // on its way), and the stream ends as it arrives.
                let watched = watchers.watch(path);
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap();
                writeln!(f, "{{\"seq\":{round}}}").unwrap();
                drop(f);
                if round % 7 == 0 {
                    tokio::task::yield_now().await;
                }
                drop(watched);
            }
            // The registry still answers.
            let last = watchers.watch(&paths[0]);
            drop(last);
        });
        done.send(()).unwrap();
    });
    // What a client would wait for: far longer than the rounds take (a second or two).
    if finished.recv_timeout(Duration::from_secs(120)).is_err() {
        panic!("the registry deadlocked: a watch never returned");
    }
}

/// Swaps two paths atomically (`renameat2` with `RENAME_EXCHANGE`).
#[cfg(target_os = "linux")]
fn exchange(a: &std::path::Path, b: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let (a, b) = (c(a), c(b));
    // SAFETY: two valid NUL-terminated paths, relative to nothing (they are absolute).
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_replaced_session_folder_is_watched_again_for_old_and_new_streams() {
    let f = Fixture::new().await;
    f.write("v", &transcript(5));
    let mut old = f.events("v", "after=5").await;
    f.write("w", &transcript(3));
    let mut marker = f.events("w", "after=3").await;
    let stats: serde_json::Value = f.get("/stats").await.json().await.unwrap();
    assert_eq!(stats["streams"]["mode"], "notify", "{stats}");

    // A copy of the folder with other content is swapped in under the same name.
    let copy = f.dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let new = transcript(7).replace("question", "other question");
    std::fs::write(copy.join("transcript.jsonl"), &new).unwrap();
    exchange(&f.data().join("v"), &copy);
    let reset = old.next().await;
    assert_eq!(reset.event, "reset");
    assert!(
        reset.data.contains(r#""reason":"replaced""#),
        "{}",
        reset.data
    );
    assert_eq!(old.take(7).await.last().unwrap().id, "7");

    // The stream that saw the replacement and one opened since both hear of an append.
    let mut later = f.events("v", "after=7").await;
    f.append(
        "v",
        &line(8, json!({"type": "status", "status": "working"})),
    );
    assert_eq!(old.next().await.id, "8");
    assert_eq!(later.next().await.id, "8");
    // The replaced folder deleted: the new one is still heard. (Notifications come in order,
    // so once another session's append has come through, the deletion's have been handled.)
    std::fs::remove_dir_all(&copy).unwrap();
    f.append("w", &line(4, json!({"type": "status", "status": "idle"})));
    assert_eq!(marker.next().await.id, "4");
    f.append("v", &line(9, json!({"type": "status", "status": "idle"})));
    assert_eq!(old.next().await.id, "9");
    assert_eq!(later.next().await.id, "9");
}
