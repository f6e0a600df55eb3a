#!/usr/bin/env bash
# Builds the example guest kernel (examples/kernel) with Debian's rustc for i686 into
# target/examples/kernel.elf, only when its sources, this script or its flags changed,
# and prints the ELF's path on stdout.
#
# usage: scripts/build-kernel.sh [--force]
#
# No Cargo and no crates: one `rustc` call on examples/kernel/src/main.rs with `core` only,
# linked by GNU ld with examples/kernel/linker.ld. The toolchain comes from scripts/setup.sh.
# First the kernel's user program (user=on): examples/kernel/user/main.rs, linked with
# examples/kernel/user/linker.ld, into target/examples/user.elf (give that one to
# `kern-profile --user`); the kernel embeds a copy without debug info
# (target/examples/user.embed.elf, through $KP_USER_ELF and include_bytes!).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/kernel-lib.sh"

build_args "$@"

SRC="$KP_ROOT/examples/kernel"
OUT_DIR="$KP_ROOT/target/examples"
ELF="$OUT_DIR/kernel.elf"
STAMP="$OUT_DIR/kernel.flags"
USER_ELF="$OUT_DIR/user.elf"
USER_EMBED="$OUT_DIR/user.embed.elf"

[ -x "$GUEST_RUSTC" ] ||
    die "$GUEST_RUSTC not found: the guest-kernel toolchain is missing; run scripts/setup.sh"
compgen -G "$GUEST_RUSTLIB_I686/libcore-*.rlib" >/dev/null ||
    die "no i686 core in $GUEST_RUSTLIB_I686: the guest-kernel toolchain is incomplete; run scripts/setup.sh"
command -v ld >/dev/null || die "GNU ld not found (binutils); run scripts/setup.sh"
command -v objcopy >/dev/null || die "objcopy not found (binutils); run scripts/setup.sh"

# Every flag matters to the tests: frame pointers for the EBP walks, opt-level 2 so that
# mix_inlined is really inlined, full debug info (DWARF inline records), a static non-PIE
# image, overflow checks off (the workloads rely on wrapping arithmetic without core method
# calls), one codegen unit for a stable layout. The kernel and its user program share them.
COMMON=(
    --edition 2021 --crate-type bin
    --target i686-unknown-linux-gnu
    -C opt-level=2 -C debuginfo=2 -C force-frame-pointers=yes
    -C panic=abort -C relocation-model=static
    -C overflow-checks=off -C debug-assertions=off -C codegen-units=1
    -C linker=ld -C linker-flavor=ld
    -C link-arg=-melf_i386 -C link-arg=-nostdlib -C link-arg=-static
    -C link-arg=--build-id=none -C link-arg=-zmax-page-size=0x1000
    # Paths in DWARF relative to the repository, whatever the checkout's location.
    --remap-path-prefix "$KP_ROOT/="
)
USER_FLAGS=(--crate-name user "${COMMON[@]}" -C "link-arg=-T$SRC/user/linker.ld")
FLAGS=(--crate-name kernel "${COMMON[@]}" -C "link-arg=-T$SRC/linker.ld")

mkdir -p "$OUT_DIR"
# Tests may build concurrently: one build at a time, the others then find it up to date.
exec 9>"$OUT_DIR/.kernel.lock"
flock 9

want_flags="$("$GUEST_RUSTC" --version) ${USER_FLAGS[*]} / ${FLAGS[*]}"
if is_stale "$STAMP" "$want_flags" "$ELF" "$USER_ELF" "$USER_EMBED" -- \
    "$SRC/src" "$SRC/linker.ld" "$SRC/user" "$KP_ROOT/examples/common" \
    "$KP_ROOT/scripts/build-kernel.sh" "$KP_ROOT/scripts/kernel-lib.sh"; then
    say "building examples/kernel (and its user program) with $("$GUEST_RUSTC" --version)"
    tmp="$(mktemp -d "$OUT_DIR/.build.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$KP_ROOT" && "$GUEST_RUSTC" "${USER_FLAGS[@]}" -o "$tmp/user.elf" "$SRC/user/main.rs") ||
        die "rustc failed to build examples/kernel/user"
    objcopy --strip-debug "$tmp/user.elf" "$tmp/user.embed.elf" ||
        die "objcopy failed on the user program"
    (cd "$KP_ROOT" && KP_USER_ELF="$tmp/user.embed.elf" \
        "$GUEST_RUSTC" "${FLAGS[@]}" -o "$tmp/kernel.elf" "$SRC/src/main.rs") ||
        die "rustc failed to build examples/kernel"
    mv -f "$tmp/user.elf" "$USER_ELF"
    mv -f "$tmp/user.embed.elf" "$USER_EMBED"
    mv -f "$tmp/kernel.elf" "$ELF"
    printf '%s\n' "$want_flags" >"$STAMP"
fi
printf '%s\n' "$ELF"
