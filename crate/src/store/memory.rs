//! An in-memory store: for tests, private windows, and as the reference the others conform to.

use super::{
    entries_below, segments, Entry, Meta, Store, StoreError, StoreResult, WriterRole, Writers,
};
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// Blobs in a map, with an optional write budget to exercise the quota path.
#[derive(Debug, Default)]
pub struct MemoryStore {
    blobs: Mutex<BTreeMap<String, Blob>>,
    budget: Mutex<Option<u64>>,
    clock: Mutex<u64>,
    writers: Writers,
    read_ahead: Mutex<Option<usize>>,
}

#[derive(Debug, Default)]
struct Blob {
    bytes: Vec<u8>,
    modified: u64,
}

impl MemoryStore {
    /// An empty store without a quota.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates a full origin, as the browser backends' hooks of the same name do: at most
    /// `bytes` more bytes are accepted from now on, and a write past that fails with
    /// [`StoreError::QuotaExceeded`], changing nothing. `None` lifts the limit.
    pub fn limit_writes(&self, bytes: Option<u64>) {
        *self.budget.lock().unwrap() = bytes;
    }

    /// Answers `bytes` for [`Store::read_ahead`] from now on (the browser backends differ),
    /// `None` the default.
    pub fn set_read_ahead(&self, bytes: Option<usize>) {
        *self.read_ahead.lock().unwrap() = bytes;
    }

    /// Removes everything, as a browser does when site data is cleared.
    pub fn wipe(&self) {
        self.blobs.lock().unwrap().clear();
    }

    /// The next stamp: a counter, so every write gets a larger one.
    fn tick(&self) -> u64 {
        let mut clock = self.clock.lock().unwrap();
        *clock += 1;
        *clock
    }

    /// Takes `len` bytes from the write budget, or fails.
    fn spend(&self, len: usize) -> StoreResult<()> {
        let mut budget = self.budget.lock().unwrap();
        if let Some(b) = *budget {
            if len as u64 > b {
                return Err(StoreError::QuotaExceeded);
            }
            *budget = Some(b - len as u64);
        }
        Ok(())
    }
}

fn key(path: &str) -> StoreResult<String> {
    segments(path).map(|_| path.to_string())
}

impl Store for MemoryStore {
    async fn list(&self, dir: &str) -> StoreResult<Vec<Entry>> {
        let prefix = format!("{}/", key(dir)?);
        let blobs = self.blobs.lock().unwrap();
        let below = blobs
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix));
        Ok(entries_below(dir, below, |b| {
            Some(Meta {
                size: b.bytes.len() as u64,
                modified: b.modified,
            })
        }))
    }

    async fn stat(&self, path: &str) -> StoreResult<Option<Meta>> {
        let k = key(path)?;
        Ok(self.blobs.lock().unwrap().get(&k).map(|b| Meta {
            size: b.bytes.len() as u64,
            modified: b.modified,
        }))
    }

    async fn read(&self, path: &str, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        let k = key(path)?;
        let blobs = self.blobs.lock().unwrap();
        let blob = &blobs.get(&k).ok_or(StoreError::NotFound(k.clone()))?.bytes;
        let start = (offset as usize).min(blob.len());
        let end = start.saturating_add(len).min(blob.len());
        Ok(blob[start..end].to_vec())
    }

    async fn read_end(&self, path: &str, len: usize) -> StoreResult<(u64, Vec<u8>)> {
        let k = key(path)?;
        let blobs = self.blobs.lock().unwrap();
        let blob = &blobs.get(&k).ok_or(StoreError::NotFound(k.clone()))?.bytes;
        Ok((
            blob.len() as u64,
            blob[blob.len().saturating_sub(len)..].to_vec(),
        ))
    }

    fn read_ahead(&self) -> usize {
        self.read_ahead.lock().unwrap().unwrap_or(super::READ_AHEAD)
    }
    async fn write(&self, path: &str, bytes: &[u8]) -> StoreResult<()> {
        let k = key(path)?;
        let mut blobs = self.blobs.lock().unwrap();
        self.spend(bytes.len())?;
        let modified = self.tick();
        blobs.insert(
            k,
            Blob {
                bytes: bytes.to_vec(),
                modified,
            },
        );
        Ok(())
    }

    async fn append(&self, path: &str, bytes: &[u8]) -> StoreResult<u64> {
        let k = key(path)?;
        let mut blobs = self.blobs.lock().unwrap();
        self.spend(bytes.len())?;
        let modified = self.tick();
        let blob = blobs.entry(k).or_default();
        blob.bytes.extend_from_slice(bytes);
        blob.modified = modified;
        Ok(blob.bytes.len() as u64)
    }

    async fn truncate(&self, path: &str, len: u64) -> StoreResult<()> {
        let k = key(path)?;
        let mut blobs = self.blobs.lock().unwrap();
        let modified = self.tick();
        let blob = blobs.get_mut(&k).ok_or(StoreError::NotFound(k.clone()))?;
        blob.bytes.truncate(len as usize);
        blob.modified = modified;
        Ok(())
    }

    async fn rename(&self, from: &str, to: &str) -> StoreResult<()> {
        let (f, t) = (key(from)?, key(to)?);
        let mut blobs = self.blobs.lock().unwrap();
        let blob = blobs.remove(&f).ok_or(StoreError::NotFound(f))?;
        blobs.insert(t, blob);
        Ok(())
    }

    async fn remove(&self, path: &str) -> StoreResult<()> {
        let k = key(path)?;
        let prefix = format!("{k}/");
        let mut blobs = self.blobs.lock().unwrap();
        blobs.retain(|name, _| name != &k && !name.starts_with(&prefix));
        Ok(())
    }

    async fn writer(&self, key: &str, wait: bool) -> Option<WriterRole> {
        self.writers.acquire(key, wait).await
    }

    async fn writers_held(&self, dir: &str) -> Option<HashSet<String>> {
        Some(self.writers.held(dir))
    }
}
