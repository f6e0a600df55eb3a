#!/usr/bin/env bash
# Boots an example guest kernel in QEMU (TCG). The one place that knows the QEMU command line
# of the example kernels: the end-to-end tests, the benchmark and the measuring scripts ask
# it for the command (--print0).
#
# usage: scripts/run-kernel.sh [--arch i386|x86_64|riscv64|aarch64] [OPTIONS] [QEMU ARGS...]
#
#   --arch A            i386 (default; examples/kernel in qemu-system-i386), x86_64
#                       (examples/kernel64 in qemu-system-x86_64), riscv64 or aarch64
#                       (the `virt` board: scripts/run-kernel-virt.sh, whose --help says more)
#   --kernel ELF        kernel to boot (default: target/examples/kernel.elf or kernel64.elf,
#                       built or refreshed first by scripts/build-kernel.sh --arch A)
#   --com1 FILE|-       progress text of COM1 (default: -, stdout)
#   --memtrace FILE     memtrace of COM2 (default: target/examples/memtrace.bin, x86_64:
#                       memtrace64.bin); "none" attaches no COM2 device at all (the kernel
#                       does not mind)
#   --rounds N          CPU workload rounds         (kernel default 10000; i386: 80000 >= 2 s,
#                       5000 with --smp or --user; x86_64: 40000 >= 2 s)
#   --alloc-rounds N    allocation churn rounds (kernel default 32, 279 records)
#   --smp N             i386: N vCPUs (`-smp N`, multi-threaded TCG) and `smp=on`: every CPU
#                       runs its own workload (examples/kernel/README.md, "SMP mode")
#   --user              i386: `user=on`: the CPU phase runs the ring-3 program of
#                       target/examples/user.elf, with system calls ("User mode")
#   --plugin ARGS       `-plugin ARGS` (e.g. target/release/kern-profile.so,out=cpu.raw)
#   --timeout SECS      kill QEMU after SECS seconds (default: none)
#   --dry-run           print the QEMU command line (shell-quoted) instead of running it
#   --print0            print the QEMU command line, each argument ended by a NUL byte, for
#                       programs to run it themselves
#   -h, --help          this text
#
# Any other argument goes to QEMU unchanged, e.g. `-accel tcg,one-insn-per-tb=on`, or
# `-append "rounds=40000 alloc_rounds=0"` (instead of --rounds/--alloc-rounds/--smp/--user,
# not with them). $QEMU overrides the QEMU binary.
#
# Always passed: -m 128M -display none -no-reboot -monitor none
#                -device isa-debug-exit,iobase=0xf4,iosize=0x04
#
# Exit status: 0 when the kernel finished and wrote 0x10 to isa-debug-exit (QEMU status 33);
# 1 when it panicked (QEMU 35) or took a CPU exception (QEMU 37; x86_64: also a CPU without
# long mode); 2 for anything else (QEMU 0: it stopped without isa-debug-exit, e.g. a triple
# fault; QEMU's own errors; a timeout; a usage error), with a message on stderr.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kernel-lib.sh"
# Usage and setup errors exit 2, so that 1 always means "the kernel failed".
die() { printf '[kern-profile] error: %s\n' "$*" >&2; exit 2; }

arch="$(arch_arg "$@")"
case "$arch" in
    riscv64|aarch64) exec "$KP_ROOT/scripts/run-kernel-virt.sh" "$@" ;;
    i386) memtrace="$KP_ROOT/target/examples/memtrace.bin"
          exception="took a CPU exception" ;;
    x86_64) memtrace="$KP_ROOT/target/examples/memtrace64.bin"
            exception="took a CPU exception or found no long mode" ;;
    *) die "unknown --arch '$arch': i386, x86_64, riscv64 or aarch64" ;;
esac

kernel=""
com1="-"
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
        --arch) shift 2 ;;
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
        -append) need "$@"; user_append=1; qemu_args+=("$1" "$2"); shift 2 ;;
        *) qemu_args+=("$1"); shift ;;
    esac
done

check_numbers "$rounds" "$alloc_rounds" "$smp" "$timeout_s"
[ -z "$smp" ] || [ "$user_mode" = 0 ] || die "--smp and --user do not combine"
if [ "$arch" = x86_64 ]; then
    [ -z "$smp" ] && [ "$user_mode" = 0 ] ||
        die "--smp and --user are the i386 kernel's (x86_64 runs the CPU and allocation phases only)"
fi

if [ -z "$kernel" ]; then
    kernel="$("$KP_ROOT/scripts/build-kernel.sh" --arch "$arch")" || die "could not build the kernel"
fi
[ -f "$kernel" ] || die "no kernel at $kernel (build it with scripts/build-kernel.sh --arch $arch)"

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

QEMU="${QEMU:-qemu-system-$arch}"
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

run_kernel "$dry" "$com1" "$timeout_s" "$exception" "${cmd[@]}"
