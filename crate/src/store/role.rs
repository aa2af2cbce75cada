//! The writer role: one writer per session across tabs and workers ([`Store::writer`]).
//!
//! In a browser the role is a Web Lock (`WriterLock`, on wasm32), released by the
//! browser when the holder's tab or worker goes away. Natively (the CLI, the tests) nothing else
//! shares the folder, so a store grants it at once; [`MemoryStore`](super::MemoryStore) keeps an
//! in-process lock ([`Writers`]) so that two sessions on one store behave as two tabs do.
//!
//! [`Store::writer`]: super::Store::writer

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The writer role for one key, held until dropped.
pub struct WriterRole(#[allow(dead_code)] Option<Box<dyn Any>>);

impl WriterRole {
    /// A role nobody else can contend for (a store no other process shares).
    pub fn unshared() -> WriterRole {
        WriterRole(None)
    }

    /// A role that lasts as long as `held` (a lock guard: dropping it releases the role).
    pub fn holding(held: impl Any) -> WriterRole {
        WriterRole(Some(Box::new(held)))
    }
}

impl std::fmt::Debug for WriterRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriterRole")
    }
}

/// An in-process writer lock per key: what Web Locks are to tabs, for sessions sharing one
/// store in one process.
#[derive(Debug, Default)]
pub struct Writers {
    locks: Mutex<HashMap<String, Arc<async_lock::Mutex<()>>>>,
}

impl Writers {
    fn lock(&self, key: &str) -> Arc<async_lock::Mutex<()>> {
        self.locks
            .lock()
            .unwrap()
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    /// The role for `key`: `None` at once when it is held and `wait` is false, else once the
    /// holder drops it.
    pub async fn acquire(&self, key: &str, wait: bool) -> Option<WriterRole> {
        let lock = self.lock(key);
        let guard = match wait {
            true => lock.lock_arc().await,
            false => lock.try_lock_arc()?,
        };
        Some(WriterRole::holding(guard))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_per_key_and_the_next_waiter_gets_it_when_dropped() {
        pollster::block_on(async {
            let writers = Writers::default();
            let first = writers.acquire("a", false).await.expect("free");
            assert!(writers.acquire("a", false).await.is_none(), "held");
            assert!(writers.acquire("b", false).await.is_some(), "another key");
            drop(first);
            let again = writers.acquire("a", true).await;
            assert!(again.is_some());
        });
    }
}
