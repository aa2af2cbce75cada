//! Full-text search over the cache: every cached session of a server, offline.
//!
//! # What is indexed
//!
//! One *document* per row ([`doc`]): user messages, assistant messages (the deltas folded with
//! the protocol's row rule, the one the display fold uses, so a phrase split across streamed
//! deltas is one text), tool calls (name and input), tool results, command events (command
//! line and output), queued messages, errors. Each document sits at its row's seq, which is
//! what a result gives back: open the session with that seq as the anchor to show the hit.
//!
//! # Words
//!
//! [`tokens`]: maximal runs of alphanumeric characters, lowercased, Latin diacritics and
//! Arabic and Hebrew vowel marks removed (`Été` = `ete`); a Chinese, Japanese, Korean, Thai,
//! Lao, Khmer or Myanmar character, or an emoji, is a word by itself. A query ([`query`]) is
//! words and `"quoted phrases"`, all required (words typed together, as the characters of
//! `勉強`, are a phrase); the last word, while still being typed (no space after it), matches
//! as a prefix.
//!
//! # Ranking
//!
//! [`rank`]: BM25 (k1 1.2, b 0.75) over the documents of every session searched, so a rare
//! word weighs more than a common one; at equal relevance the newer row wins (a 20% recency
//! factor across the candidates' timestamps). Each result carries a snippet around its first
//! match with the matched words marked.
//!
//! # Where the index lives
//!
//! In the same [`Store`](crate::store::Store), beside the chunks: `transcripts/v1/<server>/
//! <session>/search.jsonl`, one JSON line per document (its seq, end, timestamp, text, and the
//! writer's live end). Being in the session's folder, whatever removes the folder removes the
//! index (purge, eviction, Reload, retain-only), and the byte budget counts it, since the
//! budget sums the folder. It is not a chunk name, so the chunk cache never serves it.
//!
//! Beside it, `search.idx`: the blob's [`segment`], the same documents in a built form (a
//! document column, a block-indexed front-coded dictionary, postings) that a query reads a few
//! kilobytes of per session instead of parsing and tokenizing the blob. Derived, never the truth: built
//! in idle time ([`crate::chunks::Cache::build_search`]: when the worker warms up, and every
//! minute for the sessions it wrote) from the blob's first bytes, under the session's writer
//! role, once the blob holds [`segment::MIN_TAIL`] bytes (and 1/16 of the segment) past it;
//! used only while the blob's bytes where it stops are the ones it recorded; removed by a
//! query that finds it does not read, and with the blob when the writer rebuilds it.
//!
//! # Updates: the writer
//!
//! [`writer::IndexWriter`], owned by the session's [`SessionCache`](crate::chunks::SessionCache)
//! and used only while it holds the writer role: appended lines are folded into rows; a row is
//! appended to the blob when the next line does not join it (one `Store::append` per completed
//! row, batched per appended run), so an appended delta costs O(delta) whatever the size of the
//! transcript. A row that nothing can join (anything but an assistant delta: a user message, a
//! queued message, a command) is complete, and written, at once; the reply still streaming is
//! held in memory and is not found until it completes (the next row starts) — after a reopen it
//! is re-folded from the chunks, from the live end the blob's last line records. History pages
//! stored below the suffix are indexed as they are stored.
//!
//! A page's edge can cut a reply whose other part is cached (the first window opened mid-reply
//! and the page below it arrives; a page fetched into a gap): the piece on the cached side was
//! indexed as a row of its own. Storing the page folds the reply whole again, with the cached
//! lines it joins ([`crate::chunks::SessionCache::store_page`] reads them), and appends it
//! marked [`doc::Doc::welds`]: it replaces every document written before it whose seq it
//! covers (the reader drops them; a segment build empties them). A reply still streaming
//! takes the page's part as its start, in memory (a query drops the pieces it covers), and is
//! written whole once it completes; the part is written meanwhile as a piece (what another
//! tab finds, and where a reopen resumes: the first row a resumed fold writes welds too).
//!
//! # Rebuild: never load-bearing
//!
//! On the writer's first write after an open it reads the blob's tail: a torn last line is cut;
//! a last line that does not read, an end beyond the cached lines, or no blob at all means a
//! rebuild: the blob is removed and the cached suffix is folded again from its start. A failed
//! index write stops the index (until the next open), never the cache. The reader skips a line
//! it cannot read. A search only ever returns seqs; the screen is always drawn from the chunks.
//!
//! Search can be turned off ([`Cache::set_search`](crate::chunks::Cache::set_search)): nothing
//! is indexed, a session's first write after its open removes its blob (and segment), and the
//! warm-up removes the others' and the pack, so an index is whole or absent. Turned on again,
//! the rebuild above brings each one back.
//!
//! # Queries: the reader
//!
//! [`reader`]: each session is loaded as its segment's header (the document column and the
//! dictionary's block index, in one read) plus the blob's lines past the segment, which are
//! tokenized into an in-memory inverted index (`postings`: a hashed term dictionary, each
//! term's postings, the terms sorted for prefixes); a session without a segment is all blob.
//! The header and the blob's end ([`Store::read_end`](crate::store::Store::read_end): its
//! size and last 16 kB) are asked together, so a blob that gained little since its segment,
//! or a small one without a segment, loads in one step; more past the segment is read after.
//! A query reads, per session and word, one dictionary block and one run of postings (one
//! run for a prefix too: the postings are in the dictionary's order), scores from the postings
//! and the column, and reads only its hits' lines from the blob (their snippets; a phrase's
//! candidates, best first, to check it), which each session then keeps (up to 64 kB: a query
//! typed a letter at a time shows mostly the same hits). A posting carries a one-byte signature of the words
//! that follow its term in the document (a bit of 8 per word, from a hash), so a phrase `a b`
//! reads the text only of documents where `a`'s signature has `b`'s bit: about one in eight
//! of the documents holding both words but not the phrase. The memo lives on the
//! [`Cache`](crate::chunks::Cache). A query asks the store only about the sessions whose
//! blob this worker changed since the last query ([`live`]: the writers say so), and about
//! every session on the first query and at most every [`reader::RECHECK_MS`] after (what a
//! writer in another tab did is seen then: a stat of each blob, and one read of the size and
//! end of each blob whose size or stamp changed since the stat before its last read; a
//! rebuilt blob — shrunk, or its bytes before the end read last time changed — is reloaded).
//! The worker does that recheck in idle time, more often
//! ([`Cache::recheck_search`](crate::chunks::Cache::recheck_search), every 25 s),
//! so that a query finds the memo fresh. What another tab's writer appends is told at once
//! ([`live`]: the worker posts each blob's new size to the other tabs, and a query reads the
//! sessions it was told of), so the recheck is left with what no notice told.
//! The worker warms up in idle time shortly after it opens
//! ([`crate::chunks::Cache::warm_search`]): builds the segments that are behind, then loads
//! every session with its segment held in memory, so later queries read nothing but their
//! hits' lines; a few sessions per turn of the memo, so a query typed meanwhile waits for one
//! turn and loads only the sessions the warm-up has not reached. A reply still streaming is searched from its writer's memory ([`live`]).
//!
//! # The server's pack: a worker's first query
//!
//! A query that comes before the warm-up would read each session's segment header, its blob's
//! end and its postings: two to four reads per session, and an OPFS read costs about half a
//! millisecond however small. So once warmed up the worker also writes the server's [`pack`]
//! (every session's documents in one segment, with a table of what each blob was: its size,
//! its stamp, its last bytes), and a worker's first query before its warm-up reads that: its
//! header; then one run of postings per word for every session at once, and its hits' lines.
//! Of each session's blob it asks a `stat` only when a writer may have changed it since the
//! pack was built: the [`marks`] say which (each writer marks its session before it first
//! changes the blob in a turn of its role), and with the pack they name every session, so the
//! server's folder is not listed either. A blob as the pack recorded it is not read; one
//! that grew is read past its part; one rebuilt under it, or a session the pack does not
//! hold, is loaded as above (and the pack is built again at the next warm-up).
//!
//! # Crates considered
//!
//! - **tantivy**: the reference Rust search engine, but not for `wasm32-unknown-unknown` in a
//!   worker: its `Directory` is synchronous (memory-mapped or `std::fs` files), while every
//!   browser store here is async (OPFS sync handles are per-file and locked; IndexedDB is only
//!   async); its writer spawns threads; it pulls `zstd`/`lz4` C or SIMD builds and a large
//!   binary. Segments are immutable and merged in the background — the opposite of a cost per
//!   appended delta in a blob beside the chunks. Dropped.
//! - **probly-search** (WASM compatible, BM25): an in-memory trie index with no persisted
//!   format, so every start would re-tokenize every cached transcript, and its documents are
//!   removed lazily. It would replace only [`reader`]'s ~100 lines of inverted index, not the
//!   part that matters here (the blob in the store, incremental append, rebuild, removal with
//!   the session). Dropped.
//! - **anda_db_tfs** (BM25): persists through a CBOR bucket format behind tokio-style async IO
//!   and pulls rayon/dashmap; the same mismatch with our `Store`. Dropped.
//!
//! Hand-written wins: the persisted part is one append-only JSON-lines blob per session in our
//! own [`Store`](crate::store::Store) (all four backends, OPFS and IndexedDB included) and a
//! segment built from it in idle time (a few hundred lines: a varint layout read by ranges
//! through the same store), and the in-memory part is a sorted map of postings and a BM25
//! formula.
//!
//! # Not done yet
//!
//! The pack's header holds every document's column (about 7 bytes each: 1.4 MB for the
//! 200,000 documents of the bench's 200 MB), read whole by a worker's first query: in OPFS
//! that read is most of what the query costs (about 15 ms, and 6 to parse it). Postings that
//! carried what ranking needs of their documents would leave the column to the hits. A
//! session whose cache holds only chunks older than the suffix (never served) is indexed only
//! as those pages were stored.

mod accents;
pub mod doc;
pub mod live;
pub mod marks;
pub mod pack;
mod postings;
pub mod query;
pub mod rank;
pub mod reader;
pub mod segment;
pub mod tokens;
pub mod writer;

pub use live::Live;
pub use rank::{Hit, Piece};
pub use reader::Memo;
pub use writer::INDEX;
