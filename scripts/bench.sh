#!/usr/bin/env bash
# kern-profile's benchmark: plugin overhead, aggregator throughput and memtrace throughput,
# measured side by side in one run on the example kernel, printed as a table next to the
# project's targets and written to $KP_OUT/bench.json (default out/bench.json).
#
# usage: scripts/bench.sh [--runs N] [--quick] [--keep] [--alloc-rounds N]
#
#   --runs N          runs of each plugin-overhead configuration, interleaved (default 5)
#   --quick           smoke test: 2 runs, smaller inputs (numbers not comparable to targets)
#   --keep            keep the recorded inputs (10 M-sample raw file, memtrace) in
#                     $KP_OUT/bench-data and reuse them on the next --keep run
#   --alloc-rounds N  size of the recorded memtrace: 23 + 8 N records (default 50000,
#                     about a minute of recording: QEMU writes COM2 one write(2) a byte)
#   -h, --help        this text
#
# Measures (scripts/bench/bench.py does the work; Python 3 standard library only):
#   - QEMU wall (and CPU) time on the CPU-bound workload (expected.toml's [timing]
#     rounds_for_2s, alloc_rounds=0, no COM2) without the plugin and with delay=10,
#     delay=100, period=100000, period=10000, period=100000+exact=on; --runs runs of
#     each, round-robin; median, ratio to bare, samples, cost per sample;
#   - kern-profile raw -> folded and raw -> svg on >= 10 M samples recorded with the real
#     plugin (period=400): samples/s and peak RSS, median of 3;
#   - kern-profile --alloc on a recorded memtrace: records/s, median of 3.
# The binaries are copied to $KP_OUT/bench-data/bin first and measured from there (one
# build for the whole run, whatever else rebuilds target/ meanwhile). Takes ~7-9 minutes
# on a 2-core machine; --quick under a minute.
# Missing a target is reported, never an error; the exit status is non-zero only when
# something fails (QEMU, the kernel, the aggregator), with a message.
. "$(dirname "$0")/lib.sh"

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; }

args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs|--alloc-rounds)
            [ $# -ge 2 ] || die "$1 needs a value (see --help)"
            [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die "$1: '$2' is not a positive number"
            args+=("$1" "$2"); shift 2 ;;
        --quick|--keep) args+=("$1"); shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# $KP_OUT relative to where the user is, before the cd.
out="${KP_OUT:-$KP_ROOT/out}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

cd "$KP_ROOT"
command -v python3 >/dev/null || die "python3 not found (Debian: apt-get install python3)"
bash scripts/setup.sh
bash scripts/build.sh

exec python3 "$KP_ROOT/scripts/bench/bench.py" --root "$KP_ROOT" --out "$out" "${args[@]}"
