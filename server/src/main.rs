//! `scrollback-server`: see `--help`.

use clap::Parser;
use scrollback_server::{spawn, Config};

#[tokio::main]
async fn main() {
    let config = Config::parse();
    let guarded = config.token.is_some();
    let server = match spawn(config).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("scrollback-server: cannot start: {e}");
            std::process::exit(1);
        }
    };
    let note = if guarded { " (token required)" } else { "" };
    println!("scrollback-server: listening on {}/{note}", server.url());
    tokio::select! {
        result = async { tokio::signal::ctrl_c().await } => {
            if result.is_ok() {
                let _ = server.shutdown().await;
            }
        }
    }
}
