#!/usr/bin/env bash
# Boots the riscv64 or aarch64 example kernel in QEMU's `virt` board (TCG).
#
# usage: scripts/run-kernel-virt.sh --arch riscv64|aarch64 [OPTIONS] [QEMU ARGS...]
#
#   --arch A            riscv64 (qemu-system-riscv64 -M virt -bios none) or
#                       aarch64 (qemu-system-aarch64 -M virt -cpu cortex-a57)
#   --kernel ELF        kernel to boot (default: target/examples/kernel-A.elf, built or
#                       refreshed first by scripts/build-kernel-virt.sh)
#   --com1 FILE|-       the UART's text (default: -, stdout)
#   --memtrace FILE     memtrace records (default: target/examples/memtrace-A.bin), written by
#                       the kernel through semihosting (`memtrace=FILE` on its command line);
#                       "none": no trace file
#   --rounds N          CPU workload rounds         (kernel default 10000; 5000 with --smp or --user)
#   --alloc-rounds N    allocation churn rounds     (kernel default 32, 279 records)
#   --smp N             N CPUs (`-smp N`, multi-threaded TCG) and `smp=on`
#   --user              `user=on`: the CPU phase runs the user program of
#                       target/examples/user-A.elf, with system calls
#   --plugin ARGS       `-plugin ARGS` (e.g. target/release/kern-profile.so,out=cpu.raw)
#   --timeout SECS      kill QEMU after SECS seconds (default: none)
#   --dry-run           print the QEMU command line (shell-quoted) instead of running it
#   --print0            print the QEMU command line, each argument ended by a NUL byte
#   -h, --help          this text
#
# Any other argument goes to QEMU unchanged; `-append TEXT` is added to the command line the
# options above make (examples/kernel-A/README.md, "Command line"). $QEMU overrides the QEMU
# binary.
#
# Always passed: -M virt (riscv64: -bios none; aarch64: -cpu cortex-a57) -m 128M
#                -display none -no-reboot -monitor none -semihosting-config enable=on,target=native
#
# Exit status: 0 when the kernel finished (QEMU status 0: riscv64's SiFive test device,
# aarch64's semihosting SYS_EXIT); 1 when it panicked (QEMU 35) or took an exception (QEMU
# 37); 2 for anything else (QEMU's own errors, a timeout, a usage error), with a message.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kernel-lib.sh"
die() { printf '[kern-profile] error: %s\n' "$*" >&2; exit 2; }

arch=""
kernel=""
com1="-"
memtrace=""
rounds=""
alloc_rounds=""
smp=""
user_mode=0
timeout_s=""
dry=0
qemu_args=()
append_extra=""

while [ $# -gt 0 ]; do
    case "$1" in
        --arch) need "$@"; arch="$2"; shift 2 ;;
        --kernel) need "$@"; kernel="$2"; shift 2 ;;
        --com1) need "$@"; com1="$2"; shift 2 ;;
        --memtrace) need "$@"; memtrace="$2"; shift 2 ;;
        --rounds) need "$@"; rounds="$2"; shift 2 ;;
        --alloc-rounds) need "$@"; alloc_rounds="$2"; shift 2 ;;
        --smp) need "$@"; smp="$2"; shift 2 ;;
        --user) user_mode=1; shift ;;
        --plugin) need "$@"; qemu_args+=(-plugin "$2"); shift 2 ;;
        --timeout) need "$@"; timeout_s="$2"; shift 2 ;;
        --dry-run) dry=1; shift ;;
        --print0) dry=nul; shift ;;
        -h|--help) usage; exit 0 ;;
        -append) need "$@"; append_extra="${append_extra:+$append_extra }$2"; shift 2 ;;
        *) qemu_args+=("$1"); shift ;;
    esac
done

case "$arch" in
    riscv64) machine=(-M virt -bios none) ;;
    aarch64) machine=(-M virt -cpu cortex-a57) ;;
    "") die "--arch riscv64|aarch64 is required" ;;
    *) die "unknown --arch '$arch': riscv64 or aarch64" ;;
esac
check_numbers "$rounds" "$alloc_rounds" "$smp" "$timeout_s"
[ -z "$smp" ] || [ "$user_mode" = 0 ] || die "--smp and --user do not combine"
[ -n "$memtrace" ] || memtrace="$KP_ROOT/target/examples/memtrace-$arch.bin"

if [ -z "$kernel" ]; then
    kernel="$("$KP_ROOT/scripts/build-kernel-virt.sh" --arch "$arch")" || die "could not build the kernel"
fi
[ -f "$kernel" ] || die "no kernel at $kernel (build it with scripts/build-kernel-virt.sh --arch $arch)"

append=""
[ -z "$rounds" ] || append="rounds=$rounds"
[ -z "$alloc_rounds" ] || append="${append:+$append }alloc_rounds=$alloc_rounds"
[ -z "$smp" ] || append="${append:+$append }smp=on"
[ "$user_mode" = 0 ] || append="${append:+$append }user=on"
[ -z "$append_extra" ] || append="${append:+$append }$append_extra"
if [ "$memtrace" != none ]; then
    mkdir -p "$(dirname "$memtrace")"
    memtrace="$(cd "$(dirname "$memtrace")" && pwd)/$(basename "$memtrace")"
    [[ "$memtrace" != *[[:space:]]* ]] || die "the memtrace path may not contain whitespace: $memtrace"
    # The kernel opens it for writing only when it gets there: start from an empty file.
    [ "$dry" != 0 ] || : >"$memtrace"
    append="${append:+$append }memtrace=$memtrace"
fi
[ -z "$append" ] || qemu_args+=(-append "$append")
[ -z "$smp" ] || qemu_args+=(-smp "$smp" -accel tcg,thread=multi)

QEMU="${QEMU:-qemu-system-$arch}"
command -v "$QEMU" >/dev/null || die "$QEMU not found; run scripts/setup.sh"

if [ "$com1" = "-" ]; then
    serial=(-serial stdio)
else
    serial=(-serial "file:$com1")
fi

cmd=("$QEMU" "${machine[@]}" -kernel "$kernel" -m 128M -display none -no-reboot -monitor none
     "${serial[@]}" -semihosting-config enable=on,target=native "${qemu_args[@]}")
[ -z "$timeout_s" ] || cmd=(timeout "$timeout_s" "${cmd[@]}")

[ "$dry" = 0 ] || print_cmd "$dry" "${cmd[@]}"
set +e
if [ "$com1" = "-" ]; then
    "${cmd[@]}" </dev/null
else
    "${cmd[@]}"
fi
status=$?
set -e
case "$status" in
    0) exit 0 ;;
    35) say "the kernel panicked (QEMU exit status 35; message on the UART)"; exit 1 ;;
    37) say "the kernel took an exception (QEMU exit status 37; details on the UART)"; exit 1 ;;
    124) say "timed out after ${timeout_s}s"; exit 2 ;;
    *) say "QEMU failed with exit status $status"; exit 2 ;;
esac
