#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer, AddressSanitizer, overflow checks) of every
# parser: each target of fuzz/fuzz_targets/ runs for SECONDS (default 60), one after the
# other, from the seeds of fuzz/corpus/<target>/ (checked in; new inputs go to
# fuzz/target/corpus/<target>/, not committed). A crash, a panic, a timeout or a heap peak
# over the budget of fuzz/src/lib.rs stops that target and leaves its input in
# fuzz/artifacts/<target>/; the script then exits 1. Last, a table of each target's
# executions and coverage (libFuzzer's final `stat::number_of_executed_units` and `cov:`).
#
# usage: scripts/fuzz/run.sh [SECONDS] [TARGET...]
#
# Stable rustc builds the sanitizers with RUSTC_BOOTSTRAP=1. cargo-fuzz is installed with
# `cargo install cargo-fuzz --locked` when missing. Replay a crash with
#   fuzz/target/x86_64-unknown-linux-gnu/release/TARGET fuzz/artifacts/TARGET/crash-...
# and add it to fuzz/corpus/TARGET/ with its fix, so that `cargo test` replays it from then on.
. "$(dirname "$0")/../lib.sh"
cd "$KP_ROOT"
seconds="${1:-60}"
[ $# -eq 0 ] || shift
case "$seconds" in ''|*[!0-9]*) die "SECONDS must be a number: $seconds" ;; esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(ls fuzz/fuzz_targets | sed 's/\.rs$//')

export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
logs="$KP_ROOT/fuzz/target/logs"
mkdir -p "$logs"
say "building the fuzz targets"
cargo fuzz build >"$logs/build.log" 2>&1 || { tail -n 40 "$logs/build.log" >&2; die "cargo fuzz build failed"; }
bin="$KP_ROOT/fuzz/target/x86_64-unknown-linux-gnu/release"

failed=()
for t in "${targets[@]}"; do
    [ -x "$bin/$t" ] || die "no fuzz target $t (fuzz/fuzz_targets/$t.rs)"
    work="$KP_ROOT/fuzz/target/corpus/$t"
    mkdir -p "$work" "$KP_ROOT/fuzz/artifacts/$t"
    say "fuzzing $t for ${seconds}s"
    # -timeout: one input taking 10 s is a hang; -rss_limit_mb: far above the heap budget.
    if ! "$bin/$t" "$work" "$KP_ROOT/fuzz/corpus/$t" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$KP_ROOT/fuzz/artifacts/$t/" >"$logs/$t.log" 2>&1; then
        failed+=("$t")
        grep -m1 -A3 -E "panicked|ERROR: libFuzzer|ERROR: AddressSanitizer" "$logs/$t.log" >&2 || true
    fi
done

printf '\n%-14s %12s %8s %8s  %s\n' target executions cov ft "log (fuzz/target/logs)"
for t in "${targets[@]}"; do
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -n1)
    cov=$(grep -o 'cov: [0-9]*' "$logs/$t.log" | tail -n1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$logs/$t.log" | tail -n1 | cut -d' ' -f2)
    printf '%-14s %12s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$t.log"
done
if [ ${#failed[@]} -gt 0 ]; then
    die "found something in: ${failed[*]} (inputs in fuzz/artifacts/)"
fi
