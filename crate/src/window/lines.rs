//! Reading a JSONL chat file in blocks through the [`Store`]: the header, lines backwards from an
//! offset, line starts forwards. Never the whole file for a window: a read costs the bytes of the
//! lines it returns plus at most one block.
//!
//! A line is the bytes up to and including its `\n`; the last line of a file may lack the `\n`.

use super::WindowError;
use crate::protocol::{BackWalk, Step};
use crate::store::Store;

/// How many bytes one storage read asks for.
pub(super) const BLOCK: usize = 64 * 1024;

type Result<T> = std::result::Result<T, WindowError>;

/// The header's text: it must be UTF-8 (the app reads the chat's metadata from it).
fn text(bytes: Vec<u8>, offset: u64) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| WindowError::NotUtf8 { offset })
}

/// A message line's text, any byte that is not UTF-8 (a character torn by another writer)
/// shown as U+FFFD: one bad line never keeps a chat from opening. The file keeps its bytes
/// until the app writes that line again.
fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The header line (without its newline) and where the body starts: just after the header's
/// newline, or the file's end when the header has none.
pub(super) async fn read_header<S: Store>(
    store: &S,
    path: &str,
    size: u64,
) -> Result<(String, u64)> {
    let mut header = Vec::new();
    while (header.len() as u64) < size {
        let block = store.read(path, header.len() as u64, BLOCK).await?;
        if block.is_empty() {
            break;
        }
        if let Some(i) = block.iter().position(|&b| b == b'\n') {
            header.extend_from_slice(&block[..i]);
            let body_start = header.len() as u64 + 1;
            return Ok((text(header, 0)?, body_start));
        }
        header.extend_from_slice(&block);
    }
    let body_start = header.len() as u64;
    Ok((text(header, 0)?, body_start))
}

/// Whether a window may start at `offset`: the start of the body, the end of the file, or just
/// after a newline.
pub(super) async fn is_line_boundary<S: Store>(
    store: &S,
    path: &str,
    offset: u64,
    body_start: u64,
    size: u64,
) -> Result<bool> {
    if offset == body_start || offset == size {
        return Ok(true);
    }
    Ok(store.read(path, offset - 1, 1).await? == b"\n")
}

/// Whether the file's last byte is a newline (true for an empty file: nothing to terminate).
pub(super) async fn ends_with_newline<S: Store>(store: &S, path: &str, size: u64) -> Result<bool> {
    if size == 0 {
        return Ok(true);
    }
    Ok(store.read(path, size - 1, 1).await? == b"\n")
}

/// Up to `max` lines that end at `end` (a line boundary), none starting before `floor` (the
/// body's start). Returns where the first of them starts (`end` when none) and the lines, oldest
/// first, without their newlines (raw: a `\r` before a `\n` is kept). The protocol's
/// [`BackWalk`] driven by the store.
pub(super) async fn lines_before<S: Store>(
    store: &S,
    path: &str,
    floor: u64,
    end: u64,
    max: usize,
) -> Result<(u64, Vec<String>)> {
    let mut newest_first: Vec<String> = Vec::new();
    let mut walk = BackWalk::new(floor, end).with_blocks(BLOCK, BLOCK);
    let mut first = end;
    while newest_first.len() < max {
        match walk.step() {
            Step::Line(found) => {
                newest_first.push(lossy(found.bytes));
                first = found.offset;
            }
            Step::Read { at, len } => {
                let block = store.read(path, at, len).await?;
                if block.len() != len {
                    // The file shrank under us; the caller's signature check will see it next
                    // time.
                    return Err(crate::store::StoreError::Io(
                        "chat file changed while reading".into(),
                    )
                    .into());
                }
                walk.feed(block);
            }
            Step::Done => break,
        }
    }
    newest_first.reverse();
    Ok((first, newest_first))
}

/// The start offset of every line in `[from, size)`, reading forwards (`from` is a boundary).
pub(super) async fn line_starts<S: Store>(
    store: &S,
    path: &str,
    from: u64,
    size: u64,
) -> Result<Vec<u64>> {
    let mut starts = Vec::new();
    if from < size {
        starts.push(from);
    }
    let mut pos = from;
    while pos < size {
        let block = store.read(path, pos, BLOCK).await?;
        if block.is_empty() {
            break;
        }
        for (i, _) in block.iter().enumerate().filter(|(_, &b)| b == b'\n') {
            let next = pos + i as u64 + 1;
            if next < size {
                starts.push(next);
            }
        }
        pos += block.len() as u64;
    }
    Ok(starts)
}
