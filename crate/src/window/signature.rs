//! The chat file's signature: `(size, stamp)`, where the stamp changes on every write even when
//! the storage clock does not.
//!
//! A backend's modification stamp ([`Meta::modified`]) may stay the same across two writes
//! within its clock's granularity, and a browser backend has no file mtime at all, so the
//! window layer keeps a sidecar blob beside each chat (`<chat>.sig`) recording the file's
//! `(size, modified)` as its last write left it and the stamp it issued then:
//!
//! - when the file still has the recorded `(size, modified)`, its stamp is the recorded one;
//! - each write first marks the record pending, then writes the file, then records the new
//!   `(size, modified)` with a stamp of `max(modified, previous stamp + 1)`: strictly larger than
//!   every stamp issued before, and the file's mtime where the clock moved;
//! - a file whose `(size, modified)` differ from the record (another program edited it), whose
//!   record is pending (a write was cut off before it touched the file) or that has no record
//!   is adopted: it gets a stamp of `max(modified, recorded stamp + 1)`, recorded at once (or,
//!   when the record cannot be written, a full disk, worked out again the same way next time:
//!   a read never fails for want of space);
//! - a write marks its record once its backup is complete and before it touches the file
//!   ([`undo_ready`]): a write cut off after that (a crash, a closed tab, a disk that filled)
//!   is seen by the next call ([`State::cut_off`]), which puts the backup back before anything
//!   else, so a chat is never left half written.
//!
//! So every state of the file the layer sees gets a stamp no earlier state had, and a cursor is
//! only accepted for the state it was read from. What no signature can see is an outside edit
//! that keeps both the size and the mtime (a same-length edit within one clock tick).

use super::WindowError;
use crate::store::{Meta, Store};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Record {
    size: u64,
    modified: u64,
    stamp: u64,
    /// A write is under way (or was cut off): the record does not describe the file.
    #[serde(default)]
    pending: bool,
    /// The backup blob holds what the write that produced this state replaced; with `pending`,
    /// the backup is complete and the write under way may have cut the file: putting the
    /// backup back gives the state `stamp` names.
    #[serde(default)]
    backup: bool,
}

/// The file's state as the window layer sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct State {
    /// `None` when the chat does not exist.
    pub meta: Option<Meta>,
    /// The signature stamp (0 for a missing chat).
    pub stamp: u64,
    /// Whether the backup blob undoes the write that produced this state.
    pub backup: bool,
    /// A write (or a restore) was cut off after its backup was complete: the file may be half
    /// written, and the backup must be put back (giving the state of `stamp`) before anything
    /// reads it.
    pub cut_off: bool,
}

impl State {
    pub fn size(&self) -> u64 {
        self.meta.map_or(0, |m| m.size)
    }
}

async fn record<S: Store>(store: &S, sig: &str) -> Option<Record> {
    let bytes = store.read(sig, 0, 4096).await.ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the record, and lets go of it ([`let_go`]): every tab records in it.
async fn put<S: Store>(store: &S, sig: &str, r: &Record) -> Result<(), WindowError> {
    let bytes = serde_json::to_vec(r).expect("a record serializes");
    store.write(sig, &bytes).await?;
    store.hand_over(sig).await;
    Ok(())
}

/// Makes what was written to `blob` durable and lets go of it: what the store buffers is
/// written (IndexedDB's appends; a failed one is reported here), and what it holds open is
/// closed (an OPFS sync handle, which locks its file against every other tab). A chat is
/// shared by the app's tabs, so a write leaves nothing held; and the file's signature is then
/// read as any other tab will see it (an OPFS file's time is its own once its handle closes).
pub(super) async fn let_go<S: Store>(store: &S, blob: &str) -> Result<(), WindowError> {
    store.flush().await?;
    store.hand_over(blob).await;
    Ok(())
}

/// The chat's current state; adopts (records) a state the layer has not seen.
pub(super) async fn current<S: Store>(
    store: &S,
    path: &str,
    sig: &str,
) -> Result<State, WindowError> {
    let Some(meta) = store.stat(path).await? else {
        return Ok(State {
            meta: None,
            stamp: 0,
            backup: false,
            cut_off: false,
        });
    };
    let old = record(store, sig).await;
    let state = |stamp, backup, cut_off| State {
        meta: Some(meta),
        stamp,
        backup,
        cut_off,
    };
    match old {
        Some(r) if r.pending && r.backup => return Ok(state(r.stamp, false, true)),
        Some(r) if !r.pending && (r.size, r.modified) == (meta.size, meta.modified) => {
            return Ok(state(r.stamp, r.backup, false))
        }
        _ => {}
    }
    let stamp = meta.modified.max(old.map_or(0, |r| r.stamp + 1)).max(1);
    let adopted = Record {
        size: meta.size,
        modified: meta.modified,
        stamp,
        pending: false,
        backup: false,
    };
    // Not recorded (a full disk): the next call works out the same stamp from the same record.
    if let Err(e) = put(store, sig, &adopted).await {
        log::warn!("{path}: its signature is not recorded ({e}); reading on");
    }
    Ok(state(stamp, false, false))
}

/// Marks a write as under way, so a write cut off midway can never keep the old stamp.
pub(super) async fn begin_write<S: Store>(
    store: &S,
    sig: &str,
    before: &State,
) -> Result<(), WindowError> {
    let r = Record {
        size: before.size(),
        modified: 0,
        stamp: before.stamp,
        pending: true,
        backup: false,
    };
    put(store, sig, &r).await
}

/// Marks the write under way as undoable: its backup is complete, and the file is about to be
/// cut. Putting the backup back (a write cut off, or a restore finished after a crash) gives
/// the state `stamp` names: the state before a write (the same bytes, the same stamp), or a new
/// one for a restore.
pub(super) async fn undo_ready<S: Store>(
    store: &S,
    sig: &str,
    stamp: u64,
) -> Result<(), WindowError> {
    let r = Record {
        size: 0,
        modified: 0,
        stamp,
        pending: true,
        backup: true,
    };
    put(store, sig, &r).await
}

/// Records the state a write left, with a fresh stamp; returns it.
pub(super) async fn finish_write<S: Store>(
    store: &S,
    path: &str,
    sig: &str,
    before: &State,
    backup: bool,
) -> Result<State, WindowError> {
    record_file(
        store,
        path,
        sig,
        |modified| modified.max(before.stamp + 1),
        backup,
    )
    .await
}

/// Records the state a backup put back, with the stamp [`undo_ready`] named; returns it.
pub(super) async fn put_back_done<S: Store>(
    store: &S,
    path: &str,
    sig: &str,
    stamp: u64,
) -> Result<State, WindowError> {
    record_file(store, path, sig, |_| stamp, false).await
}

/// Records the file as it is now, with the stamp `stamp_for` gives its modification time.
async fn record_file<S: Store>(
    store: &S,
    path: &str,
    sig: &str,
    stamp_for: impl FnOnce(u64) -> u64,
    backup: bool,
) -> Result<State, WindowError> {
    let_go(store, path).await?;
    let meta = store
        .stat(path)
        .await?
        .ok_or_else(|| WindowError::NotFound(path.to_string()))?;
    let stamp = stamp_for(meta.modified);
    put(
        store,
        sig,
        &Record {
            size: meta.size,
            modified: meta.modified,
            stamp,
            pending: false,
            backup,
        },
    )
    .await?;
    Ok(State {
        meta: Some(meta),
        stamp,
        backup,
        cut_off: false,
    })
}
