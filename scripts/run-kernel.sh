#!/usr/bin/env bash
# Boots the example guest kernel in qemu-system-i386 (TCG).
#
# usage: scripts/run-kernel.sh [OPTIONS] [QEMU ARGS...]
#
#   --kernel ELF        kernel to boot (default: target/examples/kernel.elf, built or
#                       refreshed first by scripts/build-kernel.sh)
#   --com1 FILE|-       progress text of COM1 (default: -, stdout)
#   --memtrace FILE     memtrace of COM2 (default: target/examples/memtrace.bin);
#                       "none" attaches no COM2 device at all (the kernel does not mind)
#   --rounds N          CPU workload rounds         (kernel default 10000; 80000 >= 2 s;
#                       5000 with --smp or --user)
#   --alloc-rounds N    allocation churn rounds     (kernel default 32, 279 records)
#   --smp N             N vCPUs (`-smp N`, multi-threaded TCG) and `smp=on`: every CPU
#                       runs its own workload (examples/kernel/README.md, "SMP mode")
#   --user              `user=on`: the CPU phase runs the ring-3 program of
#                       target/examples/user.elf, with system calls ("User mode")
#   --timeout SECS      kill QEMU after SECS seconds (default: none)
#   --dry-run           print the QEMU command line instead of running it
#   -h, --help          this text
#
# Any other argument goes to QEMU unchanged, e.g. `-plugin path/kern-profile.so,...`,
# `-accel tcg,one-insn-per-tb=on`, or `-append "rounds=40000 alloc_rounds=0"` (instead of
# --rounds/--alloc-rounds/--smp/--user, not with them). $QEMU overrides the QEMU binary.
#
# Always passed: -m 128M -display none -no-reboot -monitor none
#                -device isa-debug-exit,iobase=0xf4,iosize=0x04
#
# Exit status: 0 when the kernel finished and wrote 0x10 to isa-debug-exit (QEMU status 33);
# 1 when it panicked (QEMU 35) or took a CPU exception (QEMU 37); 2 for anything else
# (QEMU 0: it stopped without isa-debug-exit, e.g. a triple fault; QEMU's own errors; a
# timeout; a usage error), with a message on stderr.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kernel-lib.sh"
# Usage and setup errors exit 2, so that 1 always means "the kernel failed".
die() { printf '[kern-profile] error: %s\n' "$*" >&2; exit 2; }

kernel=""
com1="-"
memtrace="$KP_ROOT/target/examples/memtrace.bin"
rounds=""
alloc_rounds=""
smp=""
user_mode=0
timeout_s=""
dry=0
qemu_args=()
user_append=0

while [ $# -gt 0 ]; do
    case "$1" in
        --kernel) need "$@"; kernel="$2"; shift 2 ;;
        --com1) need "$@"; com1="$2"; shift 2 ;;
        --memtrace) need "$@"; memtrace="$2"; shift 2 ;;
        --rounds) need "$@"; rounds="$2"; shift 2 ;;
        --alloc-rounds) need "$@"; alloc_rounds="$2"; shift 2 ;;
        --smp) need "$@"; smp="$2"; shift 2 ;;
        --user) user_mode=1; shift ;;
        --timeout) need "$@"; timeout_s="$2"; shift 2 ;;
        --dry-run) dry=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -append) need "$@"; user_append=1; qemu_args+=("$1" "$2"); shift 2 ;;
        *) qemu_args+=("$1"); shift ;;
    esac
done

check_numbers "$rounds" "$alloc_rounds" "$smp" "$timeout_s"
[ -z "$smp" ] || [ "$user_mode" = 0 ] || die "--smp and --user do not combine"

if [ -z "$kernel" ]; then
    kernel="$("$KP_ROOT/scripts/build-kernel.sh")" || die "could not build the kernel"
fi
[ -f "$kernel" ] || die "no kernel at $kernel (build it with scripts/build-kernel.sh)"

append=""
[ -z "$rounds" ] || append="rounds=$rounds"
[ -z "$alloc_rounds" ] || append="${append:+$append }alloc_rounds=$alloc_rounds"
[ -z "$smp" ] || append="${append:+$append }smp=on"
[ "$user_mode" = 0 ] || append="${append:+$append }user=on"
if [ -n "$append" ]; then
    [ "$user_append" = 0 ] ||
        die "give either --rounds/--alloc-rounds/--smp/--user or -append, not both"
    qemu_args+=(-append "$append")
fi
[ -z "$smp" ] || qemu_args+=(-smp "$smp" -accel tcg,thread=multi)

QEMU="${QEMU:-qemu-system-i386}"
command -v "$QEMU" >/dev/null || die "$QEMU not found; run scripts/setup.sh"

# The first -serial is COM1, the second COM2.
serial=()
if [ "$com1" = "-" ]; then
    serial+=(-serial stdio)
else
    serial+=(-serial "file:$com1")
fi
if [ "$memtrace" != none ]; then
    mkdir -p "$(dirname "$memtrace")"
    serial+=(-serial "file:$memtrace")
fi

cmd=("$QEMU" -kernel "$kernel" -m 128M -display none -no-reboot -monitor none
     "${serial[@]}" -device isa-debug-exit,iobase=0xf4,iosize=0x04 "${qemu_args[@]}")
[ -z "$timeout_s" ] || cmd=(timeout "$timeout_s" "${cmd[@]}")

run_kernel "$dry" "$com1" "$timeout_s" "took a CPU exception" "${cmd[@]}"
