//! The rows of one contiguous stretch of a transcript, grown at both ends.

use super::row::{Row, ToolOutput};
use crate::protocol::{continues, last_seq, EventKind, Line};
use std::collections::{HashMap, VecDeque};

/// Why a line or page was not taken. The transcript is left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    /// A newer line at or below what the transcript already covers: a repeat, or another
    /// transcript numbered from 1 again. Never folded in.
    #[error("line {got} is not newer than the transcript, which covers up to {through}")]
    NotNewer {
        /// The last seq the transcript covers.
        through: u64,
        /// The line's seq.
        got: u64,
    },
    /// An older page that reaches the transcript's first line or beyond.
    #[error("page covers up to {through}, not below the transcript's first line {first}")]
    NotOlder {
        /// The last seq the page covers.
        through: u64,
        /// The transcript's first seq.
        first: u64,
    },
    /// A page whose lines are not in increasing seq order.
    #[error("page is out of order at line {got}, after a line covering up to {through}")]
    PageOutOfOrder {
        /// The last seq covered before the offending line.
        through: u64,
        /// The offending line's seq.
        got: u64,
    },
}

/// What [`Transcript::push_newer`] changed, so a UI redraws only that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A row was added at the end.
    Added,
    /// The last row grew: a delta joined the assistant message.
    Grew,
    /// An earlier row changed: the row at this seq (a tool call got its result, a command its
    /// new state).
    Updated(u64),
}

/// Display rows for lines held in seq order, grown at the newest end by streaming
/// ([`Transcript::push_newer`], O(line) per line: a delta grows the last row, nothing is
/// re-folded) and at the oldest end by history pages ([`Transcript::push_older`], O(page):
/// a delta run cut by the page seam welds back into one row, and results whose calls were not
/// yet loaded attach to them).
///
/// The rows are a function of the lines alone: whatever pages and pushes bring the same lines
/// (raw or coalesced by [`crate::protocol::coalesce`]) gives the same rows. Every delta of a
/// message joins its row ([`continues`]: the protocol's row rule, [`crate::protocol::joins`],
/// without its clean-append test, since concatenated texts are the same however the server
/// folded them); what attaches is this module's display choice:
///
/// - a `toolResult` attaches to the latest earlier `toolCall` with its id that has no result
///   yet; without one it is a [`Row::ToolResult`] until its call is loaded;
/// - a `command` attaches to the earlier `command` row with its id while that is not `done`;
///   otherwise it starts a [`Row::Command`].
///
/// Lines whose seq does not grow are refused ([`FoldError`]): two transcripts both numbered
/// from 1 never mix. A gap in seqs is allowed (the rows on either side never join across it).
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    rows: VecDeque<Row>,
    /// The seqs the lines held cover: the oldest line's seq, the newest line's last seq.
    span: Option<(u64, u64)>,
    /// The oldest and newest lines held, when they are streamed text: the row rule is asked
    /// about them at the seams (nothing else joins, so other lines are not kept).
    oldest_text: Option<Line>,
    newest_text: Option<Line>,
    /// Tool calls without a result, by id, oldest first (row seqs).
    open_calls: HashMap<String, Vec<u64>>,
    /// Tool-result rows with no call, by id, oldest first (row seqs).
    loose_results: HashMap<String, VecDeque<u64>>,
    /// Command rows not done, by id (at most one each: a second one attaches to the first).
    open_commands: HashMap<String, u64>,
    /// The oldest command row of each id, the one an older open command would take in.
    first_commands: HashMap<String, u64>,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// The rows of `lines` (oldest first, raw or coalesced).
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a Line>) -> Result<Self, FoldError> {
        let mut t = Transcript::new();
        for line in lines {
            t.push_newer(line).map_err(|e| match e {
                FoldError::NotNewer { through, got } => FoldError::PageOutOfOrder { through, got },
                other => other,
            })?;
        }
        Ok(t)
    }

    /// A transcript that continues rows folded earlier (a screen saved by the page): `rows`, in
    /// seq order, as this fold made them, and `tail`, the newest line they cover, as the
    /// server sent it (it says whether the next delta joins the last row). Newer
    /// lines then fold onto it as they would onto the transcript that made the rows.
    ///
    /// Only for growing newer: the first row's line is not known, so an older page would not
    /// weld to it (callers in this crate never push one). `None` when the rows cannot be the
    /// fold's of lines ending at `tail`: empty, out of order, or past it, or a streamed `tail`
    /// that is not the last row's end.
    pub(crate) fn resumed(rows: Vec<Row>, tail: &Line) -> Option<Transcript> {
        let through = last_seq(tail);
        let first = rows.first()?.seq();
        let ordered = rows.windows(2).all(|w| w[0].seq() < w[1].seq());
        let covered = |row: &Row| match row {
            Row::Assistant { last_seq, .. } => *last_seq,
            other => other.seq(),
        };
        if !ordered || rows.iter().any(|r| covered(r) > through) {
            return None;
        }
        let newest_text = match (tail.kind(), rows.last()) {
            (EventKind::AssistantText, Some(Row::Assistant { last_seq, .. }))
                if *last_seq == through =>
            {
                Some(tail.clone())
            }
            (EventKind::AssistantText, _) => return None,
            _ => None,
        };
        let mut t = Transcript {
            span: Some((first, through)),
            newest_text,
            ..Transcript::default()
        };
        // The bookkeeping `take_row` keeps, as it left it for these rows.
        for row in &rows {
            match row {
                Row::Tool {
                    seq,
                    id,
                    result: None,
                    ..
                } => t.open_calls.entry(id.clone()).or_default().push(*seq),
                Row::ToolResult { seq, id, .. } => t
                    .loose_results
                    .entry(id.clone())
                    .or_default()
                    .push_back(*seq),
                Row::Command { seq, id, done, .. } => {
                    if !done {
                        t.open_commands.insert(id.clone(), *seq);
                    }
                    t.first_commands.entry(id.clone()).or_insert(*seq);
                }
                _ => {}
            }
        }
        t.rows = rows.into();
        Some(t)
    }

    /// The rows, oldest first.
    pub fn rows(&self) -> &VecDeque<Row> {
        &self.rows
    }

    /// Forgets everything (a reset that rebuilds from a new window, or a reload).
    pub fn clear(&mut self) {
        *self = Transcript::new();
    }

    /// Whether no line is held.
    pub fn is_empty(&self) -> bool {
        self.span.is_none()
    }

    /// The seq of the oldest line held.
    pub fn first_seq(&self) -> Option<u64> {
        self.span.map(|(first, _)| first)
    }

    /// The last seq the newest line held covers (for a coalesced line, its run's last delta).
    pub fn last_seq(&self) -> Option<u64> {
        self.span.map(|(_, last)| last)
    }

    /// Adds the next newer line: a delta that joins grows the last row, a result or command
    /// update changes its row, anything else adds a row.
    pub fn push_newer(&mut self, line: &Line) -> Result<Change, FoldError> {
        if let Some((_, through)) = self.span {
            if line.seq() <= through {
                return Err(FoldError::NotNewer {
                    through,
                    got: line.seq(),
                });
            }
        }
        let through = last_seq(line);
        if let Some(newest) = &self.newest_text {
            if continues(newest, line) {
                if let (Some(Row::Assistant { text, last_seq, .. }), Some(delta)) =
                    (self.rows.back_mut(), line.text())
                {
                    text.push_str(delta);
                    *last_seq = through;
                }
                self.span = self.span.map(|(first, _)| (first, through));
                self.newest_text = Some(line.clone());
                return Ok(Change::Grew);
            }
        }
        let text = (line.kind() == EventKind::AssistantText).then(|| line.clone());
        let change = self.take_row(Row::from_line(line));
        match &mut self.span {
            Some((_, last)) => *last = through,
            None => {
                self.span = Some((line.seq(), through));
                self.oldest_text = text.clone();
            }
        }
        self.newest_text = text;
        Ok(change)
    }

    /// Places a new row at the newest end, or attaches it to the row it belongs to.
    fn take_row(&mut self, row: Row) -> Change {
        let seq = row.seq();
        match &row {
            Row::ToolResult { id, .. } => {
                if let Some(call) = self.open_calls.get_mut(id).and_then(Vec::pop) {
                    let id = id.clone();
                    if self.open_calls.get(&id).is_some_and(Vec::is_empty) {
                        self.open_calls.remove(&id);
                    }
                    attach_result(&mut self.rows, call, row);
                    return Change::Updated(call);
                }
                self.loose_results
                    .entry(id.clone())
                    .or_default()
                    .push_back(seq);
            }
            Row::Command { id, done, .. } => {
                if let Some(&open) = self.open_commands.get(id) {
                    if *done {
                        self.open_commands.remove(id);
                    }
                    update_command(&mut self.rows, open, row);
                    return Change::Updated(open);
                }
                if !done {
                    self.open_commands.insert(id.clone(), seq);
                }
                self.first_commands.entry(id.clone()).or_insert(seq);
            }
            Row::Tool { id, .. } => self.open_calls.entry(id.clone()).or_default().push(seq),
            _ => {}
        }
        self.rows.push_back(row);
        Change::Added
    }

    /// Adds a page of older lines (oldest first, raw or coalesced) below what is held. A delta
    /// run cut at the seam welds into one row; results and command updates held here whose
    /// calls and commands the page brings attach to them. A page that reaches into what is
    /// held, or is out of order, is refused and nothing changes.
    pub fn push_older(&mut self, page: &[Line]) -> Result<(), FoldError> {
        self.push_older_folded(Transcript::from_lines(page)?)
    }

    /// [`Transcript::push_older`] with the page already folded on its own
    /// ([`Transcript::from_lines`]): a page read ahead is folded before the reader asks for it.
    pub fn push_older_folded(&mut self, older: Transcript) -> Result<(), FoldError> {
        let Some((_, through)) = older.span else {
            return Ok(());
        };
        let Some((first, _)) = self.span else {
            *self = older;
            return Ok(());
        };
        if through >= first {
            return Err(FoldError::NotOlder { through, first });
        }
        self.prepend(older);
        Ok(())
    }

    /// Puts `older` (whose lines all come before ours) in front, welding at the seam.
    fn prepend(&mut self, mut older: Transcript) {
        // A message cut by the seam: the two lines that meet there.
        if let (Some(a), Some(b)) = (&older.newest_text, &self.oldest_text) {
            if continues(a, b) {
                if let (
                    Some(Row::Assistant { text, last_seq, .. }),
                    Some(Row::Assistant {
                        text: more,
                        last_seq: through,
                        ..
                    }),
                ) = (older.rows.back_mut(), self.rows.front())
                {
                    text.push_str(more);
                    *last_seq = *through;
                    self.rows.pop_front();
                }
            }
        }
        // Our loose results, oldest first, take the page's open calls, latest first: the same
        // pairing as pushing every line in order.
        for (id, mut calls) in std::mem::take(&mut older.open_calls) {
            if let Some(loose) = self.loose_results.get_mut(&id) {
                while let (Some(&result), Some(&call)) = (loose.front(), calls.last()) {
                    loose.pop_front();
                    calls.pop();
                    if let Some(row) = take_at(&mut self.rows, result) {
                        attach_result(&mut older.rows, call, row);
                    }
                }
                if loose.is_empty() {
                    self.loose_results.remove(&id);
                }
            }
            if !calls.is_empty() {
                let newer = self.open_calls.remove(&id).unwrap_or_default();
                calls.extend(newer);
                self.open_calls.insert(id, calls);
            }
        }
        for (id, seqs) in std::mem::take(&mut older.loose_results) {
            let slot = self.loose_results.entry(id).or_default();
            for seq in seqs.into_iter().rev() {
                slot.push_front(seq);
            }
        }
        // A command the page leaves open takes in our first command row of its id.
        for (id, open) in std::mem::take(&mut older.open_commands) {
            match self.first_commands.get(&id).copied() {
                Some(first) => {
                    let still_open = self.open_commands.get(&id) == Some(&first);
                    if let Some(row) = take_at(&mut self.rows, first) {
                        update_command(&mut older.rows, open, row);
                    }
                    if still_open {
                        self.open_commands.insert(id, open);
                    }
                }
                None => {
                    self.open_commands.insert(id, open);
                }
            }
        }
        for (id, seq) in std::mem::take(&mut older.first_commands) {
            self.first_commands.insert(id, seq);
        }
        while let Some(row) = older.rows.pop_back() {
            self.rows.push_front(row);
        }
        if let (Some((first, _)), Some((_, last))) = (older.span, self.span) {
            self.span = Some((first, last));
        }
        self.oldest_text = older.oldest_text;
    }
}

/// The index of the row at `seq` (rows are in seq order).
fn index_of(rows: &VecDeque<Row>, seq: u64) -> Option<usize> {
    rows.binary_search_by_key(&seq, Row::seq).ok()
}

/// Removes and returns the row at `seq`.
fn take_at(rows: &mut VecDeque<Row>, seq: u64) -> Option<Row> {
    index_of(rows, seq).and_then(|i| rows.remove(i))
}

/// Gives the call at `call` the result `result` (a [`Row::ToolResult`]).
fn attach_result(rows: &mut VecDeque<Row>, call: u64, result: Row) {
    let Row::ToolResult {
        seq,
        ts,
        output,
        is_error,
        ..
    } = result
    else {
        return;
    };
    if let Some(Row::Tool { result, .. }) = index_of(rows, call).map(|i| &mut rows[i]) {
        *result = Some(ToolOutput {
            seq,
            ts,
            output,
            is_error,
        });
    }
}

/// Applies a later command row's state to the command row at `at`: the latest non-empty
/// command line and the latest output win, `done` is the later one's.
fn update_command(rows: &mut VecDeque<Row>, at: u64, later: Row) {
    let Row::Command {
        command: c,
        done: d,
        output: o,
        ..
    } = later
    else {
        return;
    };
    if let Some(Row::Command {
        command,
        done,
        output,
        ..
    }) = index_of(rows, at).map(|i| &mut rows[i])
    {
        if !c.is_empty() {
            *command = c;
        }
        *done = d;
        if o.is_some() {
            *output = o;
        }
    }
}
