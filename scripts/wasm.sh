#!/usr/bin/env bash
# Runs wasm builds and tests with the environment they need, so nobody types it by hand:
# Debian's rustc-web (its LLVM knows wasm32) with -Zbuild-std, the version-matched wasm-bindgen,
# and Chromium through chromedriver for wasm-bindgen-test.
#
#   scripts/wasm.sh build            release build of the package into pkg/, sizes printed
#   scripts/wasm.sh test [ARGS...]   wasm-bindgen tests in headless Chromium (ARGS go to cargo test)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

export PATH="/usr/bin:$PATH"           # Debian's cargo/rustc first; see TOOLCHAIN.md
export RUSTC_BOOTSTRAP=1               # lets the stable toolchain take -Zbuild-std
export CARGO_TARGET_DIR="${SCROLLBACK_WASM_TARGET_DIR:-$root/target/wasm}"
export RUSTFLAGS="${RUSTFLAGS:-} --cfg=web_sys_unstable_apis"
export CHROMEDRIVER=/usr/bin/chromedriver
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-120}"
target=(--target wasm32-unknown-unknown -Zbuild-std=std,panic_abort)

cmd="${1:-build}"; shift || true
case "$cmd" in
  build)
    cargo build -q -p scrollback --lib --profile wasm "${target[@]}"
    out="$root/pkg"
    rm -rf "$out"
    wasm-bindgen --target web --out-dir "$out" --out-name scrollback \
      "$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm/scrollback.wasm"
    opt="$root/node_modules/.bin/wasm-opt"
    if [ -x "$opt" ]; then
      "$opt" -Os --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
        --enable-mutable-globals --enable-reference-types --enable-multivalue \
        "$out/scrollback_bg.wasm" -o "$out/scrollback_bg.wasm"
    fi
    raw=$(stat -c %s "$out/scrollback_bg.wasm")
    gz=$(gzip -9 -c "$out/scrollback_bg.wasm" | wc -c)
    printf 'wasm size: %s bytes raw, %s bytes gzipped (%s)\n' "$raw" "$gz" "pkg/scrollback_bg.wasm"
    ;;
  test)
    # Without an explicit --test/--lib: the library and tests/* (examples are native benchmarks).
    select=(--tests)
    for a in "$@"; do case "$a" in --test|--test=*|--lib) select=() ;; esac; done
    cargo test -p scrollback "${select[@]}" "${target[@]}" "$@"
    ;;
  *)
    echo "usage: scripts/wasm.sh build | test [cargo test args]" >&2; exit 2 ;;
esac
