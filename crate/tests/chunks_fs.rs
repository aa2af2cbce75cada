//! The conformance suite against the native filesystem store, each test in its own folder.
#![cfg(not(target_arch = "wasm32"))]

use scrollback::store::{FsStore, Store};
use scrollback::testing::{Hook, Hooked};

/// Keeps a temporary folder (deleted with it) for as long as the store in it lives.
struct KeepDir {
    _dir: tempfile::TempDir,
}

impl Hook for KeepDir {}

/// A filesystem store in a temporary folder that is deleted with it.
fn temp_fs() -> Hooked<FsStore, KeepDir> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    Hooked::new(FsStore::new(dir.path()), KeepDir { _dir: dir })
}

scrollback::store_suite!(async || temp_fs(); clock);

#[test]
fn nothing_escapes_the_root_and_writes_are_whole() {
    pollster::block_on(async {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("root");
        let store = FsStore::new(&root);
        store.write("a/b", b"0123").await.unwrap();
        for bad in ["../x", "a/../../x", "/etc/passwd"] {
            assert!(store.write(bad, b"x").await.is_err());
        }
        let mut outside: Vec<_> = std::fs::read_dir(outer.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        outside.sort();
        assert_eq!(outside, ["root"]);
        // A whole write leaves no temporary file behind and lists nothing extra.
        store.write("a/b", b"replaced").await.unwrap();
        let names: Vec<_> = std::fs::read_dir(root.join("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["b"]);
        assert_eq!(std::fs::read(root.join("a/b")).unwrap(), b"replaced");
    });
}

/// A temporary file a crash left between its write and its rename is never listed, and the
/// next list of its folder removes it once it is old; one being written now is left alone.
#[test]
fn a_temporary_file_left_by_a_crash_is_removed_by_a_later_list() {
    pollster::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::new(dir.path());
        store.write("s/chunk", b"line\n").await.unwrap();
        let folder = dir.path().join("s");
        let old = folder.join(".~scrollback-tmp.4242.0.chunk");
        let fresh = folder.join(".~scrollback-tmp.4242.1.chunk");
        std::fs::write(&old, b"half a blob").unwrap();
        std::fs::write(&fresh, b"being written").unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        let names: Vec<String> = store
            .list("s")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["chunk"]);
        assert!(!old.exists(), "the abandoned temporary file is removed");
        assert!(fresh.exists(), "a recent one is left alone");
    });
}

/// Segments that would mean another file (or another root) on some OS are refused on every OS:
/// a drive prefix, a trailing dot or space (`a.` and `a` are one file on Windows), a device name
/// Windows reserves in any case, and the characters Windows forbids. Nothing is written.
#[test]
fn segments_that_are_not_portable_file_names_are_refused_everywhere() {
    pollster::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::new(dir.path());
        for bad in [
            "chats/C:/x.jsonl",
            "C:",
            "a./b",
            "a /b",
            "CON",
            "chats/nul",
            "chats/Com1.txt",
            "lpt9/x",
            "a<b",
            "a|b",
            "a?b",
            "a*b",
            "a\"b",
            "a\tb",
            "chats/.~scrollback-tmp.1.2.x.jsonl",
        ] {
            assert!(
                matches!(
                    store.write(bad, b"x").await,
                    Err(scrollback::store::StoreError::InvalidPath(_))
                ),
                "{bad:?}"
            );
            assert!(store.read(bad, 0, 1).await.is_err(), "{bad:?}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Their portable neighbours are fine.
        for good in [
            "chats/c/x.jsonl",
            "a.b/c",
            "console",
            "com10",
            "a%2E/b",
            "chats/.x",
            "~a",
        ] {
            store.write(good, b"x").await.unwrap();
        }
    });
}

/// What a flush syncs is kept by name: a file appended to and then renamed is synced under its
/// new name, one removed since (or its folder) is skipped, and one that cannot be synced is
/// reported, and again by the next flush, until it goes. (Whether a sync reaches the disk
/// cannot be seen from here: this checks what the flush is asked to sync and what it reports.)
#[test]
fn a_flush_follows_renames_skips_removals_and_reports_failures() {
    pollster::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::new(dir.path());
        store.flush().await.unwrap();
        store.append("c/chat.jsonl.tmp", b"header\n").await.unwrap();
        store
            .rename("c/chat.jsonl.tmp", "c/chat.jsonl")
            .await
            .unwrap();
        store.append("s/1-open.raw.jsonl", b"one\n").await.unwrap();
        store.append("gone/x", b"x").await.unwrap();
        store.remove("gone").await.unwrap();
        store.truncate("s/1-open.raw.jsonl", 2).await.unwrap();
        store.flush().await.unwrap();
        // A blob whose file became a folder cannot be opened to be synced.
        store.append("s/odd", b"x").await.unwrap();
        let odd = dir.path().join("s/odd");
        std::fs::remove_file(&odd).unwrap();
        std::fs::create_dir(&odd).unwrap();
        assert!(store.flush().await.is_err());
        assert!(store.flush().await.is_err(), "noted again after it failed");
        std::fs::remove_dir(&odd).unwrap();
        store.flush().await.unwrap();
        assert_eq!(
            store.read("c/chat.jsonl", 0, 100).await.unwrap(),
            b"header\n"
        );
        assert_eq!(
            store.read("s/1-open.raw.jsonl", 0, 100).await.unwrap(),
            b"on"
        );
    });
}
