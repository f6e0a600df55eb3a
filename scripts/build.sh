#!/usr/bin/env bash
# Builds kern-profile in release: the aggregator (target/release/kern-profile), the QEMU
# plugin builds (target/release/kern-profile.so for QEMU 9.2 to 11.0, kern-profile-api7.so
# for QEMU 11.1 and later: qemu-version.txt) and the example kernels (target/examples/kernel.elf
# for i386, target/examples/kernel64.elf for x86_64, target/examples/kernel-riscv64.elf and
# kernel-aarch64.elf), and each kernel again without frame pointers into target/examples/nofp/
# (scripts/guests/build-kernel.sh --no-frame-pointers). --no-kernels builds the command and the
# plugins only.
. "$(dirname "$0")/lib.sh"
# Nothing here reads stdin; cargo's rustc probe would (and cache what it read).
exec </dev/null
cd "$KP_ROOT"
forget_rustc_probes
say "building the aggregator and the plugins (release)"
cargo build --release --locked -q -p kern-profile -p kern-profile-plugin-api4 -p kern-profile-plugin-api7
# Cargo names a cdylib lib<name>.so; users and the original's docs say kern-profile.so.
# Copied beside and renamed over: a QEMU running the old file keeps it (rewriting it in place
# crashed one with SIGBUS).
while read -r api file; do
    cp -f "target/release/libkern_profile_plugin_$api.so" "target/release/$file.tmp"
    mv -f "target/release/$file.tmp" "target/release/$file"
done <<'BUILDS'
api4 kern-profile.so
api7 kern-profile-api7.so
BUILDS
[ "${1:-}" != --no-kernels ] || exit 0
for arch in i386 x86_64 riscv64 aarch64; do
    bash scripts/guests/build-kernel.sh --arch "$arch" >/dev/null
    bash scripts/guests/build-kernel.sh --arch "$arch" --no-frame-pointers >/dev/null
done
say "built target/release/kern-profile, target/release/kern-profile.so and kern-profile-api7.so, target/examples/kernel.elf, kernel64.elf, kernel-riscv64.elf, kernel-aarch64.elf (and without frame pointers in target/examples/nofp/)"
