#!/usr/bin/env bash
# The main job, end to end: set up what is missing, build in release, boot the example
# kernel in QEMU with the plugin, and draw its CPU and allocation flamegraphs into out/
# (or $KP_OUT). Extra arguments go to QEMU's -append (e.g. `rounds=40`).
. "$(dirname "$0")/lib.sh"
cd "$KP_ROOT"
bash scripts/setup.sh
bash scripts/build.sh
out="${KP_OUT:-$KP_ROOT/out}"
mkdir -p "$out"
rm -f "$out"/raw-data "$out"/memtrace "$out"/mem-*.svg
kernel=target/examples/kernel.elf
say "booting the example kernel with the plugin (delay=10)"
bash scripts/run-kernel.sh --com1 "$out/com1.txt" --memtrace "$out/memtrace" \
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
