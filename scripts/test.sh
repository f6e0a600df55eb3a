#!/usr/bin/env bash
# All tests: set up what is missing, then formatting, lints, the API docs, unit tests, the end-to-end
# tests that boot the example kernels (i386, x86_64, riscv64, aarch64: scripts/build.sh builds
# them) in a real QEMU with the real plugin, on the system's QEMU (plugin API 4) and again on
# Debian sid's (11.1, plugin API 7), the gdbstub end-to-end tests once more on Debian 12's
# own QEMU 7.2 (too old for the plugin), the fuzz targets' seed corpus replayed and a short
# libFuzzer smoke run of each target.
. "$(dirname "$0")/lib.sh"
# Nothing here reads stdin; cargo's rustc probe would (and cache what it read).
exec </dev/null
cd "$KP_ROOT"
forget_rustc_probes
bash scripts/setup.sh --with-chromium --with-linux --with-qemu-sid --with-qemu-7.2
say "cargo fmt --check"
cargo fmt --all --check
cargo fmt --manifest-path fuzz/Cargo.toml --all --check
say "cargo clippy"
cargo clippy --locked --workspace --all-targets -q -- -D warnings
cargo clippy --locked --manifest-path fuzz/Cargo.toml --all-targets -q -- -D warnings
say "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps -q  # broken doc links fail
bash scripts/build.sh
say "cargo test (unit, golden and end-to-end tests)"
set +e
# KP_E2E=required, KP_REQUIRE_LINUX=1: an end-to-end test (or a real-image test of
# linux-image) whose inputs are missing fails instead of skipping;
# KP_PPROF_NODE=require, KP_CALLGRIND_ANNOTATE=require: the pprof output is read back by
# npm's pprof-format, the callgrind output by valgrind's callgrind_annotate (node, npm and
# valgrind are on every machine here), or the test fails.
KP_E2E=required \
KP_REQUIRE_LINUX=1 \
KP_PPROF_NODE=require \
KP_CALLGRIND_ANNOTATE=require \
KP_PLUGIN="$KP_ROOT/target/release/kern-profile.so" \
KP_KERNEL="$KP_ROOT/target/examples/kernel.elf" \
KP_BIN="$KP_ROOT/target/release/kern-profile" \
    cargo test --locked --no-fail-fast --workspace --release 2>&1 | tee "$KP_ROOT/target/test.log"
# tee hides cargo's status from `set -e`; take it from PIPESTATUS.
status=${PIPESTATUS[0]}
# The end-to-end tests again on the newest QEMU, whose plugin ABI differs (API 7): its
# wrappers first on PATH, so that every QEMU the tests start is sid's; each test picks the
# build that QEMU loads (e2e's plugin_build_file), record and the package theirs.
sid_bin="$(qemu_sid_bin_dir)"
say "end-to-end tests again on Debian sid's QEMU $(qemu_version "$sid_bin/qemu-system-i386") (plugin API 7)"
PATH="$sid_bin:$PATH" \
KP_E2E=required \
KP_PLUGIN="$KP_ROOT/target/release/kern-profile-api7.so" \
KP_KERNEL="$KP_ROOT/target/examples/kernel.elf" \
KP_BIN="$KP_ROOT/target/release/kern-profile" \
    cargo test --locked --no-fail-fast --release -p kern-profile-e2e 2>&1 | tee -a "$KP_ROOT/target/test.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# The gdbstub end-to-end tests on QEMU 7.2, which loads no plugin build (9.2 and later): its
# wrappers first on PATH, so that every QEMU the tests and `record --gdb` start is 7.2;
# old_qemu checks what `record` says of a QEMU too old for the plugin (KP_QEMU_72_BIN: the
# wrappers, by path).
q72_bin="$(qemu_72_bin_dir)"
gdb_tests=(--test gdb_stacks --test gdb_guests --test old_qemu)
say "gdbstub end-to-end tests again on Debian 12's QEMU $(PATH="$q72_bin:$PATH" qemu_version qemu-system-i386) (${gdb_tests[*]})"
PATH="$q72_bin:$PATH" \
KP_E2E=required \
KP_QEMU_72_BIN="$q72_bin" \
KP_KERNEL="$KP_ROOT/target/examples/kernel.elf" \
KP_BIN="$KP_ROOT/target/release/kern-profile" \
    cargo test --locked --no-fail-fast --release -p kern-profile-e2e "${gdb_tests[@]}" 2>&1 | tee -a "$KP_ROOT/target/test.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# The fuzz targets' smoke run: every seed of fuzz/corpus/ (real files and what fuzzing found)
# through its target, heap meter and overflow checks on; plain cargo test, no libFuzzer
# (scripts/fuzz/run.sh fuzzes). fuzz/ is a workspace of its own.
say "fuzz targets: the seed corpus replayed"
cargo test --locked --no-fail-fast --release --manifest-path fuzz/Cargo.toml 2>&1 | tee -a "$KP_ROOT/target/test.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# And a short coverage-guided smoke run of each target (libFuzzer, AddressSanitizer): 5 s
# each from its seed corpus; long runs are scripts/fuzz/run.sh's, by hand.
say "fuzz targets: a ${KP_FUZZ_SMOKE_SECONDS:-5} s libFuzzer smoke run of each"
bash scripts/fuzz/run.sh "${KP_FUZZ_SMOKE_SECONDS:-5}" || status=1
set -e
passed=$(grep -o '[0-9]* passed' "$KP_ROOT/target/test.log" | awk '{s+=$1} END {print s+0}')
failed=$(grep -o '[0-9]* failed' "$KP_ROOT/target/test.log" | awk '{s+=$1} END {print s+0}')
echo "$passed passed, $failed failed"
exit "$status"
