#!/usr/bin/env bash
# `npm test`: sets up if needed, then runs every test layer and fails if any layer fails or runs
# no test:
#   native           cargo test for the workspace (protocol, store, chunks, engine, server)
#   wasm ENGINE      wasm-bindgen tests (the same suites on OPFS / IndexedDB, the browser
#                    transport against the real server), built once, the same .wasm files run
#                    in Chromium, WebKitGTK and Firefox (scripts/wasm.sh test --engine)
#   js chromium      end-to-end tests under tests/ (node's test runner, playwright-core), two
#                    files at a time
#   js ENGINE        the package's end-to-end scenario (tests/engines.test.mjs) and the chats
#                    surface (tests/chats.test.mjs) in WebKitGTK and Firefox through WebDriver
#                    (tests/lib/engines.mjs)
#   tauri            the Tauri example (examples/tauri), built in the background while the other
#                    layers run, then driven in WebKitGTK under xvfb-run through WebKitWebDriver
#                    (tests/tauri.e2e.mjs); SCROLLBACK_TAURI=0 leaves it out
# A line per engine per layer gives passed, failed and skipped counts, then each skipped test
# with its reason. The last line is the total, as "N passed, N failed, N skipped".
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"

bash scripts/setup.sh || { echo "setup failed"; exit 1; }

logs="$root/target/test-logs"
mkdir -p "$logs"
total_pass=0; total_fail=0; summary=()

total_skip=0
# Adds up "test result: ... N passed; M failed" lines (cargo and wasm-bindgen-test-runner), and
# the "skipped: ENGINE BINARY TEST: REASON" lines of scripts/wasm.sh.
cargo_counts() { awk '/test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } } /^skipped: / { s += 1 } END { print p + 0, f + 0, s + 0 }' "$1"; }
cargo_skips() { sed -n 's/^skipped: [^ ]* //p' "$1"; }
# node --test's closing "# pass N" / "# fail N" / "# skipped N" (TAP), and "ok N - NAME # SKIP REASON".
node_counts() { awk '/^# pass/ { p = $3 } /^# fail/ { f = $3 } /^# skipped/ { s = $3 } END { print p + 0, f + 0, s + 0 }' "$1"; }
node_skips() { sed -n 's/^ *ok [0-9]* - \(.*\) # SKIP *\(.*\)$/\1: \2/p' "$1"; }
# scripts/lint.sh's "lint ok: CHECK" / "lint FAILED: CHECK" lines, one per check.
lint_counts() { awk '/^lint ok: / { p += 1 } /^lint FAILED: / { f += 1 } END { print p + 0, f + 0, 0 }' "$1"; }
lint_skips() { :; }

layer() {
  local name="$1" counter="$2"; shift 2
  local log="$logs/${name// /-}.log" started=$SECONDS
  printf '\n\033[1m== %s: %s\033[0m\n' "$name" "$*"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  read -r pass fail skip < <("${counter}_counts" "$log")
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail)); total_skip=$((total_skip + skip))
  local verdict="ok"
  if [ "$rc" -ne 0 ]; then verdict="FAILED (exit $rc)"; [ "$fail" -eq 0 ] && total_fail=$((total_fail + 1)); fi
  if [ "$pass" -eq 0 ] && [ "$rc" -eq 0 ]; then verdict="FAILED (ran no test)"; total_fail=$((total_fail + 1)); fi
  summary+=("$(printf '%-14s %5d passed %4d failed %4d skipped  %4ds  %s' "$name" "$pass" "$fail" "$skip" $((SECONDS - started)) "$verdict")")
  while IFS= read -r why; do [ -z "$why" ] || summary+=("    skipped: $why"); done < <("${counter}_skips" "$log")
  while IFS= read -r why; do summary+=("    retried: $why"); done < <(sed -n 's/^retried: //p' "$log")
}

# The Tauri example is its own Cargo workspace (about 420 crates, GTK and WebKitGTK bindings,
# few shared with ours), so its cold build runs in the background from here to its layer at the
# end, as an idle task (SCHED_IDLE, `chrt --idle`): it takes only the CPU the other layers leave
# (a single-threaded link, the browser layers' waits), so it never slows their compiles or a
# test (at `nice -n 10` the wasm chromium layer took 493 s beside it, 349 alone). Its own target dir
# (examples/tauri/target): a shared one would lock and serialize the two builds. Its build.rs
# embeds the package, so the package is built first (once: a second build would remove pkg/
# under the example's build.rs). The dev profile (no debug info, no incremental state for a
# cold build): optimizing would cost about twice the CPU, which the other layers need.
tauri_pid="" tauri_log="the package build (scripts/wasm.sh build)" pkg_built=""
if [ "${SCROLLBACK_TAURI:-1}" != 0 ]; then
  if scripts/wasm.sh build; then
    pkg_built=1 tauri_log="$logs/tauri-build.log"
    echo "tauri: building examples/tauri in the background (log: $tauri_log)"
    idle=(nice -n 19); chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0)
    ( started=$SECONDS TIMEFORMAT='%0U %0S'
      cd examples/tauri || exit 1
      { time CARGO_INCREMENTAL=0 "${idle[@]}" cargo build >"$tauri_log" 2>&1; } 2>"$tauri_log.cpu"
      rc=$?; read -r user sys <"$tauri_log.cpu"
      echo "built in $((SECONDS - started))s (CPU ${user}s user, ${sys}s sys), exit $rc" >>"$tauri_log"; exit $rc ) &
    tauri_pid=$!
  fi
fi

ENGINES=(chromium webkitgtk firefox)
# The tests and the server they run are built with the `ci` profile (Cargo.toml: release at
# opt-level 1, in target/ci/); tests/lib/server.mjs and scripts/wasm.sh take the server from there.
export SCROLLBACK_PROFILE=ci
# `scrollback/testing`: the test kit the store suites live in (also on through the crate's
# dev-dependency on itself; said here so no suite can silently drop out of `npm test`).
layer lint lint scripts/lint.sh
layer native cargo cargo test --workspace --profile ci --features scrollback/testing
# Built once by the first engine's run; the others run the same .wasm files.
for engine in "${ENGINES[@]}"; do
  layer "wasm $engine" cargo scripts/wasm.sh test --engine "$engine" --profile ci
done
# The end-to-end tests run the package as `npm start` builds it. Each test file starts its own
# server and browser, so two files run at once (they mostly wait on paced streams). A test still
# running after ten minutes fails by name (node's --test-timeout) rather than holding the run
# until CI's limit.
if { [ -n "$pkg_built" ] || scripts/wasm.sh build; } && cargo build -q --profile ci -p scrollback-server; then
  layer "js chromium" node env SCROLLBACK_ENGINE=chromium node --test --test-reporter=tap --test-timeout=600000 --test-concurrency=2 tests/
  for engine in "${ENGINES[@]:1}"; do
    layer "js $engine" node env SCROLLBACK_ENGINE="$engine" node --test --test-reporter=tap --test-timeout=600000 --test-concurrency=1 \
      tests/engines.test.mjs tests/chats.test.mjs
  done
else
  summary+=("js             build of the package or the server FAILED"); total_fail=$((total_fail + 1))
fi

# The Tauri example, once its background build is done.
if [ "${SCROLLBACK_TAURI:-1}" = 0 ]; then
  summary+=("tauri          not run (SCROLLBACK_TAURI=0)")
elif [ -n "$tauri_pid" ] && wait "$tauri_pid"; then
  summary+=("$(printf '%-14s %s' 'tauri build' "$(tail -n 1 "$tauri_log")")")
  layer tauri node xvfb-run -a -s "-screen 0 1280x1024x24" node --test --test-reporter=tap --test-timeout=600000 --test-concurrency=1 tests/tauri.e2e.mjs
else
  summary+=("tauri          build of the example FAILED (see $tauri_log)"); total_fail=$((total_fail + 1))
fi

printf '\n\033[1m== summary\033[0m\n'
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
