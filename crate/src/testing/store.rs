//! The storage trait's operations, as every backend must answer them.

use crate::store::{Store, StoreError};
use std::sync::Arc;

const DIR: &str = "conformance/store";

/// Whole writes replace; reads take byte ranges and stop at the end; stat gives size and stamp.
pub async fn write_read_and_stat<S: Store>(store: Arc<S>) {
    let p = format!("{DIR}/write/a/blob");
    assert_eq!(store.stat(&p).await, Ok(None));
    assert!(matches!(
        store.read(&p, 0, 4).await,
        Err(StoreError::NotFound(_))
    ));
    store.write(&p, b"hello world").await.unwrap();
    let meta = store.stat(&p).await.unwrap().expect("written");
    assert_eq!(meta.size, 11);
    assert_eq!(store.read(&p, 0, 5).await.unwrap(), b"hello");
    assert_eq!(store.read(&p, 6, 100).await.unwrap(), b"world");
    assert_eq!(store.read(&p, 11, 4).await.unwrap(), b"");
    assert_eq!(store.read(&p, 50, 4).await.unwrap(), b"");
    store.write(&p, b"bye").await.unwrap();
    assert_eq!(store.read(&p, 0, 100).await.unwrap(), b"bye");
    let later = store.stat(&p).await.unwrap().unwrap();
    assert_eq!(later.size, 3);
    assert!(later.modified >= meta.modified, "stamps never go back");
    assert_eq!(
        store.stat(&format!("{DIR}/write/a")).await,
        Ok(None),
        "a folder is no blob"
    );
}

/// Appends create the blob, grow it and return its new size; the bytes are in order.
pub async fn append_grows_in_place<S: Store>(store: Arc<S>) {
    let p = format!("{DIR}/append/x/log");
    assert_eq!(store.append(&p, b"one\n").await, Ok(4));
    assert_eq!(store.append(&p, b"two\n").await, Ok(8));
    assert_eq!(store.append(&p, b"").await, Ok(8));
    let mut expected = b"one\ntwo\n".to_vec();
    for i in 0..200 {
        let line = format!("line {i}\n");
        expected.extend_from_slice(line.as_bytes());
        assert_eq!(
            store.append(&p, line.as_bytes()).await,
            Ok(expected.len() as u64)
        );
    }
    assert_eq!(
        store.read(&p, 0, expected.len() + 10).await.unwrap(),
        expected
    );
    assert_eq!(store.read(&p, 4, 4).await.unwrap(), b"two\n");
    assert_eq!(
        store.stat(&p).await.unwrap().unwrap().size,
        expected.len() as u64
    );
}

/// Truncate cuts a blob; a missing one is NotFound.
pub async fn truncate_cuts<S: Store>(store: Arc<S>) {
    let p = format!("{DIR}/truncate/blob");
    store.write(&p, b"0123456789").await.unwrap();
    store.truncate(&p, 4).await.unwrap();
    assert_eq!(store.read(&p, 0, 100).await.unwrap(), b"0123");
    assert_eq!(store.append(&p, b"x").await, Ok(5));
    assert_eq!(store.read(&p, 0, 100).await.unwrap(), b"0123x");
    let missing = format!("{DIR}/truncate/missing");
    assert!(matches!(
        store.truncate(&missing, 0).await,
        Err(StoreError::NotFound(_))
    ));
}

/// Rename moves a blob within its folder, replacing one of the new name.
pub async fn rename_replaces<S: Store>(store: Arc<S>) {
    let (a, b) = (format!("{DIR}/rename/a"), format!("{DIR}/rename/b"));
    store.write(&a, b"aaa").await.unwrap();
    store.write(&b, b"b").await.unwrap();
    store.rename(&a, &b).await.unwrap();
    assert_eq!(store.stat(&a).await, Ok(None));
    assert_eq!(store.read(&b, 0, 10).await.unwrap(), b"aaa");
    assert!(matches!(
        store.rename(&a, &b).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        store.read(&b, 0, 10).await.unwrap(),
        b"aaa",
        "a failed rename changes nothing"
    );
    // A renamed blob still appends in place.
    assert_eq!(store.append(&b, b"+").await, Ok(4));
}

/// List shows blobs (with sizes and stamps) and folders; remove takes a blob or a whole folder.
pub async fn list_and_remove<S: Store>(store: Arc<S>) {
    let d = format!("{DIR}/list");
    assert_eq!(
        store.list(&d).await,
        Ok(Vec::new()),
        "a missing folder lists empty"
    );
    store.write(&format!("{d}/one"), b"1").await.unwrap();
    store.append(&format!("{d}/two"), b"22").await.unwrap();
    store
        .write(&format!("{d}/sub/deep/three"), b"333")
        .await
        .unwrap();
    let mut entries = store.list(&d).await.unwrap();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let shape: Vec<(&str, bool, u64)> = entries
        .iter()
        .map(|e| (e.name.as_str(), e.is_dir, e.size))
        .collect();
    assert_eq!(
        shape,
        [("one", false, 1), ("sub", true, 0), ("two", false, 2)]
    );
    assert!(entries.iter().filter(|e| !e.is_dir).all(|e| e.modified > 0));
    store.remove(&format!("{d}/one")).await.unwrap();
    store.remove(&format!("{d}/sub")).await.unwrap();
    store.remove(&format!("{d}/nothing")).await.unwrap();
    assert_eq!(store.stat(&format!("{d}/sub/deep/three")).await, Ok(None));
    let names: Vec<String> = store
        .list(&d)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["two"]);
    store.remove(&d).await.unwrap();
    assert_eq!(store.list(&d).await, Ok(Vec::new()));
}

/// No path with an empty segment, `.`, `..`, `\` or NUL reaches a backend.
pub async fn paths_never_escape<S: Store>(store: Arc<S>) {
    for bad in [
        "", "..", "../x", "a/../b", "/abs", "a//b", "a/", ".", "a/./b", "a\\b", "a\0b",
    ] {
        let invalid = |r: Result<(), StoreError>| matches!(r, Err(StoreError::InvalidPath(_)));
        assert!(invalid(store.write(bad, b"x").await), "write {bad:?}");
        assert!(
            invalid(store.append(bad, b"x").await.map(|_| ())),
            "append {bad:?}"
        );
        assert!(
            invalid(store.read(bad, 0, 1).await.map(|_| ())),
            "read {bad:?}"
        );
        assert!(invalid(store.stat(bad).await.map(|_| ())), "stat {bad:?}");
        assert!(invalid(store.list(bad).await.map(|_| ())), "list {bad:?}");
        assert!(invalid(store.truncate(bad, 0).await), "truncate {bad:?}");
        assert!(invalid(store.remove(bad).await), "remove {bad:?}");
        assert!(
            invalid(store.rename(&format!("{DIR}/x"), bad).await),
            "rename to {bad:?}"
        );
    }
}
