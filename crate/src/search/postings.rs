//! One session's documents in memory, with an inverted index over their words: a term
//! dictionary (hashed), each term's postings (document, frequency), and the terms in sorted
//! order for prefixes (sorted before a query; terms added since are scanned).

use super::doc::Doc;
use super::tokens::for_each_term;
use std::borrow::Cow;
use std::collections::HashMap;

/// One session's documents and their postings.
#[derive(Debug, Default)]
pub(super) struct Indexed {
    /// Each document and its length in words.
    pub docs: Vec<(Doc, u32)>,
    /// Every word of every document, counted.
    pub words: u64,
    dict: HashMap<String, u32>,
    names: Vec<String>,
    /// By term id: (document, term frequency), documents ascending.
    lists: Vec<Vec<(u32, u32)>>,
    /// Term ids sorted by term (the first `sorted.len()` ids; later ones are not yet).
    sorted: Vec<u32>,
}

impl Indexed {
    /// Adds a document; answers the number of terms before it (what [`Indexed::remove_last`]
    /// takes back to).
    pub fn add(&mut self, doc: Doc) -> usize {
        let before = self.names.len();
        let id = self.docs.len() as u32;
        let mut ids: Vec<u32> = Vec::with_capacity(64);
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
            ids.push(t);
        });
        let n = ids.len() as u32;
        ids.sort_unstable();
        for run in ids.chunk_by(|a, b| a == b) {
            self.lists[run[0] as usize].push((id, run.len() as u32));
        }
        self.words += u64::from(n);
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
            if list.last().is_some_and(|&(d, _)| d == id) {
                list.pop();
            }
        }
        for name in self.names.drain(before..) {
            self.dict.remove(&name);
        }
        self.lists.truncate(before);
        self.sorted.retain(|&t| (t as usize) < before);
        self.words -= u64::from(len);
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
    pub fn sorted_terms(&self) -> impl Iterator<Item = (&str, &[(u32, u32)])> {
        self.sorted
            .iter()
            .map(|&t| (self.names[t as usize].as_str(), &self.lists[t as usize][..]))
    }

    /// The documents holding `term` (or, as a prefix, any word starting with it, with the
    /// summed frequency), sorted by document.
    pub fn postings(&self, term: &str, prefix: bool) -> Cow<'_, [(u32, u32)]> {
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
        let mut out: Vec<(u32, u32)> = ranged
            .chain(unsorted.iter())
            .flat_map(|t| self.lists[*t as usize].iter().copied())
            .collect();
        merge_by_doc(&mut out, |p| p.0, |kept, later| kept.1 += later.1);
        Cow::Owned(out)
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
