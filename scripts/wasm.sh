#!/usr/bin/env bash
# Runs wasm builds and tests with the environment they need, so nobody types it by hand:
# Debian's rustc-web (its LLVM knows wasm32) with -Zbuild-std, the version-matched wasm-bindgen,
# and wasm-bindgen-test-runner driving a browser.
#
#   scripts/wasm.sh build            release build of the package into pkg/, sizes printed
#   scripts/wasm.sh test [--engine E] [CARGO ARGS...] [-- RUNNER ARGS...]
#        wasm-bindgen tests: built once (cargo test --no-run), then every test .wasm is run by
#        wasm-bindgen-test-runner in engine E: chromium (default; chromedriver), webkitgtk
#        (WebKitWebDriver under Xvfb, through tests/lib/wd-proxy.py, which gives the runner's
#        empty Safari-mode capabilities the storage features and tests/lib/wkbrowser.py, a
#        WebKitGTK browser with an on-disk profile), firefox (geckodriver, firefox-esr). A second
#        engine reuses the build: cargo has nothing to do, the same .wasm files run.
#
# A test that cannot run in an engine is not run there: it is printed as "skipped: ENGINE
# BINARY TEST: REASON" and counted on a "skipped N" line (see SKIPS). `test` also starts the
# real scrollback-server for the browser transport's tests (see start_test_server), unless
# SCROLLBACK_TEST_SERVER already names one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
native_path="$PATH"                    # the default (rustup) toolchain, for the native server

# A free loopback port (the kernel's pick, released at once).
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Starts target/PROFILE/scrollback-server (SCROLLBACK_PROFILE, release unless set; npm test's
# is ci) --sandbox with a token on a free port, a temp data dir,
# and CORS for the test runner's page, which is pinned to a free port of its own
# (WASM_BINDGEN_TEST_ADDRESS) so its origin is known. The tests read the server's URL and token
# at compile time (option_env!). The server and its data go when this script exits.
test_server=()                         # pid, data dir, log of the server started below
server_profile="${SCROLLBACK_PROFILE:-release}"
stop_test_server() {
  [ ${#test_server[@]} -eq 3 ] || return 0
  kill "${test_server[0]}" 2>/dev/null || true
  wait "${test_server[0]}" 2>/dev/null || true
  rm -rf "${test_server[1]}" "${test_server[2]}"
}
start_test_server() {
  env -u CARGO_TARGET_DIR -u RUSTFLAGS -u RUSTC_BOOTSTRAP PATH="$native_path" \
    cargo build -q --profile "$server_profile" -p scrollback-server
  local page_port data log
  page_port=$(free_port)
  data=$(mktemp -d); log="$data.log"; : >"$log"
  export WASM_BINDGEN_TEST_ADDRESS="127.0.0.1:$page_port"
  export SCROLLBACK_TEST_TOKEN="test-token-$RANDOM$RANDOM"
  # A loopback port nothing listens on (the kernel's pick, released), for the unreachable-server
  # test: a well-known closed port such as 9 is on the browsers' blocked list, and WebKit never
  # fires an EventSource error for a blocked port.
  export SCROLLBACK_TEST_DEAD="http://127.0.0.1:$(free_port)"
  SCROLLBACK_TOKEN="$SCROLLBACK_TEST_TOKEN" "target/$server_profile/scrollback-server" --sandbox \
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

export PATH="/usr/bin:$PATH"           # Debian's cargo/rustc first; see README "Set-up"
export RUSTC_BOOTSTRAP=1               # lets the stable toolchain take -Zbuild-std
export CARGO_TARGET_DIR="${SCROLLBACK_WASM_TARGET_DIR:-$root/target/wasm}"
export RUSTFLAGS="${RUSTFLAGS:-} --cfg=web_sys_unstable_apis"
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-120}"
target=(--target wasm32-unknown-unknown -Zbuild-std=std,panic_abort)

# Tests that cannot run in an engine, one per line: ENGINE|BINARY|NAME FILTER (empty: all of the
# binary)|REASON. Everything else must pass in every engine.
NO_SYNC_HANDLES="OPFS sync access handles throw NotSupportedError in WebKitGTK (WebKit implements them on Apple platforms only); 'auto' uses IndexedDB there"
SKIPS="webkitgtk|store_opfs||$NO_SYNC_HANDLES
webkitgtk|chunks_opfs||$NO_SYNC_HANDLES
webkitgtk|store_race|opfs|$NO_SYNC_HANDLES"

# Starts what the engine's runner talks to, and points wasm-bindgen-test-runner at it (exactly
# one driver variable set: the runner takes the first it finds). Stopped when the script exits.
engine_pids=()
engine_tmp=""
engine_stop() {
  for pid in "${engine_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${engine_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -z "$engine_tmp" ] || rm -rf "$engine_tmp"
}
engine_start() {
  unset CHROMEDRIVER GECKODRIVER SAFARIDRIVER SAFARIDRIVER_REMOTE WASM_BINDGEN_TEST_WEBDRIVER_JSON
  trap 'stop_test_server; engine_stop' EXIT
  case "$1" in
    chromium)
      export CHROMEDRIVER=/usr/bin/chromedriver
      export WASM_BINDGEN_TEST_WEBDRIVER_JSON="$root/crate/webdriver.json" ;;
    firefox)
      GECKODRIVER=$(command -v geckodriver || echo "$HOME/.cargo/bin/geckodriver")
      export GECKODRIVER
      export WASM_BINDGEN_TEST_WEBDRIVER_JSON="$root/tests/lib/webdriver-firefox.json" ;;
    webkitgtk)
      engine_tmp=$(mktemp -d)
      # A display of its own (Xvfb picks a free number and writes it to fd 3).
      Xvfb -displayfd 3 -screen 0 1280x1024x24 -nolisten tcp 3>"$engine_tmp/display" 2>/dev/null &
      engine_pids+=($!)
      for _ in $(seq 100); do [ -s "$engine_tmp/display" ] && break; sleep 0.1; done
      [ -s "$engine_tmp/display" ] || { echo "Xvfb did not start" >&2; exit 1; }
      local driver_port proxy_port
      driver_port=$(free_port); proxy_port=$(free_port)
      DISPLAY=":$(cat "$engine_tmp/display")" WK_PROFILE="$engine_tmp/profile" \
        WebKitWebDriver --port="$driver_port" >"$engine_tmp/driver.log" 2>&1 &
      engine_pids+=($!)
      WK_CAPS=$(printf '{"webkitgtk:browserOptions":{"binary":"%s","args":["--automation","--features=%s"]}}' \
        "$root/tests/lib/wkbrowser.py" "$WEBKIT_FEATURES") \
        python3 "$root/tests/lib/wd-proxy.py" "$proxy_port" "$driver_port" &
      engine_pids+=($!)
      for _ in $(seq 100); do
        curl -fs "http://127.0.0.1:$proxy_port/status" >/dev/null 2>&1 && break; sleep 0.1
      done
      export SAFARIDRIVER_REMOTE="http://127.0.0.1:$proxy_port" ;;
  esac
}
# The WebKit features a Scrollback page needs (storage APIs are off by default in WebKitGTK).
WEBKIT_FEATURES="+StorageAPI,+StorageAPIEstimate,+FileSystem,+FileSystemWritableStream,+AccessHandle"

cmd="${1:-build}"; shift || true
case "$cmd" in
  build)
    # Two modules: the worker's (the crate with its bindings), and the page's small one
    # (screen/: the fold and the view alone). Built apart, so the second's build of the crate
    # is without `bindings` (one cargo call would unify the features).
    cargo build -q -p scrollback --lib --profile wasm "${target[@]}"
    cargo build -q -p scrollback-screen --lib --profile wasm "${target[@]}"
    out="$root/pkg"
    rm -rf "$out"
    for name in scrollback scrollback_screen; do
      wasm-bindgen --target web --out-dir "$out" --out-name "$name" \
        "$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm/$name.wasm"
    done
    # The hand-written JS API (page side, worker, types) goes next to wasm-bindgen's output.
    cp js/index.js js/screen.js js/worker.js js/index.d.ts "$out/"
    opt="$root/node_modules/.bin/wasm-opt"
    sizes() { printf '%s bytes raw, %s bytes gzipped' "$(stat -c %s "$1")" "$(gzip -9 -c "$1" | wc -c)"; }
    for wasm in "$out/scrollback_bg.wasm" "$out/scrollback_screen_bg.wasm"; do
      if [ -x "$opt" ]; then
        before=$(sizes "$wasm")
        "$opt" -Os --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
          --enable-mutable-globals --enable-reference-types --enable-multivalue \
          "$wasm" -o "$wasm"
        echo "wasm-opt -Os: from $before" >&2
      else
        echo "wasm.sh: wasm-opt not found (npm ci installs binaryen): the module is not optimized" >&2
      fi
      printf 'wasm size: %s (%s)\n' "$(sizes "$wasm")" "pkg/$(basename "$wasm")"
    done
    # Precompressed copies (brotli 11, gzip 9), as a bundler's build or a CDN keeps them: the
    # server sends these instead of compressing the module on every first visit. Not in the npm
    # package (package.json "files" names the files it holds).
    node -e '
      const fs = require("fs"), zlib = require("zlib");
      for (const f of process.argv.slice(1)) {
        const raw = fs.readFileSync(f);
        fs.writeFileSync(`${f}.br`, zlib.brotliCompressSync(raw, { params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: raw.length } }));
        fs.writeFileSync(`${f}.gz`, zlib.gzipSync(raw, { level: 9 }));
      }' "$out/scrollback_bg.wasm" "$out/scrollback.js" "$out/scrollback_screen_bg.wasm" \
        "$out/scrollback_screen.js" "$out/index.js" "$out/screen.js" "$out/worker.js"
    ;;
  test)
    engine=chromium; cargo_args=(); runner_args=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --engine) engine="$2"; shift 2 ;;
        --engine=*) engine="${1#*=}"; shift ;;
        --) shift; runner_args=("$@"); break ;;
        *) cargo_args+=("$1"); shift ;;
      esac
    done
    case "$engine" in chromium|webkitgtk|firefox) ;; *) echo "unknown engine $engine" >&2; exit 2 ;; esac
    # The crate's wasm32-only code (the bindings, the browser stores and transport) is built
    # nowhere natively, so scripts/lint.sh's clippy never sees it, and Debian's wasm toolchain
    # has no clippy: its tests build with the compiler's warnings as errors instead (cargo caps
    # the lints of registry crates, so only the workspace's own code is held to it). The
    # package's build (`build`, `npm start`) is not: a newer compiler's new warning must not
    # stop a user's build.
    export RUSTFLAGS="$RUSTFLAGS -D warnings"
    # Without an explicit --test/--lib: the library and tests/* (examples are native benchmarks).
    select=(--tests); whole=1
    for a in "${cargo_args[@]}"; do case "$a" in --test|--test=*|--lib) select=(); whole=0 ;; esac; done
    [ -n "${SCROLLBACK_TEST_SERVER:-}" ] || start_test_server
    # Build once; the test binaries are the .wasm files cargo names.
    # The test kit (`scrollback::testing`: the store suite) is the `testing` feature; the crate's
    # dev-dependency on itself turns it on for every test target, and so does this, explicitly.
    bins=$(cargo test -q -p scrollback --features testing "${select[@]}" "${target[@]}" "${cargo_args[@]}" --no-run \
      --message-format=json-render-diagnostics \
      | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable"): print(m["executable"])')
    engine_start "$engine"
    skipped=0; status=0
    for bin in $bins; do
      name=$(basename "$bin" .wasm); name="${name%-*}"
      # The storage benchmark has only an ignored test: with everything, it is Chromium's alone.
      if [ "$whole" = 1 ] && [ "$name" = bench_storage ] && [ "$engine" != chromium ]; then continue; fi
      skip_args=()
      while IFS='|' read -r e b filter reason; do
        [ "$e" = "$engine" ] && [ "$b" = "$name" ] || continue
        while read -r t; do
          [ -n "$t" ] || continue
          echo "skipped: $engine $name ${t%: test}: $reason"; skipped=$((skipped + 1))
        done < <(wasm-bindgen-test-runner "$bin" --list ${filter:+"$filter"} 2>/dev/null | grep ': test$')
        if [ -z "$filter" ]; then continue 2; fi
        skip_args+=(--skip "$filter")
      done <<<"$SKIPS"
      echo "     Running $name ($engine)"
      # A WebDriver that never answers before the first test starts (seen once in WebKitGTK on a
      # loaded machine: the runner's first script timed out, no test had run) is the driver's,
      # not a test's: the binary runs once more, said as "retried:" in the summary. A failure
      # once tests are running is never retried.
      out=$(mktemp)
      rc=0; wasm-bindgen-test-runner "$bin" "${skip_args[@]}" "${runner_args[@]}" 2>&1 | tee "$out" || rc=${PIPESTATUS[0]}
      if [ "$rc" -ne 0 ] && ! grep -q '^running [0-9]* test' "$out" && grep -q 'webdriver .* timed out' "$out"; then
        echo "retried: $engine $name: $(grep -m1 'webdriver .* timed out' "$out")"
        rc=0; wasm-bindgen-test-runner "$bin" "${skip_args[@]}" "${runner_args[@]}" || rc=$?
      fi
      rm -f "$out"
      [ "$rc" -eq 0 ] || status=1
    done
    echo "skipped $skipped"
    exit $status
    ;;
  *)
    echo "usage: scripts/wasm.sh build | test [cargo test args]" >&2; exit 2 ;;
esac
