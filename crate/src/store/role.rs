//! The writer role: one writer per session across tabs and workers ([`Store::writer`]).
//!
//! In a browser the role is a Web Lock (`WriterLock`, on wasm32), released by the
//! browser when the holder's tab or worker goes away. Natively (the CLI, the tests) nothing else
//! shares the folder, so a store grants it at once; [`MemoryStore`](super::MemoryStore) keeps an
//! in-process lock ([`Writers`]) so that two sessions on one store behave as two tabs do.
//!
//! [`Store::writer`]: super::Store::writer

use std::any::Any;
use std::collections::{HashMap, HashSet};
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

    /// The names below `dir` whose role ([`Writers::acquire`], keyed `<dir>/<name>`) is held
    /// or waited for: their lock is shared beyond this map (a guard or a waiter holds it).
    pub fn held(&self, dir: &str) -> HashSet<String> {
        let prefix = format!("{dir}/");
        let locks = self.locks.lock().unwrap();
        let held = (locks.iter()).filter(|(_, lock)| Arc::strong_count(lock) > 1);
        let names = held.filter_map(|(key, _)| key.strip_prefix(&prefix));
        names
            .filter(|n| !n.contains('/'))
            .map(str::to_string)
            .collect()
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

    /// What the roles held below a folder are: those held or waited for, one level down.
    #[test]
    fn the_roles_held_below_a_folder_are_those_held_or_waited_for() {
        pollster::block_on(async {
            let writers = Writers::default();
            let a = writers.acquire("d/a", false).await.expect("free");
            let _deeper = writers.acquire("d/b/c", false).await.expect("free");
            let gone = writers.acquire("d/e", false).await.expect("free");
            let _elsewhere = writers.acquire("f/g", false).await.expect("free");
            drop(gone);
            assert_eq!(writers.held("d"), HashSet::from(["a".to_string()]));
            let mut waiting = Box::pin(writers.acquire("d/a", true));
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(std::future::Future::poll(waiting.as_mut(), &mut cx).is_pending());
            drop(a);
            assert_eq!(
                writers.held("d"),
                HashSet::from(["a".to_string()]),
                "waited for"
            );
            drop(waiting);
            assert!(writers.held("d").is_empty());
        });
    }

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
