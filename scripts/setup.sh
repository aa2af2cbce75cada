#!/usr/bin/env bash
# Installs everything the build and the tests need, on a brand-new machine or this one (Debian
# 12 with rustup's toolchain); `--build`: only what building the package and the server needs
# (`npm start`), not the browsers, drivers and headers the tests use (`npm test`).
# Idempotent: each step checks first, so a second run takes seconds. Each step says what its
# pieces are for.
set -euo pipefail
only_build=""; [ "${1:-}" = --build ] && only_build=1
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

# 1. Debian's packages: a wasm-capable Rust (rustc-web: rustup cannot fetch the wasm32 target
#    here), its std source for -Zbuild-std, and the wasm linker.
apt_ensure "the wasm toolchain (a few minutes on a fresh machine)" \
  rustc-web cargo-web rust-web-src lld-22

# 2. The wasm-bindgen CLI, exactly the version of the crate pinned in Cargo.toml.
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' Cargo.toml)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  say "installing wasm-bindgen-cli $want (about 2 minutes, once)"
  cargo install -q wasm-bindgen-cli --version "$want"
fi

# 3. The JS tools (binaryen's wasm-opt for the build; playwright-core drives Debian's Chromium in
#    the tests).
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error
fi

[ -z "$only_build" ] || exit 0

# 4. The engines the tests run in: Chromium with its driver;
# 4b. WebKitGTK's WebDriver and a virtual display for it, what tests/lib/wkbrowser.py (a WebKitGTK
#     browser with an on-disk profile, for OPFS and IndexedDB) needs, and Firefox ESR.
apt_ensure "Chromium and its driver" chromium chromium-driver
apt_ensure "the other engines (about a minute)" webkit2gtk-driver xvfb firefox-esr
apt_ensure --bare "WebKitGTK's Python bindings (no desktop)" python3-gi gir1.2-webkit2-4.1

# 4c. geckodriver (Firefox's WebDriver): Debian has none; crates.io has it.
GECKODRIVER_VERSION=0.37.1
have=$(geckodriver --version 2>/dev/null | awk 'NR == 1 {print $2}' || true)
if [ "$have" != "$GECKODRIVER_VERSION" ]; then
  say "installing geckodriver $GECKODRIVER_VERSION from crates.io (about 2 minutes, once)"
  cargo install -q geckodriver --version "$GECKODRIVER_VERSION"
fi

# 5. The Tauri example (examples/tauri), unless its test layer is left out (SCROLLBACK_TAURI=0):
#    the GTK/WebKitGTK headers its `cargo build` links against.
if [ "${SCROLLBACK_TAURI:-1}" != 0 ]; then
  apt_ensure "the Tauri example's packages (about 2 minutes on a fresh machine)" \
    libwebkit2gtk-4.1-dev libgtk-3-dev libsoup-3.0-dev librsvg2-dev
fi
