//! One session's documents in memory, with an inverted index over their words: a term
//! dictionary (hashed), each term's postings (document, frequency, the words that follow it),
//! and the terms in sorted order for prefixes (sorted before a query; terms added since are
//! scanned).

use super::doc::Doc;
use super::tokens::{follower_bit, for_each_term};
use std::borrow::Cow;
use std::collections::HashMap;

/// One session's documents and their postings.
#[derive(Debug, Default, Clone)]
pub(super) struct Indexed {
    /// Each document and its length in words.
    pub docs: Vec<(Doc, u32)>,
    /// Every word of every document, counted.
    pub words: u64,
    /// The documents with words.
    pub worded: u32,
    dict: HashMap<String, u32>,
    names: Vec<String>,
    /// By term id: its postings, documents ascending.
    lists: Vec<Vec<Posting>>,
    /// Term ids sorted by term (the first `sorted.len()` ids; later ones are not yet).
    sorted: Vec<u32>,
}

impl Indexed {
    /// Adds a document; answers the number of terms before it (what [`Indexed::remove_last`]
    /// takes back to).
    pub fn add(&mut self, doc: Doc) -> usize {
        let before = self.names.len();
        let id = self.docs.len() as u32;
        // Each word's term and its own follower bit (the word before it takes it).
        let mut ids: Vec<(u32, u8)> = Vec::with_capacity(64);
        for_each_term(&doc.text, |term| {
            let t = match self.dict.get(term) {
                Some(&t) => t,
                None => {
                    let t = self.names.len() as u32;
                    self.dict.insert(term.to_string(), t);
                    self.names.push(term.to_string());
                    self.lists.push(Vec::new());
                    t
                }
            };
            ids.push((t, follower_bit(term)));
        });
        let n = ids.len() as u32;
        // Each word with the bit of the word after it (none after the last).
        for i in 0..ids.len() {
            ids[i].1 = ids.get(i + 1).map_or(0, |&(_, bit)| bit);
        }
        ids.sort_unstable_by_key(|&(t, _)| t);
        for run in ids.chunk_by(|a, b| a.0 == b.0) {
            let next = run.iter().fold(0, |m, &(_, bit)| m | bit);
            self.lists[run[0].0 as usize].push(Posting {
                doc: id,
                tf: run.len() as u32,
                next,
            });
        }
        self.words += u64::from(n);
        self.worded += u32::from(n > 0);
        self.docs.push((doc, n));
        before
    }

    /// Takes back the newest document, added for a single query (a row still streaming), and
    /// the terms it brought (`before`: what [`Indexed::add`] answered).
    pub fn remove_last(&mut self, before: usize) {
        let Some((doc, len)) = self.docs.pop() else {
            return;
        };
        let id = self.docs.len() as u32;
        let mut ids = Vec::new();
        for_each_term(&doc.text, |term| ids.extend(self.dict.get(term).copied()));
        for t in ids {
            let list = &mut self.lists[t as usize];
            if list.last().is_some_and(|p| p.doc == id) {
                list.pop();
            }
        }
        for name in self.names.drain(before..) {
            self.dict.remove(&name);
        }
        self.lists.truncate(before);
        self.sorted.retain(|&t| (t as usize) < before);
        self.words -= u64::from(len);
        self.worded -= u32::from(len > 0);
    }

    /// Sorts the terms added since the last call (before a query, so prefixes are ranges).
    pub fn prepare(&mut self) {
        if self.sorted.len() < self.names.len() {
            let names = &self.names;
            self.sorted = (0..names.len() as u32).collect();
            self.sorted
                .sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        }
    }

    /// Every term in sorted order with its postings (call [`Indexed::prepare`] first): what a
    /// built segment is written from.
    pub fn sorted_terms(&self) -> impl Iterator<Item = (&str, &[Posting])> {
        self.sorted
            .iter()
            .map(|&t| (self.names[t as usize].as_str(), &self.lists[t as usize][..]))
    }

    /// The documents holding `term` (or, as a prefix, any word starting with it, with the
    /// summed frequency and the followers of each), sorted by document.
    pub fn postings(&self, term: &str, prefix: bool) -> Cow<'_, [Posting]> {
        if !prefix {
            return match self.dict.get(term) {
                Some(&t) => Cow::Borrowed(&self.lists[t as usize]),
                None => Cow::Borrowed(&[]),
            };
        }
        let name = |t: &u32| self.names[*t as usize].as_str();
        let from = self.sorted.partition_point(|t| name(t) < term);
        let ranged = self.sorted[from..]
            .iter()
            .take_while(|t| name(t).starts_with(term));
        // Ids past the sorted ones are the terms added since (a row still streaming).
        let unsorted: Vec<u32> = (self.sorted.len() as u32..self.names.len() as u32)
            .filter(|t| name(t).starts_with(term))
            .collect();
        let mut out: Vec<Posting> = ranged
            .chain(unsorted.iter())
            .flat_map(|t| self.lists[*t as usize].iter().copied())
            .collect();
        merge_by_doc(&mut out, |p| p.doc, Posting::absorb);
        Cow::Owned(out)
    }
}

/// One document holding a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Posting {
    /// The document's id.
    pub doc: u32,
    /// How often the term is in it.
    pub tf: u32,
    /// The words that follow it there, as a signature: the [`follower_bit`] of each OR-ed
    /// (a phrase `a b` can hold only where `a`'s signature has `b`'s bit; the text decides).
    pub next: u8,
}

impl Posting {
    /// Counts `later` (another term's posting in the same document, for a prefix) in.
    pub fn absorb(&mut self, later: &Posting) {
        self.tf += later.tf;
        self.next |= later.next;
    }
}

/// A prefix's postings, gathered term by term, made one list: sorted by document, each
/// document once, its terms' frequencies summed (`add` sums the later into the kept).
pub(super) fn merge_by_doc<P>(
    list: &mut Vec<P>,
    doc: impl Fn(&P) -> u32,
    add: impl Fn(&mut P, &P),
) {
    list.sort_by_key(&doc);
    list.dedup_by(|later, kept| {
        let same = doc(later) == doc(kept);
        if same {
            add(kept, later);
        }
        same
    });
}
