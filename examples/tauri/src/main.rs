//! A small Tauri 2 chat app over Scrollback.
//!
//! - The webview (`ui/`) imports the npm package and follows a session of a `scrollback-server`,
//!   cached in the webview's IndexedDB (in WebKitGTK, OPFS sync access handles do not work).
//! - This side keeps the app's own chats as windowed JSONL files under the app's data folder,
//!   through `scrollback::window` over `FsStore`, as the commands `chat_tail`, `chat_before`,
//!   `chat_patch`, `chat_replace` and `chat_backfill`, which the page calls with `invoke`.
//!
//! Environment: `SCROLLBACK_SERVER`, the server the page follows (default
//! `http://127.0.0.1:8080`); `SCROLLBACK_CHATS_DIR`, where the local chats live (default: the
//! app's data folder, `chats/` below it).

// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

use scrollback::store::FsStore;
use scrollback::window::{
    BackfillRequest, BackfillStop, CharsPerToken, ChatChunk, ChatTail, Chats, Cursor, PatchOp,
    PromptBackfill, WindowError, WriteOptions,
};
use serde::Serialize;
use std::path::PathBuf;
use tauri::{Manager, State};

/// The folder of the store the chats live in.
const FOLDER: &str = "chats";
/// The window: a tail's and a page's lines when the page does not say.
const WINDOW_LINES: usize = 50;

/// The app's managed state: one `Chats` (one write lock per chat) and one backfill cache for
/// the app's whole life.
struct LocalChats {
    chats: Chats<FsStore>,
    backfill: PromptBackfill,
}

/// What a command rejects with: the window error's kind (`signatureMismatch`, ...) and message.
#[derive(Debug, Serialize)]
struct CommandError {
    kind: &'static str,
    message: String,
}

impl From<WindowError> for CommandError {
    fn from(e: WindowError) -> Self {
        CommandError {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

type Reply<T> = Result<T, CommandError>;

/// What the page needs to know at start.
#[derive(Debug, Serialize)]
struct AppConfig {
    server: String,
    chats_dir: String,
}

#[tauri::command]
fn app_config(state: State<'_, AppConfigState>) -> AppConfig {
    AppConfig {
        server: state.server.clone(),
        chats_dir: state.chats_dir.display().to_string(),
    }
}

struct AppConfigState {
    server: String,
    chats_dir: PathBuf,
}

/// The header and the newest lines of a local chat (`maxLines`, default 50).
#[tauri::command]
async fn chat_tail(
    state: State<'_, LocalChats>,
    name: String,
    max_lines: Option<usize>,
    allow_not_found: Option<bool>,
) -> Reply<ChatTail> {
    let chat = state.chats.named(FOLDER, &name).await?;
    let tail = chat
        .tail(
            max_lines.unwrap_or(WINDOW_LINES),
            allow_not_found.unwrap_or(false),
        )
        .await?;
    Ok(tail)
}

/// Up to `maxLines` lines before `cursor`.
#[tauri::command]
async fn chat_before(
    state: State<'_, LocalChats>,
    name: String,
    cursor: Cursor,
    max_lines: Option<usize>,
) -> Reply<ChatChunk> {
    let chat = state.chats.named(FOLDER, &name).await?;
    Ok(chat
        .before(cursor, max_lines.unwrap_or(WINDOW_LINES))
        .await?)
}

/// A windowed patch (`{append: lines}` or `{rewriteFromIndex: n, lines}`, as `ChatWindow`
/// makes it) relative to the window at `cursor`; the new cursor.
#[tauri::command]
async fn chat_patch(
    state: State<'_, LocalChats>,
    name: String,
    cursor: Cursor,
    header: String,
    op: PatchOp,
    options: Option<WriteOptions>,
) -> Reply<Cursor> {
    let chat = state.chats.named(FOLDER, &name).await?;
    Ok(chat
        .patch(cursor, &header, &op, options.unwrap_or_default())
        .await?)
}

/// A full save: the whole chat becomes `header` and `lines` (unless its header is another
/// chat's: `options.force` writes it anyway).
#[tauri::command]
async fn chat_replace(
    state: State<'_, LocalChats>,
    name: String,
    header: String,
    lines: Vec<String>,
    options: Option<WriteOptions>,
) -> Reply<Cursor> {
    let chat = state.chats.named(FOLDER, &name).await?;
    Ok(chat
        .replace(&header, &lines, options.unwrap_or_default())
        .await?)
}

/// What `chat_backfill` answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BackfillReply {
    older: Vec<String>,
    stop: &'static str,
    pages_cached: usize,
    pages_read: usize,
}

/// Older lines behind the window for a prompt, up to `budgetTokens` (4 characters a token).
#[tauri::command]
async fn chat_backfill(
    state: State<'_, LocalChats>,
    name: String,
    window: Vec<String>,
    cursor: Cursor,
    has_more_before: bool,
    budget_tokens: usize,
) -> Reply<BackfillReply> {
    let chat = state.chats.named(FOLDER, &name).await?;
    let request = BackfillRequest {
        window: &window,
        cursor,
        has_more_before,
        budget_tokens,
        page_lines: WINDOW_LINES,
        max_pages: PromptBackfill::DESKTOP_PAGES,
        max_messages: usize::MAX,
    };
    let b = state
        .backfill
        .collect(&chat, &request, &CharsPerToken::default())
        .await?;
    let stop = match b.stop {
        BackfillStop::Budget => "budget",
        BackfillStop::PageCap => "pageCap",
        BackfillStop::MessageCap => "messageCap",
        BackfillStop::StartOfChat => "startOfChat",
        BackfillStop::StaleCursor(_) => "staleCursor",
    };
    Ok(BackfillReply {
        older: b.older,
        stop,
        pages_cached: b.pages_cached,
        pages_read: b.pages_read,
    })
}

fn main() {
    tauri::Builder::default()
        .setup(|app| {
            let chats_dir = match std::env::var_os("SCROLLBACK_CHATS_DIR") {
                Some(dir) => PathBuf::from(dir),
                None => app.path().app_data_dir()?,
            };
            std::fs::create_dir_all(&chats_dir)?;
            let server = std::env::var("SCROLLBACK_SERVER")
                .unwrap_or_else(|_| "http://127.0.0.1:8080".into());
            app.manage(LocalChats {
                chats: Chats::new(FsStore::new(&chats_dir)),
                backfill: PromptBackfill::new(PromptBackfill::DESKTOP_PAGES),
            });
            app.manage(AppConfigState { server, chats_dir });
            Ok(())
        })
        .invoke_handler(tauri::generate_handler![
            app_config,
            chat_tail,
            chat_before,
            chat_patch,
            chat_replace,
            chat_backfill
        ])
        .run(tauri::generate_context!())
        .expect("error while running the Tauri application");
}
