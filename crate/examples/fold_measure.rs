//! What the fold buys on a real transcript, printed as the README's table.
//!
//!     cargo run --release -p scrollback --example fold_measure -- PATH [WINDOW_BYTES]
//!
//! PATH is a `transcript.jsonl` (the sandbox's long session: `DIR/long/transcript.jsonl` after
//! `scrollback-server --sandbox`). For windows ending at 25%, 50% and 75% of the file and at its
//! tail it prints:
//!
//! - the replay boundary: the newest raw events below that point whose page fits WINDOW_BYTES
//!   (default 220 KB, the fold's replay window, design.md rule F7), events and bytes before and after folding
//!   (`protocol::coalesce`): the same conversation in fewer bytes;
//! - a byte-budgeted page of the same bytes (the server's `bytes` parameter): read back as far
//!   as needed, folded, filled with whole rows while their line text fits the raw page's; and how much more conversation
//!   it carries than the `limit` page of raw events that fills the same bytes, in display rows
//!   (`fold::Transcript`) and in seqs covered.
//!
//! Then the whole file folded, and how long folding it takes.

use scrollback::fold::Transcript;
use scrollback::protocol::{coalesce, joins, page_json, Line};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: fold_measure PATH [WINDOW_BYTES]");
        std::process::exit(2);
    };
    let window: usize = match args.next().map(|b| b.parse()) {
        None => 220 * 1024,
        Some(Ok(b)) if b > 2 => b,
        Some(_) => {
            eprintln!("WINDOW_BYTES must be a number of bytes above 2");
            std::process::exit(2);
        }
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let mut dropped = 0;
    let lines: Vec<Line> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| Line::parse(l).map_err(|_| dropped += 1).ok())
        .collect();
    if lines.is_empty() {
        eprintln!("{path}: no transcript lines");
        std::process::exit(1);
    }
    let file_bytes: usize = lines.iter().map(|l| l.raw().len() + 1).sum();
    println!(
        "{path}: {} events, {} ({} unreadable lines dropped); windows of {}\n",
        lines.len(),
        kb(file_bytes),
        dropped,
        kb(window)
    );

    println!("| window at | raw window: events / bytes | folded: events / bytes | smaller | byte-budgeted page, same bytes: events / bytes | rows: raw page → budgeted | seqs covered: raw page → budgeted |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let n = lines.len();
    for (name, end) in [
        ("25%", n / 4),
        ("50%", n / 2),
        ("75%", n * 3 / 4),
        ("tail", n),
    ] {
        let below = &lines[..end];
        let raw = raw_window(below, window);
        let raw_bytes = page_json(raw).len();
        let folded = coalesce(raw);
        let folded_bytes = page_json(&folded).len();
        let budgeted = budget_page(below, text_bytes(raw));
        let budgeted_bytes = page_json(&budgeted).len();
        let raw_rows = display_rows(raw);
        let budgeted_rows = display_rows(&budgeted);
        let raw_seqs = raw.len();
        let budgeted_seqs = covered(&budgeted, below);
        let start = if budgeted.first().map(Line::seq) == lines.first().map(Line::seq) {
            ", from the first line"
        } else {
            ""
        };
        println!(
            "| {name} | {} / {} | {} / {} | {:.1}% | {} / {}{start} | {} → {} (×{:.1}) | {} → {} (×{:.1}) |",
            raw.len(),
            kb(raw_bytes),
            folded.len(),
            kb(folded_bytes),
            100.0 * (1.0 - folded_bytes as f64 / raw_bytes as f64),
            budgeted.len(),
            kb(budgeted_bytes),
            raw_rows,
            budgeted_rows,
            budgeted_rows as f64 / raw_rows.max(1) as f64,
            raw_seqs,
            budgeted_seqs,
            budgeted_seqs as f64 / raw_seqs.max(1) as f64,
        );
    }

    let t = Instant::now();
    let folded = coalesce(&lines);
    let coalesce_ms = t.elapsed().as_secs_f64() * 1e3;
    let folded_bytes: usize = folded.iter().map(|l| l.raw().len() + 1).sum();
    let t = Instant::now();
    let rows = match Transcript::from_lines(&lines) {
        Ok(t) => t.rows().len(),
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let rows_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "\nwhole file: {} events / {} → {} events / {} folded ({:.1}% smaller) in {:.0} ms; \
         {} display rows drawn in {:.0} ms",
        n,
        kb(file_bytes),
        folded.len(),
        kb(folded_bytes),
        100.0 * (1.0 - folded_bytes as f64 / file_bytes as f64),
        coalesce_ms,
        rows,
        rows_ms
    );
}

/// The newest lines of `below` whose page (a JSON array) fits in `budget` bytes: the raw `limit`
/// page that fills the budget.
fn raw_window(below: &[Line], budget: usize) -> &[Line] {
    let mut bytes = 2;
    let mut start = below.len();
    while start > 0 {
        let more = below[start - 1].raw().len() + usize::from(start < below.len());
        if bytes + more > budget {
            break;
        }
        bytes += more;
        start -= 1;
    }
    &below[start..]
}

/// A byte-budgeted page of `below`'s newest lines, as the server's `bytes` parameter fills it:
/// walked back row by row (the row rule), each row folded, whole rows taken while their line
/// text fits in `budget` bytes (at least one row).
fn budget_page(below: &[Line], budget: usize) -> Vec<Line> {
    let mut page: Vec<Line> = Vec::new(); // newest first
    let mut used = 0;
    let mut end = below.len();
    while end > 0 {
        let mut start = end - 1;
        while start > 0 && joins(&below[start - 1], &below[start]) {
            start -= 1;
        }
        let row = coalesce(&below[start..end]);
        let size: usize = row.iter().map(|l| l.raw().len()).sum();
        if used + size > budget && !page.is_empty() {
            break;
        }
        used += size;
        page.extend(row.into_iter().rev());
        end = start;
    }
    page.reverse();
    page
}

/// Bytes of line text (what the server's `bytes` budget counts).
fn text_bytes(lines: &[Line]) -> usize {
    lines.iter().map(|l| l.raw().len()).sum()
}

/// Seqs a folded page covers, from its first line to the end of `below`.
fn covered(page: &[Line], below: &[Line]) -> usize {
    match (page.first(), below.last()) {
        (Some(first), Some(last)) => (last.seq() - first.seq() + 1) as usize,
        _ => 0,
    }
}

/// The display rows a page draws on its own.
fn display_rows(page: &[Line]) -> usize {
    Transcript::from_lines(page).map_or(0, |t| t.rows().len())
}

fn kb(bytes: usize) -> String {
    format!("{:.1} KB", bytes as f64 / 1024.0)
}
