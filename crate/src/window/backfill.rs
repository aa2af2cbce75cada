//! Prompt backfill: before a generation, older messages are read behind the window until a
//! token budget is reached, for the prompt only. The window (what the UI holds) is not touched,
//! and neither is its cursor.
//!
//! Pages come through [`ChatFile::before_pages`] (several in one call on a miss) and are kept in
//! a small LRU cache keyed by chat, cursor signature and page size, so the next generation on an
//! unchanged chat reads nothing. A write changes the signature, so pages of an older version of
//! the file are never served; they just age out. The window's cursor is checked against the
//! file before the cache is asked, so a stale cursor is reported even when its pages are cached.

use super::{ChatChunk, ChatFile, Cursor, WindowError};
use crate::store::Store;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Counts the tokens a message line will take in a prompt.
pub trait TokenEstimator {
    /// The estimated tokens of one message line.
    fn tokens(&self, line: &str) -> usize;
}

/// The default estimate: one token per `n` characters, rounded up (`CharsPerToken(4)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CharsPerToken(pub usize);

impl Default for CharsPerToken {
    fn default() -> Self {
        Self(4)
    }
}

impl TokenEstimator for CharsPerToken {
    fn tokens(&self, line: &str) -> usize {
        line.chars().count().div_ceil(self.0.max(1))
    }
}

impl<F: Fn(&str) -> usize> TokenEstimator for F {
    fn tokens(&self, line: &str) -> usize {
        self(line)
    }
}

/// What the prompt is built from: the window the UI holds, and the limits of the backfill.
#[derive(Debug, Clone)]
pub struct BackfillRequest<'a> {
    /// The window's message lines, oldest first (counted against the budget first).
    pub window: &'a [String],
    /// The window's cursor.
    pub cursor: Cursor,
    /// Whether the window has older lines behind it (nothing is read when it has not).
    pub has_more_before: bool,
    /// Tokens the whole prompt history (window and older messages) may take.
    pub budget_tokens: usize,
    /// Lines per page read (the cache's page size).
    pub page_lines: usize,
    /// At most this many pages behind the window.
    pub max_pages: usize,
    /// At most this many older messages.
    pub max_messages: usize,
}

/// Why the backfill stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackfillStop {
    /// The next older message would not fit the budget (or the window alone fills it).
    Budget,
    /// `max_pages` pages were used.
    PageCap,
    /// `max_messages` older messages were taken.
    MessageCap,
    /// The whole chat is in the prompt.
    StartOfChat,
    /// The window's cursor no longer fits the file (another write happened since it was read):
    /// nothing older was taken, generate with the window alone and reload it.
    StaleCursor(WindowError),
}

/// The older messages for one prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backfill {
    /// Older message lines, oldest first, just before the window (contiguous with it).
    pub older: Vec<String>,
    /// Estimated tokens of the window.
    pub window_tokens: usize,
    /// Estimated tokens of `older`.
    pub older_tokens: usize,
    /// Why it stopped.
    pub stop: BackfillStop,
    /// Pages served from the cache.
    pub pages_cached: usize,
    /// Pages read from the chat file.
    pub pages_read: usize,
}

impl Backfill {
    /// The prompt's history: the older lines then the window, oldest first.
    pub fn history<'a>(&'a self, window: &'a [String]) -> impl Iterator<Item = &'a str> {
        self.older.iter().chain(window).map(String::as_str)
    }

    /// Whether the cursor was stale (see [`BackfillStop::StaleCursor`]).
    pub fn is_stale(&self) -> bool {
        matches!(self.stop, BackfillStop::StaleCursor(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PageKey {
    chat: String,
    signature: String,
    page_lines: usize,
}

/// Prompt backfill with its page cache. Keep one per app (per store) for its whole life.
#[derive(Debug)]
pub struct PromptBackfill {
    capacity: usize,
    // A handful of pages (8 to 12): a linear scan beats hashing at this size.
    pages: Mutex<VecDeque<(PageKey, Arc<ChatChunk>)>>,
}

impl PromptBackfill {
    /// The seed's capacity on desktop: 12 pages.
    pub const DESKTOP_PAGES: usize = 12;
    /// The seed's capacity on mobile: 8 pages.
    pub const MOBILE_PAGES: usize = 8;

    /// A backfill whose cache holds up to `capacity` pages (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            pages: Mutex::new(VecDeque::new()),
        }
    }

    /// How many pages the cache holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The pages the cache holds now.
    pub fn cached_pages(&self) -> usize {
        self.pages.lock().unwrap().len()
    }

    fn get(&self, key: &PageKey) -> Option<Arc<ChatChunk>> {
        let mut pages = self.pages.lock().unwrap();
        let i = pages.iter().position(|(k, _)| k == key)?;
        let entry = pages.remove(i).expect("found");
        let page = entry.1.clone();
        pages.push_back(entry);
        Some(page)
    }

    fn put(&self, key: PageKey, page: Arc<ChatChunk>) {
        let mut pages = self.pages.lock().unwrap();
        pages.retain(|(k, _)| k != &key);
        pages.push_back((key, page));
        while pages.len() > self.capacity {
            pages.pop_front();
        }
    }

    /// Collects older messages behind the window until the budget, `max_pages` or
    /// `max_messages` is reached, or the chat starts. Messages are taken newest first and
    /// contiguously: the first one that does not fit ends the backfill. A stale cursor is not an
    /// error but [`BackfillStop::StaleCursor`]; other failures (storage, bad arguments) are.
    pub async fn collect<S: Store, E: TokenEstimator + ?Sized>(
        &self,
        chat: &ChatFile<'_, S>,
        request: &BackfillRequest<'_>,
        estimator: &E,
    ) -> Result<Backfill, WindowError> {
        if request.page_lines == 0 {
            return Err(WindowError::InvalidArgument(
                "page_lines must be at least 1".into(),
            ));
        }
        let window_tokens: usize = request.window.iter().map(|l| estimator.tokens(l)).sum();
        let mut out = Backfill {
            older: Vec::new(),
            window_tokens,
            older_tokens: 0,
            stop: BackfillStop::StartOfChat,
            pages_cached: 0,
            pages_read: 0,
        };
        let budget = request.budget_tokens.saturating_sub(window_tokens);
        // Older lines, newest first, as taken.
        let mut taken: Vec<String> = Vec::new();
        let mut cursor = request.cursor;
        let mut more = request.has_more_before;
        let mut pages_used = 0;
        // Pages this call read ahead, used before the cache is asked.
        let mut prefetched: VecDeque<Arc<ChatChunk>> = VecDeque::new();
        // Cached pages are keyed by the cursor's signature, which says nothing about the file
        // now: the cursor is checked against the file before any page is served, so a stale
        // cursor is StaleCursor whether its pages were cached or not.
        if more && budget > 0 && request.max_messages > 0 && request.max_pages > 0 {
            match chat.verify(cursor).await {
                Ok(()) => {}
                Err(e) if e.is_stale_cursor() => {
                    out.stop = BackfillStop::StaleCursor(e);
                    return Ok(out);
                }
                Err(e) => return Err(e),
            }
        }
        out.stop = loop {
            if !more {
                break BackfillStop::StartOfChat;
            }
            if out.older_tokens >= budget {
                break BackfillStop::Budget;
            }
            if taken.len() >= request.max_messages {
                break BackfillStop::MessageCap;
            }
            if pages_used >= request.max_pages {
                break BackfillStop::PageCap;
            }
            let key = |c: &Cursor| PageKey {
                chat: chat.path().to_string(),
                signature: c.signature(),
                page_lines: request.page_lines,
            };
            let cached = match prefetched.pop_front() {
                Some(page) => Some(page),
                None => self.get(&key(&cursor)).inspect(|_| out.pages_cached += 1),
            };
            let page = match cached {
                Some(page) => page,
                None => {
                    let want = self.pages_to_fetch(request, &out, &taken, budget, pages_used);
                    let fetched = match chat.before_pages(cursor, request.page_lines, want).await {
                        Ok(pages) => pages,
                        Err(e) if e.is_stale_cursor() => {
                            taken.clear();
                            out.older_tokens = 0;
                            break BackfillStop::StaleCursor(e);
                        }
                        Err(e) => return Err(e),
                    };
                    out.pages_read += fetched.len();
                    let mut at = cursor;
                    for page in fetched {
                        let page = Arc::new(page);
                        self.put(key(&at), page.clone());
                        at = page.cursor;
                        prefetched.push_back(page);
                    }
                    prefetched.pop_front().expect("at least one page")
                }
            };
            pages_used += 1;
            let mut stop = None;
            for line in page.lines.iter().rev() {
                if taken.len() >= request.max_messages {
                    stop = Some(BackfillStop::MessageCap);
                    break;
                }
                let t = estimator.tokens(line);
                if out.older_tokens + t > budget {
                    stop = Some(BackfillStop::Budget);
                    break;
                }
                out.older_tokens += t;
                taken.push(line.clone());
            }
            if let Some(stop) = stop {
                break stop;
            }
            cursor = page.cursor;
            more = page.has_more_before;
        };
        taken.reverse();
        out.older = taken;
        Ok(out)
    }

    /// How many pages one miss reads: enough for the rest of the budget at the token rate seen
    /// so far (the window's, before any older line), within the page cap and the cache.
    fn pages_to_fetch(
        &self,
        request: &BackfillRequest<'_>,
        out: &Backfill,
        taken: &[String],
        budget: usize,
        pages_used: usize,
    ) -> usize {
        let (tokens, lines) = if taken.is_empty() {
            (out.window_tokens, request.window.len())
        } else {
            (out.older_tokens, taken.len())
        };
        let per_line = if lines == 0 {
            1
        } else {
            tokens.div_ceil(lines).max(1)
        };
        let lines_needed = (budget - out.older_tokens)
            .div_ceil(per_line)
            .min(request.max_messages - taken.len());
        lines_needed.div_ceil(request.page_lines).clamp(
            1,
            (request.max_pages - pages_used).min(self.capacity).max(1),
        )
    }
}
