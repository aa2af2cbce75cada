//! Where a file's complete lines end, remembered across requests while its last line is long and
//! torn.
//!
//! A writer appending one long line (a 300 MB tool output) leaves the file without its final
//! newline for as long as it writes, and every answer first looks for the last newline, backwards
//! through the whole torn part: 0.15-0.22 s a request for 300 MB here, whatever it asks. A stream
//! remembers how far it searched (`follow`); this remembers it for every other reader (pages,
//! catch-ups, the session list, a stream's start). Per file (device and inode): the end found,
//! how far past it holds no newline, and what tells the file apart (its id, the protocol's
//! fingerprint of its head, the bytes just before the end and the torn line's first bytes: a
//! file whose first line is still being written is remembered too). A later read of that file
//! searches only what was appended since; a file that no longer holds those bytes (replaced,
//! truncated, rewritten) is searched whole again, and so is every file on a system that names
//! none (no inode).
//!
//! Only a torn part of at least [`REMEMBER_FROM`] bytes after a complete line is remembered (a
//! shorter one is cheap to search again), and at most [`MOST`] files at once.

use super::reader::{
    complete_end, complete_end_above, file_id, read_exact_at, tail_before, TAIL_BYTES,
};
use super::FileId;
use std::collections::HashMap;
use std::io::{self, Read, Seek};
use std::sync::{Mutex, OnceLock};

/// The shortest torn part remembered.
pub const REMEMBER_FROM: u64 = 1 << 20;

/// The most files remembered at once (the oldest remembered goes first).
pub const MOST: usize = 64;

/// What is known of one file: its complete lines end at `end`, and `[end, searched)` holds no
/// newline.
#[derive(Clone)]
struct Known {
    end: u64,
    searched: u64,
    id: Option<String>,
    tail: Vec<u8>,
    /// The torn line's first bytes (what tells apart a file that has no complete line yet).
    torn: Vec<u8>,
    /// When it was remembered (a count): the oldest goes first when [`MOST`] are.
    at: u64,
}

/// The ends remembered. The process has one ([`Ends::process`]); a test may have its own.
#[derive(Default)]
pub struct Ends {
    known: Mutex<(HashMap<FileId, Known>, u64)>,
}

impl Ends {
    /// The process's: what every route's read of a transcript goes through.
    pub fn process() -> &'static Ends {
        static ENDS: OnceLock<Ends> = OnceLock::new();
        ENDS.get_or_init(Ends::default)
    }

    /// The end of the complete lines of `file` (the file `key` names, `len` bytes long now), as
    /// [`complete_end`] finds it, reading only past what is remembered of it.
    pub fn complete_end<F: Read + Seek>(
        &self,
        file: &mut F,
        key: FileId,
        len: u64,
    ) -> io::Result<u64> {
        if !key.is_known() {
            return complete_end(file, len);
        }
        let known = self.lock().0.get(&key).cloned();
        let end = match known {
            Some(k) if k.searched <= len && still(file, &k)? => {
                match complete_end_above(file, k.searched, len)? {
                    // Still torn: what was appended holds no newline either.
                    None => {
                        // (Unless another read remembered something else of it meanwhile.)
                        match self.lock().0.get_mut(&key) {
                            Some(now) if now.at == k.at => now.searched = now.searched.max(len),
                            _ => {}
                        }
                        return Ok(k.end);
                    }
                    Some(end) => end,
                }
            }
            _ => complete_end(file, len)?,
        };
        self.remember(file, key, end, len)?;
        Ok(end)
    }

    /// Remembers (or forgets) `key` after a search that found its complete lines end at `end`.
    /// A file with no complete line yet is told apart by its torn line's first bytes.
    fn remember<F: Read + Seek>(
        &self,
        file: &mut F,
        key: FileId,
        end: u64,
        len: u64,
    ) -> io::Result<()> {
        if len - end < REMEMBER_FROM {
            self.lock().0.remove(&key);
            return Ok(());
        }
        let (id, tail) = (file_id(file, end)?, tail_before(file, end)?);
        let torn = torn_start(file, end)?;
        let mut all = self.lock();
        let (known, count) = &mut *all;
        *count += 1;
        if known.len() >= MOST && !known.contains_key(&key) {
            if let Some(oldest) = known.iter().min_by_key(|(_, k)| k.at).map(|(key, _)| *key) {
                known.remove(&oldest);
            }
        }
        let at = *count;
        known.insert(
            key,
            Known {
                end,
                searched: len,
                id,
                tail,
                torn,
                at,
            },
        );
        Ok(())
    }

    /// How many files are remembered.
    pub fn len(&self) -> usize {
        self.lock().0.len()
    }

    /// Whether no file is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<FileId, Known>, u64)> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether `file` still holds what `known` was told apart by: a newline just before its end,
/// the bytes before that, the same head, and the same start of the torn line.
fn still<F: Read + Seek>(file: &mut F, known: &Known) -> io::Result<bool> {
    Ok(tail_before(file, known.end)? == known.tail
        && file_id(file, known.end)? == known.id
        && torn_start(file, known.end)? == known.torn)
}

/// The first [`TAIL_BYTES`] of the torn line starting at `end` (a remembered one is longer).
fn torn_start<F: Read + Seek>(file: &mut F, end: u64) -> io::Result<Vec<u8>> {
    read_exact_at(file, end, TAIL_BYTES as usize)
}

/// The end of the complete lines of an open transcript, `meta` its metadata, through the
/// process's [`Ends`].
pub fn complete_end_of(file: &mut std::fs::File, meta: &std::fs::Metadata) -> io::Result<u64> {
    Ends::process().complete_end(file, FileId::of(meta), meta.len())
}
