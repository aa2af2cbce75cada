//! The query: words and quoted phrases, all required; the last word matches as a prefix while
//! the user is still typing it. Words that touch (Chinese, Japanese, Korean or Thai characters,
//! each a word: `勉強`) are a phrase of their own.

use super::tokens::{terms, words, Word};

/// What a query asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    /// Words that must each appear (folded).
    pub words: Vec<String>,
    /// A word that must appear as the start of some word: the last one typed, when the query
    /// does not end with a space or a quote.
    pub prefix: Option<String>,
    /// Phrases (two or more folded words) that must appear in this order, adjacent.
    pub phrases: Vec<Vec<String>>,
}

impl Query {
    /// Reads `text`: `"..."` is a phrase (an unclosed quote runs to the end), anything else
    /// words, of which those that touch are a phrase too. A one-word phrase is a word.
    pub fn parse(text: &str) -> Query {
        let mut q = Query::default();
        let typing = !text.ends_with(|c: char| c.is_whitespace() || c == '"');
        let mut quoted = false;
        let pieces: Vec<&str> = text.split('"').collect();
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let mut runs = match quoted {
                true => vec![terms(piece)],
                false => touching(piece),
            };
            if i == last && typing && !quoted && runs.last().is_some_and(|r| r.len() == 1) {
                q.prefix = runs.pop().and_then(|mut r| r.pop());
            }
            for mut run in runs {
                match run.len() {
                    0 => {}
                    1 => q.words.append(&mut run),
                    _ => q.phrases.push(run),
                }
            }
            quoted = !quoted;
        }
        q
    }

    /// Whether it asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.prefix.is_none() && self.phrases.is_empty()
    }

    /// Which of a text's words (in order) are what the query asks for, marked in a snippet: a
    /// word asked for, one the prefix starts, and each word of a phrase where the phrase stands
    /// whole (a character of `勉強` elsewhere in the text is not marked).
    pub fn marks(&self, words: &[Word]) -> Vec<bool> {
        let mut marks: Vec<bool> = words
            .iter()
            .map(|w| {
                self.words.contains(&w.term)
                    || self
                        .prefix
                        .as_deref()
                        .is_some_and(|p| w.term.starts_with(p))
            })
            .collect();
        for phrase in self.phrases.iter().filter(|p| !p.is_empty()) {
            for (i, run) in words.windows(phrase.len()).enumerate() {
                if run.iter().zip(phrase).all(|(w, t)| w.term == *t) {
                    marks[i..i + phrase.len()].fill(true);
                }
            }
        }
        marks
    }
}

/// The folded words of `text`, those that touch (no character between them) in one run.
fn touching(text: &str) -> Vec<Vec<String>> {
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut end = None;
    for w in words(text) {
        match runs.last_mut() {
            Some(run) if end == Some(w.start) => run.push(w.term),
            _ => runs.push(vec![w.term]),
        }
        end = Some(w.end);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_phrases_and_the_last_word_typed() {
        let q = Query::parse(r#"Tokio "select macro" migr"#);
        assert_eq!(q.words, ["tokio"]);
        assert_eq!(q.phrases, [vec!["select".to_string(), "macro".into()]]);
        assert_eq!(q.prefix.as_deref(), Some("migr"));
        let q = Query::parse("tokio ");
        assert_eq!((q.words.len(), q.prefix), (1, None));
        let q = Query::parse(r#""one""#);
        assert_eq!((q.words, q.prefix), (vec!["one".to_string()], None));
        assert!(Query::parse(" \" ").is_empty());
    }

    #[test]
    fn words_that_touch_are_a_phrase() {
        let phrase = |p: &[&str]| p.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        // A Japanese word, a character each: a phrase, typed or not (no prefix: nothing in it
        // is the start of a longer word).
        for text in ["勉強", "勉強 "] {
            let q = Query::parse(text);
            assert_eq!(q.phrases, [phrase(&["勉", "強"])]);
            assert!(q.words.is_empty() && q.prefix.is_none());
        }
        let q = Query::parse("tokio日本 移行 migr");
        assert_eq!(
            q.phrases,
            [phrase(&["tokio", "日", "本"]), phrase(&["移", "行"])]
        );
        assert_eq!(q.prefix.as_deref(), Some("migr"));
        // One character alone is a word; in quotes, a phrase with the words around it.
        let q = Query::parse(r#"本 "学校 に""#);
        assert_eq!(q.words, ["本"]);
        assert_eq!(q.phrases, [phrase(&["学", "校", "に"])]);
        // A Thai word: its tone marks are part of the characters before them, which touch.
        let q = Query::parse("ไม่รู้");
        assert_eq!(q.phrases, [phrase(&["ไ", "ม", "ร", "\u{e39}"])]);
    }

    #[test]
    fn a_phrase_is_marked_where_it_stands_whole() {
        let marked = |query: &str, text: &str| {
            let ws = words(text);
            let marks = Query::parse(query).marks(&ws);
            ws.iter()
                .zip(marks)
                .filter(|(_, hit)| *hit)
                .map(|(w, _)| text[w.start..w.end].to_string())
                .collect::<Vec<_>>()
        };
        // `本` alone, first, is not the phrase `本語`.
        assert_eq!(marked("本語", "本当に日本語です"), ["本", "語"]);
        assert_eq!(
            marked("\"select macro\" tokio", "select the select macro in tokio"),
            ["select", "macro", "tokio"]
        );
        // The word typed last, as a prefix.
        assert_eq!(marked("mac", "select macro"), ["macro"]);
        // A phrase of no words (never parsed so, but the fields are public) marks nothing.
        let empty = Query {
            phrases: vec![vec![]],
            ..Query::default()
        };
        assert_eq!(empty.marks(&words("a b")), [false, false]);
    }
}
