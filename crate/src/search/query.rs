//! The query: words and quoted phrases, all required; the last word matches as a prefix while
//! the user is still typing it. Words that touch (Chinese, Japanese or Korean characters, each
//! a word: `勉強`) are a phrase of their own.

use super::tokens::{terms, words};

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

    /// Whether `term` (folded) is one the query asks for: marked in a snippet.
    pub fn matches(&self, term: &str) -> bool {
        self.words.iter().any(|w| w == term)
            || self.phrases.iter().flatten().any(|w| w == term)
            || self.prefix.as_deref().is_some_and(|p| term.starts_with(p))
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
    }
}
