#!/usr/bin/env bash
# The main job, end to end: set up what is missing, build in release, boot an example
# kernel in QEMU with the plugin, and draw its CPU and allocation flamegraphs into out/
# (or $KP_OUT).
#
# usage: scripts/demo.sh [--arch i386|riscv64|aarch64] [APPEND...]
#
#   --arch A    the example kernel to profile: i386 (default, examples/kernel in
#               qemu-system-i386), riscv64 or aarch64 (examples/kernel-A on the `virt` board;
#               its memtrace comes through semihosting); out/ is then out-A/
#   APPEND      extra words for the kernel's command line (QEMU's -append), e.g. `rounds=40`
. "$(dirname "$0")/lib.sh"
cd "$KP_ROOT"
arch=i386
case "${1:-}" in
    --arch) need "$@"; arch="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
esac
case "$arch" in
    i386) kernel=target/examples/kernel.elf; default_out="$KP_ROOT/out" ;;
    riscv64|aarch64) kernel="target/examples/kernel-$arch.elf"; default_out="$KP_ROOT/out-$arch" ;;
    *) die "unknown --arch '$arch': i386, riscv64 or aarch64" ;;
esac
bash scripts/setup.sh
bash scripts/build.sh
out="${KP_OUT:-$default_out}"
mkdir -p "$out"
rm -f "$out"/raw-data "$out"/memtrace "$out"/mem-*.svg
say "booting the $arch example kernel with the plugin (delay=10)"
bash scripts/guests/run-kernel.sh --arch "$arch" --kernel "$kernel" --com1 "$out/com1.txt" \
    --memtrace "$out/memtrace" \
    -plugin "target/release/kern-profile.so,out=$out/raw-data,delay=10" ${1:+-append "$*"}
kp=target/release/kern-profile
say "aggregating"
"$kp" "$out/raw-data" "$kernel" -o "$out/cpu.svg"
"$kp" "$out/raw-data" "$kernel" -f text --top 10 | tee "$out/cpu.txt"
"$kp" --alloc "$out/memtrace" "$kernel" -o "$out" --timeline
"$kp" --alloc "$out/memtrace" "$kernel" -f text > "$out/mem.txt"
echo
say "done. Open these in a browser:"
for f in "$out"/cpu.svg "$out"/mem-*.svg; do echo "  $f"; done
echo "  text reports: $out/cpu.txt $out/mem.txt"
