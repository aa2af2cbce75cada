//! `scrollback`: follow a session in the terminal through a filesystem cache.
//!
//! ```text
//! scrollback [--server URL] [--token TOKEN] [--cache DIR] COMMAND
//!   list                  the server's sessions (prunes the cache of deleted ones); the
//!                         cached ones when the server cannot be reached
//!   show ID [--pages N]   open the session, page back N older pages, print, exit
//!   follow ID [--pages N] the same, then print new events as they stream (Ctrl-C stops)
//!   send ID TEXT          post a message: every word after the id, as typed
//!   delete ID             delete the session on the server, and its cache
//!   size [ID]             bytes cached, per session or for one
//!   purge [ID]            throw away the cache of one session, or of the whole server
//!   search QUERY [--limit N]  full-text search of the cached sessions, offline: words,
//!                         "quoted phrases"; prints session, seq, score and a snippet with
//!                         the matched words in [brackets]; `show ID` then opens the session
//! ```
//!
//! Defaults: `--server` from `SCROLLBACK_SERVER` or `http://127.0.0.1:8080`, `--token` from
//! `SCROLLBACK_TOKEN`, `--cache` from `SCROLLBACK_CACHE` or `$XDG_CACHE_HOME/scrollback` or
//! `~/.cache/scrollback`. After `show` and `follow`, the requests and bytes the open cost are
//! printed to stderr, so a warm reopen is visibly one request.

use futures::channel::mpsc;
use futures::StreamExt;
use scrollback::engine::{Config, Engine, Session, View};
use scrollback::fold::Row;
use scrollback::store::FsStore;
use scrollback::transport::{HttpTransport, Transport};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str = "usage: scrollback [--server URL] [--token TOKEN] [--cache DIR] COMMAND
commands:
  list                   the server's sessions (prunes the cache of deleted ones)
  show ID [--pages N]    open the session, page back N older pages, print, exit
  follow ID [--pages N]  the same, then print new events as they stream (Ctrl-C stops)
  send ID TEXT           post a message (every word after the id, options too)
  delete ID              delete the session on the server, and its cache
  size [ID]              bytes cached, per session or for one
  purge [ID]             throw away the cache of one session, or of the whole server
  search QUERY [--limit N]  search the cached sessions (offline): session, seq, score, snippet";

struct Args {
    server: String,
    token: Option<String>,
    cache: PathBuf,
    command: String,
    positional: Vec<String>,
    pages: usize,
    limit: usize,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut args = Args {
        server: env("SCROLLBACK_SERVER").unwrap_or_else(|| "http://127.0.0.1:8080".into()),
        token: env("SCROLLBACK_TOKEN"),
        cache: env("SCROLLBACK_CACHE")
            .map(PathBuf::from)
            .or_else(|| env("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("scrollback")))
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache/scrollback")))
            .unwrap_or_else(|| PathBuf::from(".scrollback-cache")),
        command: String::new(),
        positional: Vec::new(),
        pages: 0,
        limit: 20,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("server") => args.server = parser.value()?.string()?,
            Long("token") => args.token = Some(parser.value()?.string()?),
            Long("cache") => {
                args.cache = parser.value()?.into();
                if args.cache.as_os_str().is_empty() {
                    return Err("--cache needs a folder".into());
                }
            }
            Long("pages") => args.pages = parser.value()?.parse()?,
            Long("limit") => args.limit = parser.value()?.parse()?,
            Short('h') | Long("help") => {
                // A closed pipe (`| head -1`) ends it quietly.
                let _ = writeln!(std::io::stdout(), "{USAGE}");
                std::process::exit(0);
            }
            Short('V') | Long("version") => {
                let _ = writeln!(
                    std::io::stdout(),
                    "scrollback {}",
                    env!("CARGO_PKG_VERSION")
                );
                std::process::exit(0);
            }
            Value(v) if args.command.is_empty() => args.command = v.string()?,
            Value(v) => {
                args.positional.push(v.string()?);
                // A message is everything after its id, as typed: `--pages` in it is a word.
                if args.command == "send" {
                    for word in parser.raw_args()? {
                        let word = word.into_string().map_err(lexopt::Error::NonUnicodeValue)?;
                        args.positional.push(word);
                    }
                }
            }
            _ => return Err(arg.unexpected()),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            say(&format!("{e}\n{USAGE}"));
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        // A command line that does not say what to do: 2, as a bad option is.
        Err(e) if e.is::<Usage>() => {
            say(&e.to_string());
            ExitCode::from(2)
        }
        Err(e) => {
            say(&e.to_string());
            ExitCode::FAILURE
        }
    }
}

/// Says `what` on stderr, as `scrollback: …`: its text made [`printable`] (it may quote the
/// server), and nothing (no panic) when stderr is closed.
fn say(what: &str) {
    let _ = writeln!(std::io::stderr(), "scrollback: {}", printable(what));
}

type Fail = Box<dyn std::error::Error>;

/// A command line that names no command, or a command with the wrong arguments.
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n{USAGE}", self.0)
    }
}

impl std::error::Error for Usage {}

async fn run(args: Args) -> Result<(), Fail> {
    let transport = HttpTransport::new(&args.server, args.token.clone())?;
    let store = Arc::new(FsStore::new(&args.cache));
    let engine = Engine::assemble(store, transport, Config::default()).await;
    let id = args.positional.first().map(String::as_str);
    match (args.command.as_str(), id) {
        ("list", None) => {
            let list = match engine.sessions().await {
                Ok(list) => list,
                // Unreachable: what the cache holds, as the last list described it.
                Err(e) if !e.is_client_error() => {
                    say(&format!("{e}: listing the cached sessions (not live)"));
                    engine.cached_sessions().await
                }
                Err(e) => return Err(e.into()),
            };
            let mut out = std::io::stdout().lock();
            for s in list {
                let events = format!("{} events", s.seq);
                let line = columns(&[&s.id, &s.status, &s.model, &events, &s.title]);
                // A closed pipe (`| head`) ends the listing quietly.
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
        }
        ("show", Some(id)) => open(&engine, id, args.pages, false).await?,
        ("follow", Some(id)) => open(&engine, id, args.pages, true).await?,
        ("send", Some(id)) => {
            let text = args.positional[1..].join(" ");
            if text.is_empty() {
                return Err(Box::new(Usage("send: no text given".into())));
            }
            engine.transport().post_message(id, &text).await?;
        }
        ("delete", Some(id)) => engine.delete(id).await?,
        ("size", None) => {
            let mut total = 0;
            let mut lines = Vec::new();
            for s in engine.cache().sessions().await {
                total += s.size;
                let id = s.id.unwrap_or_else(|| format!("({})", s.key));
                lines.push(columns(&[&human(s.size), &id]));
            }
            lines.push(format!("{}\ttotal", human(total)));
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) ends it quietly.
            let _ = lines.iter().try_for_each(|line| writeln!(out, "{line}"));
        }
        ("size", Some(id)) => {
            scrollback::transport::usable_id(id)?;
            let size = match engine.cache().session_size(id).await {
                0 => "nothing cached".to_string(),
                n => human(n),
            };
            let _ = writeln!(std::io::stdout(), "{size}");
        }
        ("purge", None) => {
            for id in engine.cache().clear().await {
                let _ = writeln!(
                    std::io::stderr(),
                    "kept {id}: another process is writing it"
                );
            }
        }
        ("purge", Some(id)) => {
            scrollback::transport::usable_id(id)?;
            engine.cache().purge(id).await;
            // Not removed (a folder it may not write, say): said, and a failure.
            let left = engine.cache().session_size(id).await;
            if left > 0 {
                let why = format!("{} of {id} still cached: could not remove it", human(left));
                return Err(why.into());
            }
        }
        ("search", Some(_)) => {
            let query = args.positional.join(" ");
            if query.trim().is_empty() || args.limit == 0 {
                let why = "search: give words to find, and a --limit of 1 or more";
                return Err(Box::new(Usage(why.into())));
            }
            let mut out = std::io::stdout().lock();
            for hit in engine.search(&query, args.limit, None).await {
                let (seq, score) = (hit.seq.to_string(), format!("{:.2}", hit.score));
                let line = columns(&[&hit.session, &seq, &score, &hit.marked()]);
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
        }
        ("", _) => return Err(Box::new(Usage("no command given".into()))),
        (command, _) => {
            let what = format!("{command}: unknown command or wrong arguments");
            return Err(Box::new(Usage(what)));
        }
    }
    Ok(())
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KB", b as f64 / (1 << 10) as f64),
        b => format!("{b} B"),
    }
}

/// Opens `id` (no list first: the check brings the summary), waits until it is live (the check
/// passed, or the cold window came) or, when the server cannot be reached, until the cached
/// rows are drawn; pages back `pages` pages (through the cache only, offline), prints the rows,
/// and with `follow` goes on printing what streams. A session that is neither reachable nor
/// cached is an error saying so.
async fn open(
    engine: &Engine<FsStore, HttpTransport>,
    id: &str,
    pages: usize,
    follow: bool,
) -> Result<(), Fail> {
    // An id no URL can hold is refused before anything starts.
    scrollback::transport::usable_id(id)?;
    let session = engine.open_id(id, None).await?;
    let (tx, mut changes) = mpsc::unbounded::<()>();
    session.on_change(move |_, _| {
        let _ = tx.unbounded_send(());
    });
    let drive = async {
        // Wait until live (or, unreachable, until what is cached is drawn), then page back,
        // print, and follow.
        let mut banner = None;
        loop {
            let (live, ready, b) = session.with_view(|v| (v.live, v.ready, v.banner.clone()));
            if let Some(e) = session.with_view(|v| v.error.clone()) {
                // Stopped: no such session, a refused token, a refused id.
                return Err(e.message);
            }
            if let (Some(b), false, false) = (&b, live, ready) {
                // Unreachable and nothing cached: the error, said once (by `main`).
                return Err(b.clone());
            }
            if b.is_some() && b != banner {
                let b = b.as_deref().unwrap_or("");
                match follow {
                    true => say(b),
                    false => say(&format!("{b}: showing the cached session (not live)")),
                }
            }
            banner = b;
            if live {
                break;
            }
            if banner.is_some() {
                break; // offline: show what is cached (follow goes on retrying)
            }
            if changes.next().await.is_none() {
                return Ok(());
            }
        }
        for _ in 0..pages {
            match session.older().await {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    say(&format!("older page: {e}"));
                    break;
                }
            }
        }
        let mut printer = Printer::default();
        // A reader gone (`| head`): nothing more to print, and no error.
        if session.with_view(|v| printer.print(v)).is_err() || end_line().is_err() {
            return Ok(());
        }
        report(&session).await;
        if !follow {
            return Ok(());
        }
        let stop = tokio::signal::ctrl_c();
        futures::pin_mut!(stop);
        loop {
            let next = changes.next();
            futures::pin_mut!(next);
            match futures::future::select(next, stop.as_mut()).await {
                futures::future::Either::Left((Some(()), _)) => {
                    if session.with_view(|v| printer.print(v)).is_err() {
                        return Ok(());
                    }
                    if let Some(e) = session.with_view(|v| v.error.clone()) {
                        return Err(e.message); // deleted while followed, say
                    }
                }
                _ => break,
            }
        }
        let _ = end_line();
        report(&session).await;
        Ok(())
    };
    let run = session.run();
    futures::pin_mut!(run, drive);
    // `drive` finishing ends the session; `run` only ends when closed.
    match futures::future::select(run, drive).await {
        futures::future::Either::Right((Err(e), _)) => Err(e.into()),
        _ => Ok(()),
    }
}

async fn report(session: &Session<FsStore, HttpTransport>) {
    let c = session.counters();
    let size = session.cached_size().await;
    say(&format!(
        "{} requests, {} received; {} pages from the cache; probes {} passed, {} failed; {} cached",
        c.requests,
        human(c.bytes),
        c.local_pages,
        c.probes_passed,
        c.probes_failed,
        human(size)
    ));
}

/// Ends the line the printer left open.
fn end_line() -> std::io::Result<()> {
    writeln!(std::io::stdout())
}

/// Prints rows as they appear: whole rows, and the growing end of the last assistant message.
#[derive(Default)]
struct Printer {
    /// The first seq and row count printed, and the text length of the last row printed.
    first: Option<u64>,
    rows: usize,
    last_text: usize,
    status: String,
    /// Whether a line was begun (the next one starts on a new line).
    begun: bool,
}

impl Printer {
    /// Begins a new line of output (the first one right away, with no blank line above it).
    fn new_line(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if std::mem::replace(&mut self.begun, true) {
            writeln!(out)?;
        }
        Ok(())
    }

    /// Prints what is new in `view`; an error when the reader is gone.
    fn print(&mut self, view: &View) -> std::io::Result<()> {
        let rows = view.transcript.rows();
        let mut out = std::io::stdout().lock();
        if rows.front().map(Row::seq) != self.first || rows.len() < self.rows {
            // Something other than growth at the end: a reset or a page back; start over.
            if self.rows > 0 {
                self.new_line(&mut out)?;
                write!(out, "--- (the view was rebuilt) ---")?;
            }
            self.first = rows.front().map(Row::seq);
            self.rows = 0;
            self.last_text = 0;
        }
        if self.rows > 0 {
            if let Some(Row::Assistant { text, .. }) = rows.get(self.rows - 1) {
                let grown = text.get(self.last_text..).unwrap_or("");
                write!(out, "{}", printable(grown))?;
                self.last_text = text.len();
            }
        }
        for row in rows.iter().skip(self.rows) {
            self.new_line(&mut out)?;
            write!(out, "{}", printable(&describe(row)))?;
            self.last_text = match row {
                Row::Assistant { text, .. } => text.len(),
                _ => 0,
            };
        }
        self.rows = rows.len();
        let status = format!(
            "[{} · {} · {}{}]",
            view.state.status,
            view.state.model,
            view.state.permission_mode,
            view.state
                .context_tokens
                .map(|t| format!(" · {t} tokens"))
                .unwrap_or_default()
        );
        if status != self.status {
            self.new_line(&mut out)?;
            write!(out, "{}", printable(&status))?;
            self.status = status;
        }
        out.flush()
    }
}

/// One line of tab-separated columns, each made printable with its own tabs and line breaks
/// as spaces: a server's title or id cannot add a column or a line of its own.
fn columns(fields: &[&str]) -> String {
    let cells: Vec<String> = (fields.iter())
        .map(|f| printable(&f.replace(['\t', '\n', '\r'], " ")))
        .collect();
    cells.join("\t")
}

/// Text from the server with terminal control characters (escape sequences could move the
/// cursor, retitle the window or worse) and the bidirectional controls that reorder what
/// follows them on screen (embeddings, overrides, isolates: the "Trojan Source" characters)
/// shown as `\u{fffd}`; newlines and tabs kept.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => '\u{fffd}',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect()
}

fn describe(row: &Row) -> String {
    match row {
        Row::User { seq, text, .. } => format!("{seq:>6} you: {text}"),
        Row::Assistant { seq, text, .. } => format!("{seq:>6} assistant: {text}"),
        Row::Tool {
            seq, name, result, ..
        } => format!(
            "{seq:>6} tool {name}{}",
            if result.is_some() { " (done)" } else { "" }
        ),
        Row::ToolResult { seq, id, .. } => format!("{seq:>6} tool result for {id}"),
        Row::Command {
            seq, command, done, ..
        } => format!(
            "{seq:>6} command {command}{}",
            if *done { " (done)" } else { "" }
        ),
        Row::Status { seq, status, .. } => format!("{seq:>6} status: {status}"),
        Row::Usage { seq, context, .. } => format!("{seq:>6} context: {context} tokens"),
        Row::Settings {
            seq,
            model,
            permission_mode,
            ..
        } => format!(
            "{seq:>6} settings: {} {}",
            model.as_deref().unwrap_or(""),
            permission_mode.as_deref().unwrap_or("")
        ),
        Row::Queued { seq, text, .. } => format!("{seq:>6} queued: {text}"),
        Row::Compacting { seq, active, .. } => format!(
            "{seq:>6} {}",
            if *active {
                "compacting…"
            } else {
                "compacted"
            }
        ),
        Row::Error { seq, message, .. } => format!("{seq:>6} error: {message}"),
        Row::Unknown {
            seq, event_type, ..
        } => format!("{seq:>6} ({event_type})"),
        Row::Malformed {
            seq,
            event_type,
            reason,
            ..
        } => format!("{seq:>6} ({event_type}: {reason})"),
    }
}
