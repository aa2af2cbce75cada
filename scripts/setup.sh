#!/usr/bin/env bash
# Installs everything the build and the tests need, on a brand-new machine or this one.
# Idempotent: each step checks first, so a second run takes seconds. See ../shared/TOOLCHAIN.md
# for why each piece is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\033[1msetup:\033[0m %s\n' "$*" >&2; }

# Installs the Debian packages named that are not installed yet, saying what for (`$1`).
# `--bare` first: without their recommends.
apt_ensure() {
  local bare=() what
  [ "$1" = --bare ] && { bare=(--no-install-recommends); shift; }
  what="$1"; shift
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  say "installing $what: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
    "${bare[@]}" "${missing[@]}" >/dev/null
}

# 1. Debian's packages: a wasm-capable Rust (rustc-web), its std source for -Zbuild-std, the wasm
#    linker, and Chromium with its driver for the browser tests.
apt_ensure "the wasm toolchain and Chromium (a few minutes on a fresh machine)" \
  rustc-web cargo-web rust-web-src lld-22 chromium chromium-driver

# 1b. The other engines the tests run in (TOOLCHAIN.md sections 6 and 7): WebKitGTK's WebDriver
#     and a virtual display for it, what tests/lib/wkbrowser.py (a WebKitGTK browser with an
#     on-disk profile, for OPFS and IndexedDB) needs, and Firefox ESR.
apt_ensure "the other engines (about a minute)" webkit2gtk-driver xvfb firefox-esr
apt_ensure --bare "WebKitGTK's Python bindings (no desktop)" python3-gi gir1.2-webkit2-4.1

# 1c. geckodriver (Firefox's WebDriver): Debian has none; crates.io has it.
GECKODRIVER_VERSION=0.37.1
have=$(geckodriver --version 2>/dev/null | awk 'NR == 1 {print $2}' || true)
if [ "$have" != "$GECKODRIVER_VERSION" ]; then
  say "installing geckodriver $GECKODRIVER_VERSION from crates.io (about 2 minutes, once)"
  cargo install -q geckodriver --version "$GECKODRIVER_VERSION"
fi

# 2. The wasm-bindgen CLI, exactly the version of the crate pinned in Cargo.toml.
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' Cargo.toml)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  say "installing wasm-bindgen-cli $want (about 2 minutes, once)"
  cargo install -q wasm-bindgen-cli --version "$want"
fi

# 3. The JS tools (playwright-core drives Debian's Chromium; binaryen's wasm-opt).
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error
fi

# 4. The Tauri example (examples/tauri), unless its test layer is left out (SCROLLBACK_TAURI=0):
#    the GTK/WebKitGTK headers its `cargo build` links against.
if [ "${SCROLLBACK_TAURI:-1}" != 0 ]; then
  apt_ensure "the Tauri example's packages (about 2 minutes on a fresh machine)" \
    libwebkit2gtk-4.1-dev libgtk-3-dev libsoup-3.0-dev librsvg2-dev
fi
