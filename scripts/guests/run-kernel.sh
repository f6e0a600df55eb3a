#!/usr/bin/env bash
# Boots an example guest kernel in QEMU (TCG). The one place that knows the QEMU command line
# of the example kernels: the end-to-end tests, the benchmark and the measuring scripts ask
# it for the command (--print0).
#
# usage: scripts/guests/run-kernel.sh [--arch i386|x86_64|riscv64|aarch64] [OPTIONS] [QEMU ARGS...]
#
#   --arch A            i386 (default; examples/kernel in qemu-system-i386), x86_64
#                       (examples/kernel64 in qemu-system-x86_64), riscv64
#                       (qemu-system-riscv64 -M virt -bios none) or aarch64
#                       (qemu-system-aarch64 -M virt -cpu cortex-a57): examples/kernel-A
#   --kernel ELF        kernel to boot (default: target/examples/kernel.elf, kernel64.elf or
#                       kernel-A.elf, built or refreshed first by
#                       scripts/guests/build-kernel.sh --arch A)
#   --com1 FILE|-       progress text of COM1, the virt boards' UART (default: -, stdout)
#   --memtrace FILE     memtrace records (default: target/examples/memtrace.bin, x86_64:
#                       memtrace64.bin, virt: memtrace-A.bin); "none": no trace file. x86:
#                       COM2 ("none" attaches no COM2 device at all; the kernel does not
#                       mind); virt: written by the kernel through semihosting
#                       (`memtrace=FILE` on its command line)
#   --rounds N          CPU workload rounds         (kernel default 10000; i386: 80000 >= 2 s,
#                       5000 with --smp or --user; x86_64: 40000 >= 2 s; virt: 5000 with
#                       --smp or --user)
#   --alloc-rounds N    allocation churn rounds (kernel default 32, 279 records)
#   --smp N             i386, riscv64, aarch64: N vCPUs (`-smp N`, multi-threaded TCG) and
#                       `smp=on`: every CPU runs its own workload (examples/kernel/README.md,
#                       "SMP mode")
#   --user              `user=on`: the CPU phase runs the user program of
#                       target/examples/user.elf (x86_64, virt: user-A.elf), with system
#                       calls ("User mode")
#   --plugin ARGS       `-plugin ARGS` (e.g. target/release/kern-profile.so,out=cpu.raw)
#   --timeout SECS      kill QEMU after SECS seconds (default: none)
#   --dry-run           print the QEMU command line (shell-quoted) instead of running it
#   --print0            print the QEMU command line, each argument ended by a NUL byte, for
#                       programs to run it themselves
#   -h, --help          this text
#
# Any other argument goes to QEMU unchanged, e.g. `-accel tcg,one-insn-per-tb=on`. x86:
# `-append "rounds=40000 alloc_rounds=0"` replaces --rounds/--alloc-rounds/--smp/--user (not
# with them); virt: `-append TEXT` is added to the command line the options above make
# (examples/kernel-A/README.md, "Command line"). $QEMU overrides the QEMU binary.
#
# Always passed: -m 128M -display none -no-reboot -monitor none, and
#   x86:  -device isa-debug-exit,iobase=0xf4,iosize=0x04
#   virt: -M virt (riscv64: -bios none; aarch64: -cpu cortex-a57)
#         -semihosting-config enable=on,target=native
#
# Exit status: 0 when the kernel finished (x86: it wrote 0x10 to isa-debug-exit, QEMU status
# 33; virt: QEMU status 0, riscv64's SiFive test device, aarch64's semihosting SYS_EXIT); 1
# when it panicked (QEMU 35) or took a CPU exception (QEMU 37; x86_64: also a CPU without
# long mode); 2 for anything else (x86: QEMU 0, it stopped without isa-debug-exit, e.g. a
# triple fault; QEMU's own errors; a timeout; a usage error), with a message on stderr.
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/guests/lib.sh"
# Usage and setup errors exit 2, so that 1 always means "the kernel failed".
die() { printf '[kern-profile] error: %s\n' "$*" >&2; exit 2; }

arch="$(arch_arg "$@")"
case "$arch" in
    i386) memtrace="$KP_ROOT/target/examples/memtrace.bin"
          exception="took a CPU exception" ;;
    x86_64) memtrace="$KP_ROOT/target/examples/memtrace64.bin"
            exception="took a CPU exception or found no long mode" ;;
    riscv64) memtrace="$KP_ROOT/target/examples/memtrace-$arch.bin"
             machine=(-M virt -bios none) ;;
    aarch64) memtrace="$KP_ROOT/target/examples/memtrace-$arch.bin"
             machine=(-M virt -cpu cortex-a57) ;;
    *) die "unknown --arch '$arch': i386, x86_64, riscv64 or aarch64" ;;
esac
# The virt boards (riscv64, aarch64) differ from the PCs in the devices and the exit.
virt=0
case "$arch" in riscv64|aarch64) virt=1 ;; esac

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
append_extra=""

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
        # x86 passes it on where it stands; virt adds it to the options' command line.
        -append) need "$@"; user_append=1
                 if [ "$virt" = 1 ]; then
                     append_extra="${append_extra:+$append_extra }$2"
                 else
                     qemu_args+=("$1" "$2")
                 fi
                 shift 2 ;;
        *) qemu_args+=("$1"); shift ;;
    esac
done

check_numbers "$rounds" "$alloc_rounds" "$smp" "$timeout_s"
[ -z "$smp" ] || [ "$user_mode" = 0 ] || die "--smp and --user do not combine"
if [ "$arch" = x86_64 ]; then
    [ -z "$smp" ] ||
        die "--smp is not the x86_64 kernel's (it runs on one CPU)"
fi

if [ -z "$kernel" ]; then
    kernel="$("$KP_ROOT/scripts/guests/build-kernel.sh" --arch "$arch")" || die "could not build the kernel"
fi
[ -f "$kernel" ] || die "no kernel at $kernel (build it with scripts/guests/build-kernel.sh --arch $arch)"

append=""
[ -z "$rounds" ] || append="rounds=$rounds"
[ -z "$alloc_rounds" ] || append="${append:+$append }alloc_rounds=$alloc_rounds"
[ -z "$smp" ] || append="${append:+$append }smp=on"
[ "$user_mode" = 0 ] || append="${append:+$append }user=on"
if [ "$virt" = 1 ]; then
    [ -z "$append_extra" ] || append="${append:+$append }$append_extra"
    if [ "$memtrace" != none ]; then
        mkdir -p "$(dirname "$memtrace")"
        memtrace="$(cd "$(dirname "$memtrace")" && pwd)/$(basename "$memtrace")"
        [[ "$memtrace" != *[[:space:]]* ]] || die "the memtrace path may not contain whitespace: $memtrace"
        # The kernel opens it for writing only when it gets there: start from an empty file.
        [ "$dry" != 0 ] || : >"$memtrace"
        append="${append:+$append }memtrace=$memtrace"
    fi
elif [ -n "$append" ] && [ "$user_append" = 1 ]; then
    die "give either --rounds/--alloc-rounds/--smp/--user or -append, not both"
fi
[ -z "$append" ] || qemu_args+=(-append "$append")
[ -z "$smp" ] || qemu_args+=(-smp "$smp" -accel tcg,thread=multi)

QEMU="${QEMU:-qemu-system-$arch}"
command -v "$QEMU" >/dev/null || die "$QEMU not found; run scripts/setup.sh"

# x86: the first -serial is COM1, the second COM2 (the memtrace).
serial=()
if [ "$com1" = "-" ]; then
    serial+=(-serial stdio)
else
    serial+=(-serial "file:$com1")
fi

if [ "$virt" = 1 ]; then
    cmd=("$QEMU" "${machine[@]}" -kernel "$kernel" -m 128M -display none -no-reboot -monitor none
         "${serial[@]}" -semihosting-config enable=on,target=native "${qemu_args[@]}")
    ending=(0 "the UART" "took an exception")
else
    if [ "$memtrace" != none ]; then
        mkdir -p "$(dirname "$memtrace")"
        serial+=(-serial "file:$memtrace")
    fi
    cmd=("$QEMU" -kernel "$kernel" -m 128M -display none -no-reboot -monitor none
         "${serial[@]}" -device isa-debug-exit,iobase=0xf4,iosize=0x04 "${qemu_args[@]}")
    ending=(33 COM1 "$exception")
fi
[ -z "$timeout_s" ] || cmd=(timeout "$timeout_s" "${cmd[@]}")

run_kernel "$dry" "$com1" "$timeout_s" "${ending[@]}" "${cmd[@]}"
