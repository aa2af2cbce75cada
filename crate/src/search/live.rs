//! What this worker's index writers did, told to its reader without asking the store.
//!
//! - **The rows still streaming.** A reply whose next delta may still join it is not written
//!   to the index blob until the next row starts ([`super::writer`]); a transcript whose newest
//!   line is an assistant delta would hide its last reply. Each writer publishes its open row
//!   here (extended by each delta's text: O(delta)) and a query searches it as one more document
//!   of that session. Memory only: the blob gets the row once it completes.
//! - **The blobs changed.** A query re-reads from the store only the sessions whose blob this
//!   worker changed since the last query (and, for what another tab's writer did, every
//!   session at most every [`super::reader::RECHECK_MS`]), instead of asking the store about
//!   every session on every query (a stat per session: hundreds of ms in OPFS at 50 sessions).
//!   The idle build of the segments ([`super::segment`]) looks at those sessions too.

use super::doc::{Doc, OPEN_ROW_ROOM};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// A copy of an open row whose text has room for the deltas still to come.
fn roomy(doc: &Doc) -> Doc {
    let mut text = String::with_capacity(doc.text.len() + OPEN_ROW_ROOM);
    text.push_str(&doc.text);
    Doc {
        seq: doc.seq,
        end: doc.end,
        ts: doc.ts,
        text,
        at: doc.at,
        welds: doc.welds,
    }
}

#[derive(Debug, Default)]
struct State {
    /// The open rows, by session: the few sessions streaming right now, looked up on every
    /// delta appended, by a scan rather than a hash of the key.
    open: Vec<(String, Doc)>,
    changed: HashSet<String>,
    relist: bool,
    /// The blobs written since the last segment build looked at them.
    unbuilt: HashSet<String>,
}

/// One server's sessions as this worker's writers changed them, by session folder name.
/// Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Live(Arc<Mutex<State>>);

impl Live {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        self.0.lock().ok().map(|mut s| f(&mut s))
    }

    /// Sets session `key`'s open row: `None` when it has none. The same row grown is extended
    /// by what it gained, not copied again.
    pub fn set_open(&self, key: &str, open: Option<&Doc>) {
        self.with(|s| {
            let at = s.open.iter().position(|(k, _)| k == key);
            match (at, open) {
                (Some(i), Some(doc)) if s.open[i].1.seq == doc.seq => {
                    let held = &mut s.open[i].1;
                    if let Some(more) = doc.text.get(held.text.len()..) {
                        held.text.push_str(more);
                    }
                    held.end = doc.end;
                }
                (Some(i), Some(doc)) => s.open[i].1 = roomy(doc),
                (None, Some(doc)) => s.open.push((key.to_string(), roomy(doc))),
                (Some(i), None) => {
                    s.open.swap_remove(i);
                }
                (None, None) => {}
            }
        });
    }

    /// The sessions with an open row.
    pub fn streaming(&self) -> Vec<String> {
        self.with(|s| s.open.iter().map(|(k, _)| k.clone()).collect())
            .unwrap_or_default()
    }

    /// Session `key`'s open row, if any.
    pub fn open(&self, key: &str) -> Option<Doc> {
        self.with(|s| {
            s.open
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, d)| d.clone())
        })
        .flatten()
    }

    /// Session `key`'s index blob was written, cut or removed by this worker.
    pub fn changed(&self, key: &str) {
        self.with(|s| {
            s.changed.insert(key.to_string());
            s.unbuilt.insert(key.to_string());
        });
    }

    /// The sessions whose blob this worker changed since the last call (for the idle build of
    /// their segments).
    pub fn take_unbuilt(&self) -> HashSet<String> {
        self.with(|s| std::mem::take(&mut s.unbuilt))
            .unwrap_or_default()
    }

    /// Session `key` is to be looked at by the next idle build again (its writer was busy).
    pub fn unbuilt(&self, key: &str) {
        self.with(|s| s.unbuilt.insert(key.to_string()));
    }

    /// Session `key`'s folder was removed by this worker: the next query lists the sessions.
    pub fn removed(&self, key: &str) {
        self.with(|s| {
            s.open.retain(|(k, _)| k != key);
            s.changed.insert(key.to_string());
            s.relist = true;
        });
    }

    /// Every session may have changed (the server's whole folder was removed).
    pub fn relist(&self) {
        self.with(|s| s.relist = true);
    }

    /// Every session was removed: no open row is searched any more (a view still streaming
    /// publishes its row again with its next delta).
    pub fn removed_all(&self) {
        self.with(|s| {
            s.open.clear();
            s.relist = true;
        });
    }

    /// What changed since the last call: the sessions, and whether to list them again.
    pub(super) fn take_changes(&self) -> (HashSet<String>, bool) {
        self.with(|s| {
            (
                std::mem::take(&mut s.changed),
                std::mem::take(&mut s.relist),
            )
        })
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, end: u64, text: &str) -> Doc {
        Doc {
            seq,
            end,
            ts: 0.0,
            text: text.to_string(),
            at: 0,
            welds: false,
        }
    }

    #[test]
    fn each_session_streaming_keeps_its_own_open_row() {
        let live = Live::default();
        live.set_open("a", Some(&row(1, 2, "one")));
        live.set_open("b", Some(&row(7, 8, "seven")));
        // Grown: extended by what it gained; a new row replaces the old one.
        live.set_open("a", Some(&row(1, 3, "one two")));
        live.set_open("b", Some(&row(9, 10, "nine")));
        assert_eq!(live.open("a"), Some(row(1, 3, "one two")));
        assert_eq!(live.open("b"), Some(row(9, 10, "nine")));
        // One ends, the other streams on; a removed session has none.
        live.set_open("a", None);
        assert_eq!(live.open("a"), None);
        assert_eq!(live.open("b"), Some(row(9, 10, "nine")));
        live.set_open("a", Some(&row(4, 5, "four")));
        live.removed("b");
        assert_eq!(live.open("b"), None);
        assert_eq!(live.open("a"), Some(row(4, 5, "four")));
        assert_eq!(live.open("c"), None);
    }
}
