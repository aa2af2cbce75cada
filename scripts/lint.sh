#!/usr/bin/env bash
# The checks a change passes before it lands, natively with the machine's toolchain: formatting
# (`cargo fmt --check`), clippy with every warning an error, and rustdoc with every warning an
# error (a broken or ambiguous intra-doc link, a private item linked from a public one). Prints
# `lint ok: <check>` or `lint FAILED: <check>` for each (the counts `npm test` reads), and
# exits non-zero when any fails.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

failed=0
check() {
  local name="$1"; shift
  if "$@"; then echo "lint ok: $name"; else echo "lint FAILED: $name"; failed=1; fi
}

check "cargo fmt --check" cargo fmt --all --check
check "cargo clippy (warnings are errors)" \
  cargo clippy -q --workspace --all-targets --features scrollback/testing -- -D warnings
check "cargo doc (warnings are errors)" \
  env RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --workspace --document-private-items
exit "$failed"
