#!/usr/bin/env bash
# Boots the Linux guest (Debian's kernel + the busybox initramfs of
# scripts/guests/build-linux-initramfs.sh, fetched by `scripts/setup.sh --with-linux`) in QEMU (TCG)
# and waits for its workload to finish and the guest to power off.
#
# usage: scripts/guests/run-linux.sh --arch i386|x86_64|aarch64 [OPTIONS]
#
#   --arch ARCH        i386 (qemu-system-i386, the 686 kernel), x86_64 (qemu-system-x86_64)
#                      or aarch64 (qemu-system-aarch64 -M virt -cpu cortex-a57, the arm64
#                      kernel; its kallsyms come base64 on the console)
#   --plugin ARGS      load the kern-profile plugin with these options, e.g.
#                      `period=100000` or `delay=100`; out=DIR/cpu.raw unless ARGS has out=.
#                      The plugin is $KP_PLUGIN, default target/release/kern-profile.so
#   --smp N            vCPUs (default 2)
#   --kernel VMLINUZ   another kernel of the same architecture (default
#                      target/linux/ARCH/vmlinuz), e.g. target/linux/x86_64-6.12/vmlinuz
#   --append ARGS      more kernel command-line arguments (e.g. kp.workload=tasks: the
#                      initramfs's named-process workload)
#   --out DIR          where console.log (ttyS0), kallsyms (ttyS1, gzipped) and cpu.raw go
#                      (default target/linux/run-ARCH)
#   --timeout SECS     give up after SECS seconds (default 600)
#   --print0           print the QEMU command line (each argument ended by a NUL byte) instead
#                      of running it, for programs that run and check it themselves (the
#                      benchmark): the guest succeeded when QEMU exits 0 and console.log has
#                      "reboot: Power down" and a line starting "workload done"
#   -h, --help         this text
#
# The kernel command line is `console=ttyS0 nokaslr panic=-1 cryptomgr.notests`: addresses
# match kallsyms of any boot of the same kernel, and the crypto self-tests (a third of the
# i386 boot's instructions, in the DH test's bignum code) are skipped. $QEMU overrides the
# QEMU binary.
# Exit status: 0 when the workload finished and the guest powered off; 1 otherwise (timeout,
# QEMU error, the guest rebooted or panicked), with the console's last lines on stderr.
. "$(dirname "$0")/../lib.sh"

arch="" plugin_args="" plugin_on=0 smp=2 out="" timeout_s=600 print0=0 kernel="" append=""
while [ $# -gt 0 ]; do
    case "$1" in
        --arch) need "$@"; arch="$2"; shift 2 ;;
        --plugin) need "$@"; plugin_args="$2"; plugin_on=1; shift 2 ;;
        --smp) need "$@"; smp="$2"; shift 2 ;;
        --kernel) need "$@"; kernel="$2"; shift 2 ;;
        --out) need "$@"; out="$2"; shift 2 ;;
        --append) need "$@"; append="$2"; shift 2 ;;
        --timeout) need "$@"; timeout_s="$2"; shift 2 ;;
        --print0) print0=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ "$smp" =~ ^[1-9][0-9]*$ ]] || die "--smp must be a positive number (got '$smp')"
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds (got '$timeout_s')"

# First: it checks --arch as this script takes it.
initrd="$(bash "$KP_ROOT/scripts/guests/build-linux-initramfs.sh" --arch "$arch")"
dir="$KP_ROOT/target/linux/$arch"
kernel="${kernel:-$dir/vmlinuz}"
[ -s "$kernel" ] || die "no Linux kernel at $kernel: run scripts/setup.sh --with-linux"
QEMU="${QEMU:-qemu-system-$arch}"
command -v "$QEMU" >/dev/null || die "$QEMU not found; run scripts/setup.sh"

out="${out:-$KP_ROOT/target/linux/run-$arch}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -f "$out/console.log" "$out/kallsyms" "$out/kallsyms.gz"

plugin=()
if [ "$plugin_on" = 1 ]; then
    so="${KP_PLUGIN:-$KP_ROOT/target/release/kern-profile.so}"
    [ -f "$so" ] || die "no plugin at $so: run scripts/build.sh"
    case ",$plugin_args," in
        *,out=*) opts="$plugin_args" ;;
        *) opts="out=$out/cpu.raw${plugin_args:+,$plugin_args}" ;;
    esac
    plugin=(-plugin "$so,$opts")
fi

# The kallsyms port: x86's second UART; the virt board has one, shared with the console.
case "$arch" in
    aarch64) board=(-M virt -cpu cortex-a57) console=ttyAMA0 ports=(-serial "file:$out/console.log") ;;
    *) board=() console=ttyS0 ports=(-serial "file:$out/console.log" -serial "file:$out/kallsyms.gz") ;;
esac
cmd=("$QEMU" "${board[@]}" -m 512M -smp "$smp" -kernel "$kernel" -initrd "$initrd"
     -append "console=$console nokaslr panic=-1 cryptomgr.notests${append:+ $append}" -display none -no-reboot -monitor none
     "${ports[@]}" "${plugin[@]}")
if [ "$print0" = 1 ]; then
    printf '%s\0' "${cmd[@]}"
    exit 0
fi

start=$(date +%s.%N)
set +e
timeout "$timeout_s" "${cmd[@]}" </dev/null
status=$?
set -e
secs=$(echo "$(date +%s.%N) - $start" | bc)

fail() {
    printf '[kern-profile] error: %s\n--- last lines of %s ---\n' "$1" "$out/console.log" >&2
    tail -n 15 "$out/console.log" >&2 2>/dev/null || true
    exit 1
}
[ "$status" != 124 ] || fail "the Linux guest ($arch) did not power off within ${timeout_s} s; QEMU killed"
[ "$status" = 0 ] || fail "QEMU exited with status $status"
grep -q 'reboot: Power down' "$out/console.log" ||
    fail "QEMU stopped but the guest did not power off (panic or reboot?)"
grep -q '^workload done' "$out/console.log" || fail "the guest powered off before its workload was done"
if [ "$arch" = aarch64 ]; then
    sed -n '/^kallsyms-base64-begin/,/^kallsyms-base64-end/{//!p}' "$out/console.log" | tr -d '\r' |
        base64 -d 2>/dev/null | gzip -dc >"$out/kallsyms" ||
        fail "the kallsyms the guest wrote to the console ($out/console.log) do not unpack"
else
    gzip -dc "$out/kallsyms.gz" >"$out/kallsyms" || fail "the kallsyms the guest wrote to ttyS1 ($out/kallsyms.gz) do not unpack"
    rm -f "$out/kallsyms.gz"
fi
say "Linux ($arch, -smp $smp) done in ${secs} s: $out/console.log, $out/kallsyms${plugin[*]:+, $out/cpu.raw}"
