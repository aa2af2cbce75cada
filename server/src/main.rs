//! `scrollback-server`: see `--help`.

use clap::Parser;
use scrollback_server::{memory, spawn, Config};

fn main() {
    memory::limit_arenas();
    let config = Config::parse();
    // A blocking-pool thread let go after 10 s idle leaves its arena's memory free: trim then.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_stop(memory::thread_stopped)
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(run(config)),
        Err(e) => {
            eprintln!("scrollback-server: cannot start: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(config: Config) {
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
    stopped().await;
    let _ = server.shutdown().await;
}

/// Ctrl-C, or SIGTERM where there is one (what a test harness or a service manager sends).
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
