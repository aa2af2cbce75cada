#!/usr/bin/env bash
# Runs wasm builds and tests with the environment they need, so nobody types it by hand:
# Debian's rustc-web (its LLVM knows wasm32) with -Zbuild-std, the version-matched wasm-bindgen,
# and Chromium through chromedriver for wasm-bindgen-test.
#
#   scripts/wasm.sh build            release build of the package into pkg/, sizes printed
#   scripts/wasm.sh test [ARGS...]   wasm-bindgen tests in headless Chromium (ARGS go to cargo test)
#
# `test` also starts the real scrollback-server for the browser transport's tests (see
# start_test_server), unless SCROLLBACK_TEST_SERVER already names one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
native_path="$PATH"                    # the default (rustup) toolchain, for the native server

# A free loopback port (the kernel's pick, released at once).
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Starts target/release/scrollback-server --sandbox with a token on a free port, a temp data dir,
# and CORS for the test runner's page, which is pinned to a free port of its own
# (WASM_BINDGEN_TEST_ADDRESS) so its origin is known. The tests read the server's URL and token
# at compile time (option_env!). The server and its data go when this script exits.
test_server=()                         # pid, data dir, log of the server started below
stop_test_server() {
  [ ${#test_server[@]} -eq 3 ] || return 0
  kill "${test_server[0]}" 2>/dev/null || true
  wait "${test_server[0]}" 2>/dev/null || true
  rm -rf "${test_server[1]}" "${test_server[2]}"
}
start_test_server() {
  env -u CARGO_TARGET_DIR -u RUSTFLAGS -u RUSTC_BOOTSTRAP PATH="$native_path" \
    cargo build -q --release -p scrollback-server
  local page_port data log
  page_port=$(free_port)
  data=$(mktemp -d); log="$data.log"; : >"$log"
  export WASM_BINDGEN_TEST_ADDRESS="127.0.0.1:$page_port"
  export SCROLLBACK_TEST_TOKEN="test-token-$RANDOM$RANDOM"
  SCROLLBACK_TOKEN="$SCROLLBACK_TEST_TOKEN" target/release/scrollback-server --sandbox \
    --data "$data" --addr 127.0.0.1:0 --allow-origin "http://127.0.0.1:$page_port" >"$log" 2>&1 &
  local pid=$!
  test_server=("$pid" "$data" "$log")
  trap stop_test_server EXIT
  trap 'exit 130' INT TERM
  for _ in $(seq 100); do
    SCROLLBACK_TEST_SERVER=$(sed -n 's|.*listening on \(http://[^/ ]*\).*|\1|p' "$log")
    [ -n "$SCROLLBACK_TEST_SERVER" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; echo "scrollback-server did not start" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$SCROLLBACK_TEST_SERVER" ] || { echo "scrollback-server did not start" >&2; exit 1; }
  export SCROLLBACK_TEST_SERVER
  echo "wasm tests: scrollback-server at $SCROLLBACK_TEST_SERVER, test page at http://$WASM_BINDGEN_TEST_ADDRESS" >&2
}

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
    # The hand-written JS API (page side, worker, types) goes next to wasm-bindgen's output.
    cp js/index.js js/worker.js js/index.d.ts "$out/"
    opt="$root/node_modules/.bin/wasm-opt"
    sizes() { printf '%s bytes raw, %s bytes gzipped' "$(stat -c %s "$1")" "$(gzip -9 -c "$1" | wc -c)"; }
    if [ -x "$opt" ]; then
      before=$(sizes "$out/scrollback_bg.wasm")
      "$opt" -Os --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
        --enable-mutable-globals --enable-reference-types --enable-multivalue \
        "$out/scrollback_bg.wasm" -o "$out/scrollback_bg.wasm"
      echo "wasm-opt -Os: from $before" >&2
    else
      echo "wasm.sh: wasm-opt not found (npm ci installs binaryen): the module is not optimized" >&2
    fi
    printf 'wasm size: %s (%s)\n' "$(sizes "$out/scrollback_bg.wasm")" "pkg/scrollback_bg.wasm"
    ;;
  test)
    [ -n "${SCROLLBACK_TEST_SERVER:-}" ] || start_test_server
    # Without an explicit --test/--lib: the library and tests/* (examples are native benchmarks).
    select=(--tests)
    for a in "$@"; do case "$a" in --test|--test=*|--lib) select=() ;; esac; done
    cargo test -p scrollback "${select[@]}" "${target[@]}" "$@"
    ;;
  *)
    echo "usage: scripts/wasm.sh build | test [cargo test args]" >&2; exit 2 ;;
esac
