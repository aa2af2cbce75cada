//! Marks: how a worker that starts knows, without a `stat` of every session's blob, which
//! blobs may have changed since the server's [`pack`](super::pack) was built.
//!
//! Whoever holds a session's writer role marks the session once before it first changes the
//! session's index blob or removes its folder ([`mark`]): an empty blob
//! `transcripts/v1/<server>.search.marks/<session>_<token>`, its token new each time (no two
//! role holders share one). The pack's build, in this order:
//!
//! 1. lists the marks ([`list`]);
//! 2. asks which sessions' roles are held or waited for now
//!    ([`Store::writers_held`]);
//! 3. takes each blob's size and stamp.
//!
//! It records per session the marks it listed ([`Trust::Marks`]), or [`Trust::Held`] when the
//! role was held (a writer may write on). A worker that starts lists the marks before it
//! reads the pack and trusts a session's recorded size and stamp, asking no `stat`, only when
//! its role was free at the build and every mark listed for it is one the pack recorded.
//! Every change since the build's stat is behind such a mark: a writer that held the role at
//! step 2 made the session `Held`; one that took it after step 2 marked after step 1, with a
//! token the pack does not know. A change made after a worker listed the marks is one it
//! answers without, as it would after a `stat` (and a hit's line that does not read as the
//! column says sets the session aside: the reader's fallback).
//!
//! The sessions the pack holds and the sessions marked are every session with a blob: a
//! session is marked before its first index write, and whatever removes a session's folder
//! marks it or removes the pack. So a worker that starts lists the marks, not the server's
//! folder (in OPFS a listing costs a call per entry).
//!
//! Once its pack is in place, a build removes the marks it recorded, and those of sessions
//! that are gone. A worker that reads that pack needs none of them (the pack knows them); one
//! that reads an older pack listed the marks before it read the pack, so before the new one
//! was in place and before the removal. So a session has marks only while its blob changed
//! since the last build, and listing them costs next to nothing. Whatever removes the pack
//! removes the marks with it, under the pack's role (no build in between): with no pack,
//! the next build takes every blob's size and stamp anew.
//!
//! A store that cannot tell which roles are held (`writers_held` is `None`: the native
//! filesystem store) records every session `Held`, and a worker asks a `stat` of each, as it
//! did before the marks.

use crate::store::{Store, StoreError};
use std::collections::{HashMap, HashSet};

/// The marks' folder's name, after its server's folder's (as the pack's).
pub const MARKS: &str = ".search.marks";

/// Between a session's folder name and a mark's token: never in a folder name (`_` is
/// escaped there).
const SEP: char = '_';

/// The marks' folder of the server whose folder is `dir`.
pub fn folder(dir: &str) -> String {
    format!("{dir}{MARKS}")
}

/// What a pack records of a session: whether a worker that starts may take the blob's size
/// and stamp from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Trust {
    /// Its writer role was held (or asked for) at the build, or no one could tell: a `stat`
    /// is asked.
    #[default]
    Held,
    /// The marks listed for it at the build: a mark not among them means a change since.
    Marks(Vec<String>),
}

impl Trust {
    /// Whether `listed` (a session's marks, as listed now) holds only marks this recorded.
    pub fn trusts(&self, listed: Option<&Vec<String>>) -> bool {
        match self {
            Trust::Held => false,
            Trust::Marks(known) => listed.is_none_or(|l| l.iter().all(|m| known.contains(m))),
        }
    }
}

/// Marks the session whose folder is `session_dir` (`<server>/<session>`): before its
/// writer's first change of the session's index blob or folder in a turn of its role.
pub async fn mark<S: Store>(store: &S, session_dir: &str) -> Result<(), StoreError> {
    let (dir, key) = session_dir
        .rsplit_once('/')
        .ok_or_else(|| StoreError::InvalidPath(session_dir.to_string()))?;
    let path = format!("{}/{key}{SEP}{:016x}", folder(dir), token());
    store.write(&path, b"").await?;
    // Nothing is written to it again: what the store holds open of it is let go.
    store.hand_over(&path).await;
    Ok(())
}

/// The marks under the server's folder `dir`, by session folder (`None`: not listed; no
/// folder is an empty list).
pub async fn list<S: Store>(store: &S, dir: &str) -> Option<HashMap<String, Vec<String>>> {
    let names = store.names(&folder(dir)).await.ok()?;
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for name in names {
        if let Some((key, token)) = name.rsplit_once(SEP) {
            out.entry(key.to_string())
                .or_default()
                .push(token.to_string());
        }
    }
    Some(out)
}

/// The trust a pack built now records for session `key`, given the marks listed and the
/// roles held at its start (`None`: not known).
pub fn trust(
    key: &str,
    listed: &HashMap<String, Vec<String>>,
    held: Option<&HashSet<String>>,
) -> Trust {
    match held {
        Some(held) if !held.contains(key) => {
            Trust::Marks(listed.get(key).cloned().unwrap_or_default())
        }
        _ => Trust::Held,
    }
}

/// Once a new pack is in place: removes the marks `listed` at its build that it recorded
/// (`now`), and those of sessions no longer `present`.
pub async fn tidy<S: Store>(
    store: &S,
    dir: &str,
    listed: &HashMap<String, Vec<String>>,
    now: &HashMap<String, Trust>,
    present: &HashSet<String>,
) {
    for (key, tokens) in listed {
        let recorded = match now.get(key) {
            Some(Trust::Marks(recorded)) => &recorded[..],
            _ => &[],
        };
        let gone = !present.contains(key);
        for token in tokens.iter().filter(|t| gone || recorded.contains(t)) {
            let path = format!("{}/{key}{SEP}{token}", folder(dir));
            if let Err(e) = store.remove(&path).await {
                log::info!("scrollback: could not remove the search mark {path}: {e}");
            }
        }
    }
}

/// A token no other mark shares: 64 random bits.
fn token() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        let half = || (js_sys::Math::random() * 4_294_967_296.0) as u64;
        (half() << 32) | half()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(crate::store::now_millis());
        h.finish()
    }
}
