//! `scrollback-server`: the reference transcript server (being built).

fn main() {
    eprintln!("scrollback-server: not built yet");
    std::process::exit(2);
}
