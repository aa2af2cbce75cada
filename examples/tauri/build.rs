//! Copies the built npm package (`../../pkg`, made by `scripts/wasm.sh build`) into `ui/pkg/`,
//! which Tauri embeds with the page, then runs Tauri's build step.

use std::path::Path;

const FILES: [&str; 7] = [
    "index.js",
    "screen.js",
    "worker.js",
    "scrollback.js",
    "scrollback_bg.wasm",
    "scrollback_screen.js",
    "scrollback_screen_bg.wasm",
];

fn main() {
    let pkg = Path::new("../../pkg");
    let out = Path::new("ui/pkg");
    std::fs::create_dir_all(out).expect("ui/pkg");
    for file in FILES {
        let from = pkg.join(file);
        println!("cargo:rerun-if-changed={}", from.display());
        if let Err(e) = std::fs::copy(&from, out.join(file)) {
            panic!(
                "{}: {e}; build the package first (scripts/wasm.sh build)",
                from.display()
            );
        }
    }
    tauri_build::build()
}
