#!/usr/bin/env bash
# All tests: set up what is missing, then formatting, lints, unit tests, and the end-to-end
# tests that boot the example kernel in a real QEMU with the real plugin.
. "$(dirname "$0")/lib.sh"
cd "$KP_ROOT"
bash scripts/setup.sh --with-chromium
say "cargo fmt --check"
cargo fmt --all --check
say "cargo clippy"
cargo clippy --locked --workspace --all-targets -q -- -D warnings
bash scripts/build.sh
say "cargo test (unit, golden and end-to-end tests)"
set +e
KP_PLUGIN="$KP_ROOT/target/release/kern-profile.so" \
KP_KERNEL="$KP_ROOT/target/examples/kernel.elf" \
KP_BIN="$KP_ROOT/target/release/kern-profile" \
    cargo test --locked --workspace --release 2>&1 | tee "$KP_ROOT/target/test.log"
# tee hides cargo's status from `set -e`; take it from PIPESTATUS.
status=${PIPESTATUS[0]}
set -e
passed=$(grep -o '[0-9]* passed' "$KP_ROOT/target/test.log" | awk '{s+=$1} END {print s+0}')
failed=$(grep -o '[0-9]* failed' "$KP_ROOT/target/test.log" | awk '{s+=$1} END {print s+0}')
echo "$passed passed, $failed failed"
exit "$status"
