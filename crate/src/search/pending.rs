//! The rows still streaming: what the index writers hold in memory, shared with the reader.
//!
//! A reply whose next delta may still join it is not written to the index blob until the next
//! row starts ([`super::writer`]). A transcript whose newest line is an assistant delta would
//! then hide its last reply from search. Each writer publishes its open row here (extended by
//! each delta's text: O(delta)), keyed by the session's folder, and a query searches it as one
//! more document of that session. Memory only: the blob gets the row once it completes.

use super::doc::Doc;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The open rows of one server's sessions, by session folder name. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Pending(Arc<Mutex<HashMap<String, Doc>>>);

impl Pending {
    /// Sets session `key`'s open row: `None` when it has none. The same row grown is extended
    /// by what it gained, not copied again.
    pub fn set(&self, key: &str, open: Option<&Doc>) {
        let Ok(mut map) = self.0.lock() else {
            return;
        };
        match (map.get_mut(key), open) {
            (Some(held), Some(doc)) if held.seq == doc.seq => {
                if let Some(more) = doc.text.get(held.text.len()..) {
                    held.text.push_str(more);
                }
                held.end = doc.end;
            }
            (_, Some(doc)) => {
                map.insert(key.to_string(), doc.clone());
            }
            (_, None) => {
                map.remove(key);
            }
        }
    }

    /// Session `key`'s open row, if any.
    pub fn get(&self, key: &str) -> Option<Doc> {
        self.0.lock().ok()?.get(key).cloned()
    }
}
