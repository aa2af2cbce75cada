//! The conformance suite against the native filesystem store, each test in its own folder.
#![cfg(not(target_arch = "wasm32"))]

use scrollback::store::{Entry, FsStore, Meta, Store, StoreResult};

/// A filesystem store in a temporary folder that is deleted with it.
struct TempFs {
    store: FsStore,
    _dir: tempfile::TempDir,
}

impl TempFs {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        TempFs {
            store: FsStore::new(dir.path()),
            _dir: dir,
        }
    }
}

impl Store for TempFs {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        self.store.list(dir).await
    }
    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        self.store.stat(path).await
    }
    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        self.store.read(path, offset, len).await
    }
    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        self.store.write(path, bytes).await
    }
    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        self.store.append(path, bytes).await
    }
    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        self.store.truncate(path, len).await
    }
    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        self.store.rename(from, to).await
    }
    async fn remove(&self, path: &str) -> StoreResult<()> {
        self.store.remove(path).await
    }
}

scrollback::store_suite!(async || TempFs::new(); clock);

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
        for good in ["chats/c/x.jsonl", "a.b/c", "console", "com10", "a%2E/b"] {
            store.write(good, b"x").await.unwrap();
        }
    });
}
