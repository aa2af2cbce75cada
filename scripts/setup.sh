#!/usr/bin/env bash
# Installs everything the build and the tests need, on a brand-new machine or this one.
# Idempotent: each step checks first, so a second run takes seconds. See ../shared/TOOLCHAIN.md
# for why each piece is needed.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1msetup:\033[0m %s\n' "$*" >&2; }

# 1. Debian's packages: a wasm-capable Rust (rustc-web), its std source for -Zbuild-std, the wasm
#    linker, and Chromium with its driver for the browser tests.
APT_PACKAGES=(rustc-web cargo-web rust-web-src lld-22 chromium chromium-driver)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  say "installing Debian packages: ${missing[*]} (a few minutes on a fresh machine)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
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

# 4. The Tauri example (examples/tauri): the GTK/WebKitGTK headers its `cargo build` links
#    against, and WebKitWebDriver plus a virtual display for its test. A separate block: the
#    engines' packages are installed above.
TAURI_PACKAGES=(libwebkit2gtk-4.1-dev libgtk-3-dev libsoup-3.0-dev librsvg2-dev webkit2gtk-driver xvfb)
missing=()
for p in "${TAURI_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  say "installing the Tauri example's packages: ${missing[*]} (about 2 minutes on a fresh machine)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
