#!/usr/bin/env bash
# `npm start`: sets up if needed, builds the wasm package and the reference server, and runs the
# server with sandbox data, serving the demo page. One process, one port, loopback by default.
# Environment: SCROLLBACK_ADDR (default 127.0.0.1:8080), SCROLLBACK_DATA (default target/sandbox).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh --build
scripts/wasm.sh build
cargo build -q --release -p scrollback-server
addr="${SCROLLBACK_ADDR:-127.0.0.1:8080}"
data="${SCROLLBACK_DATA:-$root/target/sandbox}"
exec target/release/scrollback-server --sandbox --data "$data" --addr "$addr" --www "$root/www" --pkg "$root/pkg"
