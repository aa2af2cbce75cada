//! The query: words and quoted phrases, all required; the last word matches as a prefix while
//! the user is still typing it.

use super::tokens::terms;

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
    /// words. A one-word phrase is a word.
    pub fn parse(text: &str) -> Query {
        let mut q = Query::default();
        let typing = !text.ends_with(|c: char| c.is_whitespace() || c == '"');
        let mut quoted = false;
        let pieces: Vec<&str> = text.split('"').collect();
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let mut ts = terms(piece);
            if quoted && ts.len() > 1 {
                q.phrases.push(ts);
            } else {
                if i == last && typing && !quoted {
                    q.prefix = ts.pop();
                }
                q.words.extend(ts);
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
}
