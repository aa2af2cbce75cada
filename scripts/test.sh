#!/usr/bin/env bash
# `npm test`: sets up if needed, then runs every test layer and fails if any layer fails or runs
# no test:
#   native   cargo test for the workspace (protocol, store, chunks, engine, server over HTTP)
#   wasm     wasm-bindgen tests in headless Chromium (the same suites on OPFS / IndexedDB)
#   js       end-to-end tests under tests/ (node's test runner, playwright-core, the real server)
#   tauri    the Tauri example (examples/tauri), built and driven in WebKitGTK under xvfb-run
# The last line is the total, as "N passed, N failed".
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh || { echo "setup failed"; exit 1; }

logs="$root/target/test-logs"
mkdir -p "$logs"
total_pass=0; total_fail=0; summary=()

# Adds up "test result: ... N passed; M failed" lines (cargo and wasm-bindgen-test-runner).
cargo_counts() { awk '/test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } END { print p + 0, f + 0 }' "$1"; }
# node --test's closing "# pass N" / "# fail N".
node_counts() { awk '/^# pass/ { p = $3 } /^# fail/ { f = $3 } END { print p + 0, f + 0 }' "$1"; }

layer() {
  local name="$1" counter="$2"; shift 2
  local log="$logs/$name.log"
  printf '\n\033[1m== %s: %s\033[0m\n' "$name" "$*"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  read -r pass fail < <("$counter" "$log")
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail))
  local verdict="ok"
  if [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; [ "$fail" -eq 0 ] && total_fail=$((total_fail + 1)); fi
  if [ "$pass" -eq 0 ] && [ "$rc" -eq 0 ]; then verdict="FAILED (ran no test)"; total_fail=$((total_fail + 1)); fi
  summary+=("$(printf '%-7s %5d passed %4d failed   %s' "$name" "$pass" "$fail" "$verdict")")
}

layer native cargo_counts cargo test --workspace --release
layer wasm cargo_counts scripts/wasm.sh test --release
# The end-to-end tests run the package as `npm start` builds it.
if scripts/wasm.sh build && cargo build -q --release -p scrollback-server; then
  layer js node_counts node --test --test-concurrency=1 tests/
else
  summary+=("js      build of the package or the server FAILED"); total_fail=$((total_fail + 1))
fi

# The Tauri example: its own workspace and target dir (examples/tauri/target), built here, then
# driven through WebKitWebDriver in a virtual display (tests/tauri.e2e.mjs).
if [ -f pkg/scrollback_bg.wasm ] && (cd examples/tauri && cargo build -q --release); then
  layer tauri node_counts xvfb-run -a -s "-screen 0 1280x1024x24" node --test --test-concurrency=1 tests/tauri.e2e.mjs
else
  summary+=("tauri   build of the example FAILED"); total_fail=$((total_fail + 1))
fi

printf '\n\033[1m== summary\033[0m\n'
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
