#!/usr/bin/env bash
# Boots the x86_64 example guest kernel (examples/kernel64) in qemu-system-x86_64 (TCG).
#
# usage: scripts/run-kernel64.sh [OPTIONS] [QEMU ARGS...]
#
#   --kernel ELF        kernel to boot (default: target/examples/kernel64.elf, built or
#                       refreshed first by scripts/build-kernel64.sh)
#   --com1 FILE|-       progress text of COM1 (default: -, stdout)
#   --rounds N          CPU workload rounds (kernel default 10000; 40000 >= 2 s)
#   --timeout SECS      kill QEMU after SECS seconds (default: none)
#   --dry-run           print the QEMU command line instead of running it
#   -h, --help          this text
#
# Any other argument goes to QEMU unchanged, e.g. `-plugin path/kern-profile.so,...`,
# `-accel tcg,one-insn-per-tb=on`, or `-append "rounds=40000 crash=panic"` (instead of
# --rounds, not with it). $QEMU overrides the QEMU binary.
#
# Always passed: -m 128M -display none -no-reboot -monitor none
#                -device isa-debug-exit,iobase=0xf4,iosize=0x04
#
# Exit status: 0 when the kernel finished and wrote 0x10 to isa-debug-exit (QEMU status 33);
# 1 when it panicked (QEMU 35) or took a CPU exception (QEMU 37; also a CPU without long
# mode); 2 for anything else (QEMU 0: it stopped without isa-debug-exit, e.g. a triple
# fault; QEMU's own errors; a timeout; a usage error), with a message on stderr.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kernel-lib.sh"
# Usage and setup errors exit 2, so that 1 always means "the kernel failed".
die() { printf '[kern-profile] error: %s\n' "$*" >&2; exit 2; }

kernel=""
com1="-"
rounds=""
timeout_s=""
dry=0
qemu_args=()
user_append=0

while [ $# -gt 0 ]; do
    case "$1" in
        --kernel) need "$@"; kernel="$2"; shift 2 ;;
        --com1) need "$@"; com1="$2"; shift 2 ;;
        --rounds) need "$@"; rounds="$2"; shift 2 ;;
        --timeout) need "$@"; timeout_s="$2"; shift 2 ;;
        --dry-run) dry=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -append) need "$@"; user_append=1; qemu_args+=("$1" "$2"); shift 2 ;;
        *) qemu_args+=("$1"); shift ;;
    esac
done

check_numbers "$rounds" "$timeout_s"

if [ -z "$kernel" ]; then
    kernel="$("$KP_ROOT/scripts/build-kernel64.sh")" || die "could not build the kernel"
fi
[ -f "$kernel" ] || die "no kernel at $kernel (build it with scripts/build-kernel64.sh)"

if [ -n "$rounds" ]; then
    [ "$user_append" = 0 ] || die "give either --rounds or -append, not both"
    qemu_args+=(-append "rounds=$rounds")
fi

QEMU="${QEMU:-qemu-system-x86_64}"
command -v "$QEMU" >/dev/null || die "$QEMU not found; run scripts/setup.sh"

if [ "$com1" = "-" ]; then
    serial=(-serial stdio)
else
    serial=(-serial "file:$com1")
fi

cmd=("$QEMU" -kernel "$kernel" -m 128M -display none -no-reboot -monitor none
     "${serial[@]}" -device isa-debug-exit,iobase=0xf4,iosize=0x04 "${qemu_args[@]}")
[ -z "$timeout_s" ] || cmd=(timeout "$timeout_s" "${cmd[@]}")

run_kernel "$dry" "$com1" "$timeout_s" "took a CPU exception or found no long mode" "${cmd[@]}"
