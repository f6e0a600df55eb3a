#!/usr/bin/env bash
# kern-profile's benchmark: QEMU with the plugin against QEMU without it, side by side in one
# run (alternated round-robin), on the example kernels of every architecture and on the Linux
# guest; the aggregator's and memtrace's throughput; printed as tables next to the project's
# targets and written, every run's figures included, to $KP_OUT/bench.json (default
# out/bench.json).
#
# usage: scripts/bench.sh [--only LIST] [--runs N] [--quick] [--keep] [--alloc-rounds N]
#                         [--linux-arch A] [--linux-runs N] [--linux-bringup N]
#
#   --only LIST        run only these workloads (comma-separated): overhead, linux,
#                      aggregator, memtrace, alloc_hooks, hostile, interrupt, unwind,
#                      sample_cost, gdbstub (default: all ten), bringup (needs --linux-bringup),
#                      scaling (-smp 1, 2, 4, 8 of the i386 example kernel and the amd64 Linux
#                      guest, each against its own bare run; only when named); `--only unwind`
#                      alone builds only its example (no QEMU, no plugin)
#   --runs N           runs of each example-kernel configuration (default 5; --quick 2)
#   --quick            smoke test: 1-2 runs, smaller inputs (numbers not comparable to targets)
#   --keep             keep the recorded inputs (10 M-sample raw file, memtrace) in
#                      $KP_OUT/bench-data and reuse them on the next --keep run
#   --alloc-rounds N   size of the recorded memtrace: 23 + 8 N records (default 50000,
#                      about a minute of recording: QEMU writes COM2 one write(2) a byte),
#                      and of alloc_hooks' allocation phase (as many allocator calls)
#   --linux-arch A     Linux guest(s) of the linux workload: i386 (default), x86_64, aarch64 or all
#   --linux-runs N     runs of each Linux configuration (default 3; --quick 1)
#   --linux-bringup N  boot Linux i386 N times at delay=10 and N times bare, alternated, and
#                      count the boots that brought up all CPUs (issue 13's 20-of-20 check:
#                      --linux-bringup 20, ~15-25 minutes). Alone it runs only this; with
#                      --only, next to those workloads
#   -h, --help         this text
#
# Measures (scripts/bench/bench.py does the work; Python 3 standard library only):
#   - overhead: each example kernel (i386 kernel.elf, x86_64 kernel64.elf, riscv64 and
#     aarch64 kernel-ARCH.elf; those built, with their QEMU installed and supported by the
#     plugin, the others skipped with a note), booted through scripts/guests/run-kernel.sh, its
#     CPU-bound workload (expected.toml's [timing] rounds_for_2s, else calibrated to ~2 s;
#     no memtrace) bare and with delay=100, delay=10, delay=10 parked (window= no code enters),
#     period=100000, period=10000,
#     period=100000,exact=on; round-robin with the start rotated each round; wall and CPU
#     (user+sys) medians, ratios to the same round's bare run min/median/max, samples, and
#     the cost of one sample (period=10000 - period=100000 per sample difference, wall and CPU);
#   - linux: Debian's Linux guest (scripts/guests/run-linux.sh, -smp 2; skipped with a note when
#     target/linux is missing: scripts/setup.sh --with-linux) bare and with delay=100,
#     delay=10, period=100000, round-robin, the same ratios, and per configuration how many
#     runs brought up both CPUs ("smp: Brought up 1 node, 2 CPUs");
#   - aggregator: kern-profile raw -> folded and raw -> svg on >= 10 M samples recorded with
#     the real plugin (period=400): samples/s and peak RSS, median of 3; then raw -> folded
#     side by side with a pinned older build (1b25cd4, or KP_BENCH_AGG_BASE=REV; built once
#     into $KP_OUT/bench-cache), alternated over 5 rounds: wall and CPU min/median/max, the
#     ratios, peak RSS, and whether the outputs are the same;
#   - memtrace: kern-profile --alloc on a recorded memtrace: records/s, median of 3;
#   - alloc_hooks: the x86 example kernels' allocation phase alone (rounds=0, --alloc-rounds,
#     no COM2) bare and with alloc=examples/kernel-common/alloc.spec, round-robin: the same
#     ratios, events, and the cost of one hooked call;
#   - hostile: the i386 example kernel's hostile=on phase (frame chains no compiler makes)
#     bare and with delay=10,depth=1024 and period=10000,depth=1024, round-robin: the same
#     ratios against docs/sampling.md's cost bound, samples and throttled ticks;
#   - interrupt: trigger=interrupt on Debian sid's QEMU 11.1 (scripts/setup/qemu-sid.sh; the
#     API-7 plugin build) against bare sid QEMU, round-robin: each example kernel with its
#     1 kHz timer (irq=on) bare, trigger=interrupt and delay=10, and the Linux i386 guest bare
#     and trigger=interrupt: the same ratios, the samples and their rate, and the documented
#     functions' self shares against their exact instruction shares;
#   - unwind: the cost of a stack walk by the kernel's unwind tables against a frame-pointer
#     walk of the same depth, without QEMU (common/unwind/examples/walk_cost, stacks in memory): ORC
#     on Debian's amd64 6.1 kernel (target/linux/x86_64; skipped without it), CFI on the x86_64
#     example kernel's .eh_frame; ns a walk, the ratio min/median/max over alternated rounds,
#     with 64 stacks (the lookup cache holds their addresses) and 4096 (beyond it); a kernel
#     entry crossed from its stub's instructions against a walk that crosses nothing, one row
#     per architecture side by side (the example kernels without frame pointers,
#     target/examples/nofp/kernel64.elf's CPU frame, kernel-riscv64.elf's and
#     kernel-aarch64.elf's trap frame; each of those two skipped, with the reason printed,
#     without its kernel; target 1.2x each); and the
#     kernel stacks of target/linux/run-x86_64-record/cpu.raw in its sample order (skipped,
#     with the reason printed, without it: scripts/bench/unwind.py has the command that
#     makes it); the `uptime` load at its start and end;
#   - sample_cost: a whole sample walked by CFI against one walked by frame pointers, in QEMU:
#     each example kernel's build without frame pointers (elf=) against its frame-pointer
#     build, the marginal cost of a sample (period=10000 against period=100000), the ratio
#     min/median/max by round;
#   - gdbstub: each example kernel's CPU workload bare and sampled by `record --attach`
#     through QEMU's gdbstub at 100 (the default) and 1,000 looks a second, round-robin:
#     QEMU's wall and CPU ratios to the same round's bare run, the sampler's CPU, and the
#     looks a second, median stop and stopped share record reports (scripts/bench/gdbstub.py).
#   - scaling (only with --only scaling): the i386 example kernel's smp=on workload
#     (period=100000 and period=010000: one more sample's cost) and the amd64 Linux guest
#     (delay=100) at -smp 1, 2, 4 and 8 against bare at the same -smp: ratios, samples, host
#     CPU a sample against -smp 1's, drops (scripts/bench/scaling.py).
# The load average at the start and end and the CPU time other processes used are printed;
# the notes warn when other jobs competed (load average > 1.5) and ratios are not trustworthy.
# The binaries and kernels are copied to $KP_OUT/bench-data/bin first and measured from
# there (one build for the whole run, whatever else rebuilds target/ meanwhile). Takes
# ~15-20 minutes on a 2-core machine (overhead ~1.5 min per architecture, linux ~5 min per
# guest); --quick ~3-4 minutes.
# Missing a target is reported, never an error; the exit status is non-zero only when
# something fails (QEMU, a kernel, the Linux guest, the aggregator), with a message.
. "$(dirname "$0")/lib.sh"

args=()
only="" bringup_n=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs|--alloc-rounds|--linux-runs|--linux-bringup)
            [ $# -ge 2 ] || die "$1 needs a value (see --help)"
            [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die "$1: '$2' is not a positive number"
            [ "$1" != --linux-bringup ] || bringup_n="$2"
            args+=("$1" "$2"); shift 2 ;;
        --only)
            [ $# -ge 2 ] || die "$1 needs a value (see --help)"
            [[ "$2" =~ ^(overhead|linux|bringup|aggregator|memtrace|alloc_hooks|hostile|interrupt|unwind|sample_cost|gdbstub|scaling)(,(overhead|linux|bringup|aggregator|memtrace|alloc_hooks|hostile|interrupt|unwind|sample_cost|gdbstub|scaling))*$ ]] ||
                die "--only: '$2' is not a list of overhead, linux, bringup, aggregator, memtrace, alloc_hooks, hostile, interrupt, unwind, sample_cost, gdbstub, scaling"
            only="$2"; args+=("$1" "$2"); shift 2 ;;
        --linux-arch)
            [ $# -ge 2 ] || die "$1 needs a value (see --help)"
            case "$2" in i386|x86_64|aarch64|all) ;; *) die "--linux-arch: i386, x86_64, aarch64 or all (got '$2')" ;; esac
            args+=("$1" "$2"); shift 2 ;;
        --quick|--keep) args+=("$1"); shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ ",$only," != *,bringup,* ]] || [ -n "$bringup_n" ] ||
    die "--only bringup needs --linux-bringup N (how many boots)"

# $KP_OUT relative to where the user is, before the cd.
out="${KP_OUT:-$KP_ROOT/out}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

cd "$KP_ROOT"
command -v python3 >/dev/null || die "python3 not found (Debian: apt-get install python3)"
if [ "$only" != unwind ]; then
    bash scripts/setup.sh --with-qemu-sid
    bash scripts/build.sh
fi
# The unwind workload's walk_cost (alone: the only thing built).
cargo build --release --quiet -p kern-profile-unwind --examples

exec python3 "$KP_ROOT/scripts/bench/bench.py" --root "$KP_ROOT" --out "$out" "${args[@]}"
