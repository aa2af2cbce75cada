//! A store that runs a test's hook before each operation it forwards to the store it wraps: the
//! one forwarding of every [`Store`] operation that the tests which slow, hold, count or fail a
//! backend's calls need, so that none of them forwards some operations and forgets others (a
//! forgotten `flush` or `writer` silently takes the trait's default instead of the backend's).

use crate::store::{yield_now, Entry, Meta, Store, StoreResult, WriterRole};
use std::collections::HashSet;

/// An operation a [`Hooked`] store is about to forward, with the path(s) it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// [`Store::list`] of a folder.
    List(&'a str),
    /// [`Store::stat`].
    Stat(&'a str),
    /// [`Store::read`].
    Read(&'a str),
    /// [`Store::read_end`].
    ReadEnd(&'a str),
    /// [`Store::write`].
    Write(&'a str),
    /// [`Store::append`].
    Append(&'a str),
    /// [`Store::truncate`].
    Truncate(&'a str),
    /// [`Store::rename`].
    Rename {
        /// The blob renamed.
        from: &'a str,
        /// Its new name.
        to: &'a str,
    },
    /// [`Store::remove`].
    Remove(&'a str),
    /// [`Store::flush`].
    Flush,
    /// [`Store::writer`] for a key.
    Writer(&'a str),
    /// [`Store::hand_over`] of a key.
    HandOver(&'a str),
}

/// What a test does before each operation of a [`Hooked`] store.
#[allow(async_fn_in_trait)]
pub trait Hook {
    /// Runs before `op` is forwarded; an error fails the operation without forwarding it (a
    /// refused [`Store::writer`] answers `None`; [`Store::hand_over`] is forwarded anyway).
    /// Nothing by default.
    async fn before(&self, op: Op<'_>) -> StoreResult<()> {
        let _ = op;
        Ok(())
    }
}

/// Lets the other tasks run before each operation, as a browser's store does (every IndexedDB
/// or OPFS call is answered in a later turn): what another task does in the middle of a store
/// operation is tried natively.
#[derive(Debug, Default, Clone, Copy)]
pub struct Yield;

impl Hook for Yield {
    async fn before(&self, _: Op<'_>) -> StoreResult<()> {
        yield_now().await;
        Ok(())
    }
}

/// `store`, with `hook` run before each of its operations.
#[derive(Debug, Default)]
pub struct Hooked<S, H> {
    /// The store every operation is forwarded to.
    pub inner: S,
    /// What runs first; a test keeps its counters and switches here.
    pub hook: H,
}

impl<S, H> Hooked<S, H> {
    /// `store` with `hook`.
    pub fn new(store: S, hook: H) -> Self {
        Hooked { inner: store, hook }
    }
}

impl<S: Store, H: Hook> Store for Hooked<S, H> {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        self.hook.before(Op::List(dir)).await?;
        self.inner.list(dir).await
    }
    async fn names(&self, dir: &str) -> StoreResult<Vec<String>> {
        self.hook.before(Op::List(dir)).await?;
        self.inner.names(dir).await
    }
    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        self.hook.before(Op::Stat(path)).await?;
        self.inner.stat(path).await
    }
    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        self.hook.before(Op::Read(path)).await?;
        self.inner.read(path, offset, len).await
    }
    async fn read_end(&self, path: &str, len: usize) -> StoreResult<(u64, Vec<u8>)> {
        self.hook.before(Op::ReadEnd(path)).await?;
        self.inner.read_end(path, len).await
    }
    fn read_ahead(&self) -> usize {
        self.inner.read_ahead()
    }
    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        self.hook.before(Op::Write(path)).await?;
        self.inner.write(path, bytes).await
    }
    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        self.hook.before(Op::Append(path)).await?;
        self.inner.append(path, bytes).await
    }
    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        self.hook.before(Op::Truncate(path)).await?;
        self.inner.truncate(path, len).await
    }
    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        self.hook.before(Op::Rename { from, to }).await?;
        self.inner.rename(from, to).await
    }
    async fn remove(&self, path: &str) -> StoreResult<()> {
        self.hook.before(Op::Remove(path)).await?;
        self.inner.remove(path).await
    }
    async fn flush(&self) -> StoreResult<()> {
        self.hook.before(Op::Flush).await?;
        self.inner.flush().await
    }
    async fn writer(&self, key: &str, wait: bool) -> Option<WriterRole> {
        self.hook.before(Op::Writer(key)).await.ok()?;
        self.inner.writer(key, wait).await
    }
    async fn writers_held(&self, dir: &str) -> Option<HashSet<String>> {
        self.inner.writers_held(dir).await
    }
    async fn hand_over(&self, key: &str) {
        let _ = self.hook.before(Op::HandOver(key)).await;
        self.inner.hand_over(key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, StoreError};
    use std::cell::RefCell;

    /// Records each operation, and refuses those on paths under `refused/`.
    #[derive(Default)]
    struct Record(RefCell<Vec<String>>);

    impl Hook for Record {
        async fn before(&self, op: Op<'_>) -> StoreResult<()> {
            self.0.borrow_mut().push(format!("{op:?}"));
            match op {
                Op::Write(path) | Op::Writer(path) if path.starts_with("refused/") => {
                    Err(StoreError::QuotaExceeded)
                }
                _ => Ok(()),
            }
        }
    }

    /// Every operation reaches the hook first, then the store, with what it was asked; one the
    /// hook refuses never reaches the store.
    #[test]
    fn every_operation_goes_through_the_hook_to_the_store() {
        pollster::block_on(async {
            let s = Hooked::new(MemoryStore::new(), Record::default());
            s.write("d/a", b"hello").await.unwrap();
            assert_eq!(s.append("d/a", b" world").await.unwrap(), 11);
            assert_eq!(s.read("d/a", 6, 5).await.unwrap(), b"world");
            assert_eq!(s.read_end("d/a", 5).await.unwrap(), (11, b"world".to_vec()));
            assert_eq!(s.stat("d/a").await.unwrap().unwrap().size, 11);
            s.truncate("d/a", 5).await.unwrap();
            s.rename("d/a", "d/b").await.unwrap();
            assert_eq!(s.list("d").await.unwrap()[0].name, "b");
            s.flush().await.unwrap();
            assert!(s.writer("d", false).await.is_some());
            s.hand_over("d").await;
            s.remove("d").await.unwrap();
            assert_eq!(
                s.inner.stat("d/b").await.unwrap(),
                None,
                "removed from the store"
            );
            assert_eq!(s.read_ahead(), s.inner.read_ahead());

            assert!(matches!(
                s.write("refused/x", b"x").await,
                Err(StoreError::QuotaExceeded)
            ));
            assert_eq!(
                s.inner.stat("refused/x").await.unwrap(),
                None,
                "never written"
            );
            assert!(s.writer("refused/k", false).await.is_none());
            assert_eq!(
                *s.hook.0.borrow(),
                [
                    r#"Write("d/a")"#,
                    r#"Append("d/a")"#,
                    r#"Read("d/a")"#,
                    r#"ReadEnd("d/a")"#,
                    r#"Stat("d/a")"#,
                    r#"Truncate("d/a")"#,
                    r#"Rename { from: "d/a", to: "d/b" }"#,
                    r#"List("d")"#,
                    "Flush",
                    r#"Writer("d")"#,
                    r#"HandOver("d")"#,
                    r#"Remove("d")"#,
                    r#"Write("refused/x")"#,
                    r#"Writer("refused/k")"#,
                ]
            );
        });
    }
}
