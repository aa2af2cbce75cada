#!/usr/bin/env bash
# Installs everything the build and the tests need, on a brand-new machine or this one.
# Idempotent: each step checks first, so a second run takes seconds. See ../shared/TOOLCHAIN.md
# for why each piece is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

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

# 1b. The other engines the tests run in (TOOLCHAIN.md sections 6 and 7): WebKitGTK's WebDriver
#     and a virtual display for it, what tests/lib/wkbrowser.py (a WebKitGTK browser with an
#     on-disk profile, for OPFS and IndexedDB) needs, and Firefox ESR.
ENGINE_PACKAGES=(webkit2gtk-driver xvfb firefox-esr)
ENGINE_BARE_PACKAGES=(python3-gi gir1.2-webkit2-4.1)   # without their recommends (no desktop)
missing=(); missing_bare=()
for p in "${ENGINE_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
for p in "${ENGINE_BARE_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing_bare+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_bare[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  say "installing the other engines: ${missing[*]} ${missing_bare[*]} (about a minute)"
  $SUDO apt-get update -qq
  apt_install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq "$@" >/dev/null; }
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  [ ${#missing_bare[@]} -eq 0 ] || apt_install --no-install-recommends "${missing_bare[@]}"
fi

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
