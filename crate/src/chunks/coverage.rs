//! Coverage: each chunk covers the half-open seq range `[first, end)`; the suffix is the run of
//! adjacent chunks ending at the newest one, and the only part of the cache that is served.

/// What a chunk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A coalesced page; `end` is the `before` it was fetched with.
    Rows,
    /// An uncoalesced page or a closed live run; `end` is its newest seq + 1.
    Raw,
    /// The live run, appended to by the stream; `end` is its last line's seq + 1.
    Open,
}

/// One chunk: its coverage, kind, and the bytes of it that hold whole lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The seq of its oldest line.
    pub first: u64,
    /// One past the last seq it covers.
    pub end: u64,
    /// Rows, raw or open.
    pub kind: Kind,
    /// Its size in bytes: every byte is part of a whole line ending in `\n`.
    pub len: u64,
}

impl Chunk {
    /// Whether `seq` is inside `[first, end)`.
    pub fn covers(&self, seq: u64) -> bool {
        self.first <= seq && seq < self.end
    }

    /// Whether `[first, end)` shares a seq with this chunk.
    pub fn overlaps(&self, first: u64, end: u64) -> bool {
        first < self.end && self.first < end
    }
}

/// Sorts chunks by coverage; `false` when two overlap (that layout was not written by this
/// code).
pub fn sort_checked(chunks: &mut [Chunk]) -> bool {
    chunks.sort_by_key(|c| c.first);
    !chunks.windows(2).any(|w| w[0].end > w[1].first)
}

/// The index of the suffix's oldest chunk in sorted, non-overlapping `chunks`: the suffix is
/// `chunks[i..]`, the contiguous run of adjacent chunks that ends at the newest one.
pub fn suffix_start(chunks: &[Chunk]) -> usize {
    let mut i = chunks.len().saturating_sub(1);
    while i > 0 && chunks[i - 1].end == chunks[i].first {
        i -= 1;
    }
    i
}

/// The seqs the suffix covers continuously, `[first, end)`; `None` when there are no chunks.
pub fn suffix_range(chunks: &[Chunk]) -> Option<(u64, u64)> {
    let last = chunks.last()?;
    Some((chunks[suffix_start(chunks)].first, last.end))
}

/// The suffix chunk holding the line just before `before`: `None` (a miss) unless the suffix
/// covers `before - 1`, that is `first < before <= end`.
pub fn chunk_before(chunks: &[Chunk], before: u64) -> Option<usize> {
    let start = suffix_start(chunks);
    (start..chunks.len()).find(|&i| chunks[i].first < before && before <= chunks[i].end)
}

/// The `after` to send the server for a page before `before`: `end - 1` of the nearest chunk
/// whose `end <= before`, so the page stops where the cache already holds lines. `None` when no
/// chunk lies below `before`.
pub fn gap_after(chunks: &[Chunk], before: u64) -> Option<u64> {
    chunks
        .iter()
        .filter(|c| c.end <= before)
        .map(|c| c.end - 1)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(first: u64, end: u64, kind: Kind) -> Chunk {
        Chunk {
            first,
            end,
            kind,
            len: 1,
        }
    }

    #[test]
    fn the_suffix_is_the_adjacent_run_ending_at_the_newest_chunk() {
        // The seed's layout: 1-1650 rows, 1650-2001 rows, 2001-2400 raw, gap, 2600-open.
        let mut chunks = vec![
            c(2600, 2700, Kind::Open),
            c(1, 1650, Kind::Rows),
            c(2001, 2400, Kind::Raw),
            c(1650, 2001, Kind::Rows),
        ];
        assert!(sort_checked(&mut chunks));
        assert_eq!(suffix_range(&chunks), Some((2600, 2700)));
        assert_eq!(
            chunk_before(&chunks, 2600),
            None,
            "at the suffix's first: a miss"
        );
        assert_eq!(chunk_before(&chunks, 2601), Some(3));
        assert_eq!(chunk_before(&chunks, 2700), Some(3));
        assert_eq!(chunk_before(&chunks, 2701), None, "above its end: a miss");
        assert_eq!(gap_after(&chunks, 2600), Some(2399));
        assert_eq!(gap_after(&chunks, 1650), Some(1649));
        assert_eq!(gap_after(&chunks, 1649), None);

        chunks.insert(3, c(2400, 2600, Kind::Rows));
        assert_eq!(suffix_range(&chunks), Some((1, 2700)));
        assert_eq!(chunk_before(&chunks, 1650), Some(0));
        assert_eq!(chunk_before(&chunks, 1651), Some(1));
    }

    #[test]
    fn overlapping_chunks_are_refused() {
        let mut chunks = vec![c(5, 10, Kind::Raw), c(9, 12, Kind::Open)];
        assert!(!sort_checked(&mut chunks));
        assert!(c(5, 10, Kind::Raw).overlaps(9, 20));
        assert!(!c(5, 10, Kind::Raw).overlaps(10, 20));
        assert!(!c(5, 10, Kind::Raw).overlaps(1, 5));
    }
}
