//! The change notifications' registry (`follow::Watchers`) under a race a server meets: the
//! last stream of a session goes away while a change in its folder is being notified. The
//! notifier's thread must never end up dropping the last hold on a folder (which unwatches it,
//! under the registry's locks, on the thread that would have to answer the unwatch): it
//! deadlocked the server, every later `/events` waiting for the registry for ever.

use scrollback_server::follow::Watchers;
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
