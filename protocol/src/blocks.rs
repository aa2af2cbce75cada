//! Finding lines in a byte region read in blocks: backwards from its end ([`BackWalk`]),
//! forwards from an offset ([`ForwardWalk`]), and the bisection of a file whose lines' seqs grow
//! ([`SeqSeek`]). One implementation, shared by the server (driven by a file) and the client
//! (driven by its async `Store`).
//!
//! Sans I/O: a walk never reads. It answers [`Step::Read`] with the bytes it needs next, the
//! driver reads them however it reads and hands them back with `feed`, and the walk answers
//! [`Step::Line`] when a line is whole. Linear in the bytes read: each byte is searched for a
//! newline once and copied once, into the line it belongs to, however many blocks that line
//! spans. A walk holds at most the line it is assembling plus one block, and reads nothing the
//! caller does not ask for: a caller that stops after the line it needs reads no further.
//!
//! A line is the bytes between two `\n` (no `\n` in it, a `\r` before the `\n` kept: what a line
//! means is the caller's policy). The last line of a region may lack its `\n` (a torn tail, a
//! writer mid-line); [`Found::newline`] says which.

/// The largest read a walk asks for.
pub const BLOCK: usize = 64 * 1024;
/// The first read of a backward walk: most reads want a few lines. Reads then double up to
/// [`BLOCK`].
pub const FIRST_BLOCK: usize = 8 * 1024;

/// A line found in a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Where the line starts in the region's file.
    pub offset: u64,
    /// Its bytes, without its `\n`.
    pub bytes: Vec<u8>,
    /// Whether a `\n` ends it (`false` only for a region's last line: a torn tail).
    pub newline: bool,
    /// How many bytes of the line's end were left out of `bytes`: 0 unless a walk with a line
    /// bound ([`BackWalk::with_line_bound`]) cut a longer line to its head.
    pub skipped: u64,
}

impl Found {
    /// The offset just past the line's `\n` (or its last byte when it has none).
    pub fn end(&self) -> u64 {
        self.offset + self.bytes.len() as u64 + self.skipped + u64::from(self.newline)
    }
}

/// What a walk wants next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The next line.
    Line(Found),
    /// Read `len` bytes at `at` and `feed` them.
    Read {
        /// The file offset of the first byte wanted.
        at: u64,
        /// How many bytes.
        len: usize,
    },
    /// No more lines in the region.
    Done,
}

/// The lines of the region `[floor, end)`, newest first. `end` must be a line boundary (the
/// region's end or just after a `\n`); `floor` is where the region starts, a line start.
#[derive(Debug, Clone)]
pub struct BackWalk {
    floor: u64,
    /// Bytes below `pos` (down to `floor`) are not read yet.
    pos: u64,
    /// Blocks read and not yet handed out, newest first: together (oldest first) the bytes from
    /// `pos` to the end of the line being assembled, its `\n` excluded. Only the last (oldest)
    /// may hold a `\n`; the others were searched already.
    blocks: Vec<Vec<u8>>,
    /// Whether the line being assembled has a `\n` after it (`None` until the region's newest
    /// byte has been read).
    newline: Option<bool>,
    /// The size of the next read.
    block: usize,
    max_block: usize,
    /// The longest line handed out whole; a longer one is handed out as its head.
    line_bound: Option<usize>,
    /// Bytes of the line being assembled dropped from its newest end (beyond the bound).
    dropped: u64,
    done: bool,
}

impl BackWalk {
    /// A walk over `[floor, end)`, reading [`FIRST_BLOCK`] and then up to [`BLOCK`] at a time.
    pub fn new(floor: u64, end: u64) -> BackWalk {
        BackWalk {
            floor,
            pos: end,
            blocks: Vec::new(),
            newline: None,
            block: FIRST_BLOCK,
            max_block: BLOCK,
            line_bound: None,
            dropped: 0,
            done: end <= floor,
        }
    }

    /// The same walk reading `first` bytes and then up to `max` at a time (both at least 1).
    pub fn with_blocks(mut self, first: usize, max: usize) -> BackWalk {
        self.block = first.max(1);
        self.max_block = max.max(1);
        self
    }

    /// The same walk holding at most about `bound` bytes of a line (plus two blocks): a line
    /// longer than `bound` is still read (its start must be found), but its newest bytes are
    /// dropped as the walk goes, and it is handed out cut to its first `bound` bytes (its head:
    /// enough for [`crate::Line::seq_of_head`]) with [`Found::skipped`] counting the rest.
    pub fn with_line_bound(mut self, bound: usize) -> BackWalk {
        self.line_bound = Some(bound);
        self
    }

    /// Where the bytes not read yet end: the walk has read `[unread_end(), end)`.
    pub fn unread_end(&self) -> u64 {
        self.pos
    }

    /// How many bytes of the line being assembled were read so far (when [`BackWalk::step`]
    /// asks for a read: a caller that wants no line that long stops here).
    pub fn pending(&self) -> usize {
        self.blocks.iter().map(Vec::len).sum()
    }

    /// The next line, or the read it needs first.
    pub fn step(&mut self) -> Step {
        if self.done {
            return Step::Done;
        }
        if self.newline.is_some() {
            let oldest = self.blocks.last().map(Vec::as_slice).unwrap_or_default();
            if let Some(i) = memchr::memrchr(b'\n', oldest) {
                let offset = self.pos + i as u64 + 1;
                return Step::Line(self.take(i + 1, offset, Some(i)));
            }
            if self.pos == self.floor {
                self.done = true;
                return Step::Line(self.take(0, self.floor, None));
            }
        }
        let len = self.block.min((self.pos - self.floor) as usize);
        self.block = (self.block * 2).min(self.max_block);
        Step::Read {
            at: self.pos - len as u64,
            len,
        }
    }

    /// Hands the walk the bytes its last [`Step::Read`] asked for, or a non-empty part of them
    /// that ends where they end (a shorter read of the newest bytes wanted).
    ///
    /// # Panics
    /// When `bytes` is empty or longer than what is left to read: a driver that does not
    /// read what it was asked would otherwise loop or misplace lines.
    pub fn feed(&mut self, mut bytes: Vec<u8>) {
        assert!(
            !bytes.is_empty() && bytes.len() as u64 <= self.pos - self.floor,
            "a walk is fed the bytes it asked for"
        );
        self.pos -= bytes.len() as u64;
        if self.newline.is_none() {
            let newline = bytes.last() == Some(&b'\n');
            if newline {
                bytes.pop();
            }
            self.newline = Some(newline);
        }
        self.blocks.push(bytes);
        if let Some(bound) = self.line_bound {
            // The blocks between the newest and the oldest hold no `\n`: all of them belong to
            // the line being assembled. Once they hold its first `bound` bytes (the oldest block
            // may hold more), the newest block is not needed for the head.
            let mut middle: usize = self.blocks[1..].iter().rev().skip(1).map(Vec::len).sum();
            while self.blocks.len() >= 3 && middle >= bound {
                self.dropped += self.blocks.remove(0).len() as u64;
                middle -= self.blocks[0].len();
            }
        }
    }

    /// Hands out the line whose bytes start at `from` in the oldest block (at file `offset`),
    /// keeping the oldest block's bytes before `cut` (its `\n`) for the lines before it.
    fn take(&mut self, from: usize, offset: u64, cut: Option<usize>) -> Found {
        let mut blocks = std::mem::take(&mut self.blocks);
        let mut oldest = blocks.pop().unwrap_or_default();
        let newer_len: usize = blocks.iter().map(Vec::len).sum();
        let whole = (oldest.len() - from + newer_len) as u64 + std::mem::take(&mut self.dropped);
        let keep = self.line_bound.map_or(whole, |b| whole.min(b as u64)) as usize;
        let mut bytes = Vec::with_capacity(keep);
        for part in std::iter::once(&oldest[from..]).chain(blocks.iter().rev().map(Vec::as_slice)) {
            let room = keep - bytes.len();
            bytes.extend_from_slice(&part[..part.len().min(room)]);
        }
        if let Some(cut) = cut {
            oldest.truncate(cut);
            self.blocks.push(oldest);
        }
        let newline = self.newline.replace(true).unwrap_or(true);
        Found {
            offset,
            bytes,
            newline,
            skipped: whole - keep as u64,
        }
    }
}

/// The lines that start at or after `from` in the region `[.., end)`, oldest first. When `from`
/// is not a line start, the line it falls in is skipped (the walk reads from `from - 1` to tell).
#[derive(Debug, Clone)]
pub struct ForwardWalk {
    end: u64,
    /// The file offset of `buf[0]`.
    base: u64,
    /// Bytes read from `base`; those before `start` were handed out.
    buf: Vec<u8>,
    /// Where the line being assembled starts in `buf`.
    start: usize,
    /// Where the search for its `\n` goes on.
    scanned: usize,
    /// Still inside the line before the first line start.
    skipping: bool,
    block: usize,
    /// The most bytes of a line kept ([`ForwardWalk::with_line_bound`]).
    line_bound: Option<usize>,
    /// The bytes of the line being assembled dropped past the bound (they lie in the file
    /// after `buf[start..start + bound]`).
    dropped: u64,
}

impl ForwardWalk {
    /// The lines starting at or after `from`, up to `end`.
    pub fn new(from: u64, end: u64) -> ForwardWalk {
        let base = from.saturating_sub(1).min(end);
        ForwardWalk {
            end,
            base,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            skipping: from > 0,
            block: FIRST_BLOCK,
            line_bound: None,
            dropped: 0,
        }
    }

    /// The same walk reading up to `block` bytes at a time (at least 1).
    pub fn with_block(mut self, block: usize) -> ForwardWalk {
        self.block = block.max(1);
        self
    }

    /// The same walk holding at most `bound` bytes of a line (plus a block): a longer line is
    /// still read to its end (the next one starts there), but its bytes past the bound are
    /// dropped as they come, and it is handed out cut to its first `bound` bytes (its head:
    /// enough for [`crate::Line::seq_of_head`]) with [`Found::skipped`] counting the rest.
    pub fn with_line_bound(mut self, bound: usize) -> ForwardWalk {
        self.line_bound = Some(bound);
        self
    }

    /// The file offset just past the bytes read so far.
    fn read_end(&self) -> u64 {
        self.base + self.buf.len() as u64 + self.dropped
    }

    /// Where the next line starts (or would: the offset up to which lines were handed out).
    pub fn next_start(&self) -> u64 {
        self.base + self.start as u64
    }

    /// The next line, or the read it needs first. A last line without a `\n` is handed out
    /// with [`Found::newline`] false once the region's end is read.
    pub fn step(&mut self) -> Step {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let nl = self.scanned + i;
                let (from, offset) = (self.start, self.base + self.start as u64);
                if self.dropped > 0 {
                    // A line cut to its head: what follows it starts `dropped` further on in
                    // the file than in `buf`, so the walk moves on from there.
                    return Step::Line(self.cut_line(from, nl, true));
                }
                self.start = nl + 1;
                self.scanned = nl + 1;
                if std::mem::take(&mut self.skipping) {
                    continue;
                }
                let head_end = self
                    .line_bound
                    .map_or(nl, |b| nl.min(from.saturating_add(b)));
                return Step::Line(Found {
                    offset,
                    bytes: self.buf[from..head_end].to_vec(),
                    newline: true,
                    skipped: (nl - head_end) as u64,
                });
            }
            self.scanned = self.buf.len();
            if let Some(bound) = self.line_bound.filter(|_| !self.skipping) {
                // Only the line's head is kept.
                let head_end = self.start.saturating_add(bound);
                if self.buf.len() > head_end {
                    self.dropped += (self.buf.len() - head_end) as u64;
                    self.buf.truncate(head_end);
                    self.scanned = head_end;
                }
            }
            let read_end = self.read_end();
            if read_end >= self.end {
                if self.skipping || (self.start == self.buf.len() && self.dropped == 0) {
                    self.start = self.buf.len();
                    return Step::Done;
                }
                if self.dropped > 0 {
                    let (from, to) = (self.start, self.buf.len());
                    return Step::Line(self.cut_line(from, to, false));
                }
                let (from, offset) = (self.start, self.base + self.start as u64);
                let head_end = self
                    .line_bound
                    .map_or(self.buf.len(), |b| (from + b).min(self.buf.len()));
                let skipped = (self.buf.len() - head_end) as u64;
                self.start = self.buf.len();
                self.scanned = self.buf.len();
                return Step::Line(Found {
                    offset,
                    bytes: self.buf[from..head_end].to_vec(),
                    newline: false,
                    skipped,
                });
            }
            return Step::Read {
                at: read_end,
                len: self.block.min((self.end - read_end) as usize),
            };
        }
    }

    /// Hands out the line starting at `buf[from]`, whose bytes past the bound were dropped,
    /// ending at `buf[to]` (its `\n`, when `newline`), and moves the walk past it.
    fn cut_line(&mut self, from: usize, to: usize, newline: bool) -> Found {
        let bound = self.line_bound.unwrap_or(0);
        let head_end = from.saturating_add(bound).min(to);
        let found = Found {
            offset: self.base + from as u64,
            bytes: self.buf[from..head_end].to_vec(),
            newline,
            skipped: self.dropped + (to - head_end) as u64,
        };
        let past = (to + usize::from(newline)).min(self.buf.len());
        self.base += past as u64 + self.dropped;
        self.buf.drain(..past);
        (self.start, self.scanned, self.dropped) = (0, 0, 0);
        found
    }

    /// Hands the walk the bytes its last [`Step::Read`] asked for, or a non-empty prefix of
    /// them (a short read).
    ///
    /// # Panics
    /// When `bytes` is empty or reaches past the region's end.
    pub fn feed(&mut self, bytes: &[u8]) {
        let read_end = self.read_end();
        assert!(
            !bytes.is_empty() && bytes.len() as u64 <= self.end - read_end,
            "a walk is fed the bytes it asked for"
        );
        // Drop what was handed out (or skipped) before growing: the bytes kept are the part of
        // one line read so far, and once dropped to the front they are never moved again.
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.base += self.start as u64;
            self.scanned -= self.start;
            self.start = 0;
        }
        if self.skipping {
            // Nothing before the first line start is kept.
            self.base += self.buf.len() as u64;
            self.buf.clear();
            self.scanned = 0;
        }
        self.buf.extend_from_slice(bytes);
    }
}

/// A bisection by byte offset for where a seq starts in a region whose lines' seqs grow.
///
/// It finds a line boundary `b` such that every line ending at or before `b` has a seq below
/// `seq` and every readable line starting at or after it has a seq of `seq` or more, to within
/// one [`BLOCK`] (or one long line): a backward walk from `b` that skips lines at or above
/// `seq` then reads at most a block more than it keeps. O(log size) probes of a line or two.
///
/// Each [`Seek::Probe`] asks the driver for the first line starting at or after `from` and
/// before `until` (a [`ForwardWalk`] finds it) that the driver can read, answered with
/// [`SeqSeek::answer`].
#[derive(Debug, Clone)]
pub struct SeqSeek {
    seq: u64,
    lo: u64,
    hi: u64,
    /// Probes look below this (at most `hi`): no line starts in `[cap, hi)`.
    cap: u64,
}

/// What a [`SeqSeek`] wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seek {
    /// Find the first readable line starting in `[from, until)`.
    Probe {
        /// The offset to look from (not necessarily a line start).
        from: u64,
        /// The offset before which the line must start.
        until: u64,
    },
    /// The boundary found.
    Done(u64),
}

/// The answer to a [`Seek::Probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    /// The first line start at or after `from` (`until` when none is before it).
    pub first: u64,
    /// The first line from `first` the driver could read, before `until`: its start, its seq
    /// and the offset just past its `\n`. `None` when every line there is unreadable.
    pub line: Option<(u64, u64, u64)>,
}

impl SeqSeek {
    /// A search over the lines in `[floor, end)` for where `seq` starts; both line boundaries.
    pub fn new(floor: u64, end: u64, seq: u64) -> SeqSeek {
        SeqSeek {
            seq,
            lo: floor,
            hi: end,
            cap: end,
        }
    }

    /// The lower bound so far: every readable line ending at or before it has a seq below the
    /// one sought. Once [`Seek::Done`], the exact split is a line start in `[low, done]`: a
    /// caller that needs it exact walks forward from here (at most a block, or one long line).
    pub fn low(&self) -> u64 {
        self.lo
    }

    /// The next probe, or the boundary found.
    pub fn step(&self) -> Seek {
        if self.cap.saturating_sub(self.lo) <= BLOCK as u64 {
            return Seek::Done(self.hi);
        }
        Seek::Probe {
            from: self.lo + (self.cap - self.lo) / 2,
            until: self.cap,
        }
    }

    /// Narrows the search by what the last probe found.
    pub fn answer(&mut self, probed: Probed) {
        let from = self.lo + (self.cap - self.lo) / 2;
        match probed.line {
            // No line starts in `[from, cap)` (one long line spans it): look below.
            _ if probed.first >= self.cap => self.cap = from,
            Some((start, seq, _)) if seq >= self.seq => (self.hi, self.cap) = (start, start),
            Some((_, _, end)) => self.lo = end,
            // Only unreadable lines from `first`: they split the same way on either side.
            None => (self.hi, self.cap) = (probed.first, probed.first),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator (no dependency): xorshift.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Splits `text[floor..end]` the obvious way: the reference.
    fn reference(text: &[u8], floor: usize, end: usize) -> Vec<Found> {
        let region = &text[floor..end];
        let mut out = Vec::new();
        let mut at = 0;
        while at < region.len() {
            match region[at..].iter().position(|&b| b == b'\n') {
                Some(i) => {
                    out.push(Found {
                        offset: (floor + at) as u64,
                        bytes: region[at..at + i].to_vec(),
                        newline: true,
                        skipped: 0,
                    });
                    at += i + 1;
                }
                None => {
                    out.push(Found {
                        offset: (floor + at) as u64,
                        bytes: region[at..].to_vec(),
                        newline: false,
                        skipped: 0,
                    });
                    at = region.len();
                }
            }
        }
        out
    }

    /// Drives a backward walk, feeding random suffixes of what it asks; counts bytes fed.
    fn walk_back(text: &[u8], walk: &mut BackWalk, rng: &mut Rng) -> (Vec<Found>, usize) {
        let (mut out, mut fed) = (Vec::new(), 0);
        loop {
            match walk.step() {
                Step::Done => return (out, fed),
                Step::Line(found) => out.push(found),
                Step::Read { at, len } => {
                    let n = 1 + rng.below(len as u64) as usize;
                    let end = at as usize + len;
                    walk.feed(text[end - n..end].to_vec());
                    fed += n;
                }
            }
        }
    }

    fn walk_forward(text: &[u8], walk: &mut ForwardWalk, rng: &mut Rng) -> Vec<Found> {
        let mut out = Vec::new();
        loop {
            match walk.step() {
                Step::Done => return out,
                Step::Line(found) => out.push(found),
                Step::Read { at, len } => {
                    let n = 1 + rng.below(len as u64) as usize;
                    walk.feed(&text[at as usize..at as usize + n]);
                }
            }
        }
    }

    /// `line` as a walk bounded to `bound` bytes hands it out: cut to its head.
    fn cut(mut line: Found, bound: usize) -> Found {
        let keep = line.bytes.len().min(bound);
        line.skipped = (line.bytes.len() - keep) as u64;
        line.bytes.truncate(keep);
        line
    }

    /// Random text: short lines, lines longer than any block, empty lines, CRLF endings, and
    /// sometimes a torn tail.
    fn random_text(rng: &mut Rng) -> Vec<u8> {
        let mut text = Vec::new();
        for _ in 0..rng.below(30) {
            let len = match rng.below(4) {
                0 => 0,
                1 => rng.below(5_000) as usize,
                _ => rng.below(40) as usize,
            };
            text.extend((0..len).map(|i| b'a' + (i % 26) as u8));
            if rng.below(4) == 0 {
                text.push(b'\r');
            }
            text.push(b'\n');
        }
        if rng.below(3) == 0 {
            text.extend_from_slice(b"{\"seq\":9,\"ts\":1");
        }
        text
    }

    #[test]
    fn backward_and_forward_walks_split_like_the_reference() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..2_000 {
            let text = random_text(&mut rng);
            let lines = reference(&text, 0, text.len());
            // A floor and an end at line boundaries.
            let bounds: Vec<usize> = std::iter::once(0)
                .chain(lines.iter().map(|l| l.end() as usize))
                .collect();
            let a = bounds[rng.below(bounds.len() as u64) as usize];
            let b = bounds[rng.below(bounds.len() as u64) as usize];
            let (floor, end) = (a.min(b), a.max(b));
            let first = 1 + rng.below(300) as usize;
            let max = first + rng.below(3_000) as usize;
            let mut walk = BackWalk::new(floor as u64, end as u64).with_blocks(first, max);
            let (mut back, fed) = walk_back(&text, &mut walk, &mut rng);
            back.reverse();
            assert_eq!(back, reference(&text, floor, end), "case {case}");
            assert_eq!(fed, end - floor, "case {case}: each byte read once");

            // Forwards from any offset: the lines starting at or after it.
            let from = rng.below(text.len() as u64 + 1);
            let mut walk =
                ForwardWalk::new(from, text.len() as u64).with_block(1 + rng.below(500) as usize);
            let expected: Vec<Found> = reference(&text, 0, text.len())
                .into_iter()
                .filter(|l| l.offset >= from)
                .collect();
            assert_eq!(
                walk_forward(&text, &mut walk, &mut rng),
                expected,
                "case {case}"
            );
        }
    }

    #[test]
    fn a_bounded_walk_hands_out_long_lines_cut_to_their_heads_holding_little() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..2_000 {
            let text = random_text(&mut rng);
            let bound = rng.below(3_000) as usize;
            let (first, max) = (1 + rng.below(300) as usize, 1 + rng.below(2_000) as usize);
            let mut walk = BackWalk::new(0, text.len() as u64)
                .with_blocks(first, max)
                .with_line_bound(bound);
            let (mut lines, mut fed) = (Vec::new(), 0);
            loop {
                match walk.step() {
                    Step::Done => break,
                    Step::Line(found) => lines.push(found),
                    Step::Read { at, len } => {
                        let n = 1 + rng.below(len as u64) as usize;
                        let end = at as usize + len;
                        walk.feed(text[end - n..end].to_vec());
                        fed += n;
                        let held = walk.pending();
                        assert!(held <= bound + 2 * max.max(first), "case {case}: {held}");
                    }
                }
            }
            lines.reverse();
            let expected: Vec<Found> = reference(&text, 0, text.len())
                .into_iter()
                .map(|line| cut(line, bound))
                .collect();
            assert_eq!(lines, expected, "case {case}");
            assert_eq!(fed, text.len(), "case {case}: each byte read once");
        }
    }

    #[test]
    fn a_bounded_forward_walk_hands_out_long_lines_cut_to_their_heads_holding_little() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..2_000 {
            let text = random_text(&mut rng);
            let bound = rng.below(3_000) as usize;
            let block = 1 + rng.below(500) as usize;
            let from = rng.below(text.len() as u64 + 1);
            let mut walk = ForwardWalk::new(from, text.len() as u64)
                .with_block(block)
                .with_line_bound(bound);
            let (mut lines, mut fed) = (Vec::new(), 0);
            loop {
                match walk.step() {
                    Step::Done => break,
                    Step::Line(found) => lines.push(found),
                    Step::Read { at, len } => {
                        let n = 1 + rng.below(len as u64) as usize;
                        walk.feed(&text[at as usize..at as usize + n]);
                        fed += n;
                        let held = walk.buf.len() - walk.start;
                        assert!(held <= bound + block, "case {case}: {held}");
                    }
                }
            }
            let expected: Vec<Found> = reference(&text, 0, text.len())
                .into_iter()
                .filter(|l| l.offset >= from)
                .map(|line| cut(line, bound))
                .collect();
            assert_eq!(lines, expected, "case {case}");
            let start = from.saturating_sub(1) as usize;
            assert_eq!(fed, text.len() - start, "case {case}: each byte read once");
        }
    }

    #[test]
    fn a_bounded_walk_finds_the_head_of_a_long_line_holding_a_few_blocks() {
        let mut text = b"{\"seq\":1}\n{\"seq\":2,\"x\":\"".to_vec();
        text.extend(vec![b'x'; 40 * BLOCK]);
        text.extend_from_slice(b"\"}\n");
        let mut walk = BackWalk::new(0, text.len() as u64).with_line_bound(100);
        let (mut most, mut lines) = (0, Vec::new());
        loop {
            match walk.step() {
                Step::Line(found) => lines.push(found),
                Step::Read { at, len } => {
                    walk.feed(text[at as usize..at as usize + len].to_vec());
                    most = most.max(walk.pending());
                }
                Step::Done => break,
            }
        }
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].bytes.len(), 100);
        assert_eq!(crate::Line::seq_of_head(&lines[0].bytes), Some(2));
        assert_eq!(lines[0].end(), text.len() as u64);
        assert_eq!(lines[1].bytes, b"{\"seq\":1}");
        assert!(
            most <= 3 * BLOCK,
            "held {most} bytes of a {} byte line",
            40 * BLOCK
        );
    }

    #[test]
    fn crlf_keeps_its_cr_and_a_torn_tail_is_marked() {
        let text = b"one\r\ntwo\r\nthr";
        let mut walk = BackWalk::new(0, text.len() as u64);
        let (lines, _) = walk_back(text, &mut walk, &mut Rng(7));
        let got: Vec<(&[u8], bool)> = lines
            .iter()
            .map(|l| (l.bytes.as_slice(), l.newline))
            .collect();
        assert_eq!(
            got,
            [
                (&b"thr"[..], false),
                (&b"two\r"[..], true),
                (&b"one\r"[..], true)
            ]
        );
    }

    #[test]
    fn a_walk_that_stops_after_a_short_line_reads_nothing_of_a_long_one_before_it() {
        let mut text = vec![b'x'; 10 * BLOCK];
        text.extend_from_slice(b"\n{\"seq\":2}\n");
        let mut walk = BackWalk::new(0, text.len() as u64);
        let mut fed = 0;
        let line = loop {
            match walk.step() {
                Step::Line(found) => break found,
                Step::Read { at, len } => {
                    walk.feed(text[at as usize..at as usize + len].to_vec());
                    fed += len;
                }
                Step::Done => unreachable!(),
            }
        };
        assert_eq!(line.bytes, b"{\"seq\":2}");
        assert!(fed <= FIRST_BLOCK, "read {fed} bytes for a 10-byte line");
    }

    #[test]
    fn a_long_line_is_assembled_in_linear_work() {
        // 8 MiB in 8 KiB..64 KiB blocks: copying the line so far per block would move ~1 GiB.
        let mut text = vec![b'y'; 8 << 20];
        text.push(b'\n');
        let mut walk = BackWalk::new(0, text.len() as u64);
        let (lines, fed) = walk_back(&text, &mut walk, &mut Rng(3));
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].bytes.len(), 8 << 20);
        assert_eq!(fed, text.len());
    }

    /// Drives a seq seek over lines `{"seq":N}`, some unreadable.
    fn seek(text: &[u8], seq: u64) -> u64 {
        let mut seek = SeqSeek::new(0, text.len() as u64, seq);
        loop {
            match seek.step() {
                Seek::Done(at) => return at,
                Seek::Probe { from, until } => {
                    let mut walk = ForwardWalk::new(from, until);
                    let mut first = None;
                    let mut line = None;
                    loop {
                        match walk.step() {
                            Step::Read { at, len } => {
                                walk.feed(&text[at as usize..at as usize + len])
                            }
                            Step::Line(found) if found.newline => {
                                first.get_or_insert(found.offset);
                                let seq = std::str::from_utf8(&found.bytes)
                                    .ok()
                                    .and_then(|s| s.strip_prefix("{\"seq\":"))
                                    .and_then(|s| s.strip_suffix('}'))
                                    .and_then(|s| s.parse().ok());
                                if let Some(seq) = seq {
                                    line = Some((found.offset, seq, found.end()));
                                    break;
                                }
                            }
                            _ => break,
                        }
                    }
                    seek.answer(Probed {
                        first: first.unwrap_or(until),
                        line,
                    });
                }
            }
        }
    }

    #[test]
    fn the_seek_lands_within_a_block_above_the_split() {
        let mut rng = Rng(11);
        let mut text = Vec::new();
        let mut starts = Vec::new();
        for seq in 1..=60_000u64 {
            starts.push((text.len(), seq));
            if rng.below(10) == 0 {
                text.extend_from_slice(b"garbage\n");
            }
            text.extend_from_slice(format!("{{\"seq\":{seq}}}\n").as_bytes());
            if rng.below(2_000) == 0 {
                text.extend(vec![b'z'; 3 * BLOCK]);
                text.push(b'\n');
            }
        }
        for seq in [1, 2, 77, 30_000, 59_999, 60_000, 60_001] {
            let at = seek(&text, seq) as usize;
            assert!(at == text.len() || text[at - 1] == b'\n', "a boundary");
            // Every line ending at or before `at`... well, every readable line at or after
            // `at` has a seq of `seq` or more, and the split is at most a block (or a long
            // line) below `at`.
            let split = starts
                .iter()
                .find(|(_, s)| *s >= seq)
                .map_or(text.len(), |(o, _)| *o);
            assert!(at >= split, "seq {seq}: {at} below the split {split}");
            let between = &text[split..at];
            let longest = between.split(|&b| b == b'\n').map(<[u8]>::len).max();
            assert!(
                between.len() <= BLOCK + longest.unwrap_or(0),
                "seq {seq}: {} bytes between the split and the seek",
                between.len()
            );
        }
    }
}
