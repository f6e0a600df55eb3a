#!/usr/bin/env bash
# Builds an example guest kernel, only when its sources, its build script or its flags
# changed, and prints the ELF's path on stdout.
#
# usage: scripts/guests/build-kernel.sh [--arch i386|x86_64|riscv64|aarch64] [--force]
#                                      [--no-frame-pointers]
#
#   --arch A               i386 (default: below), x86_64 (scripts/guests/build-kernel-x86_64.sh),
#                          riscv64 or aarch64 (scripts/guests/build-kernel-virt.sh)
#   --force                rebuild even when up to date
#   --no-frame-pointers    the same kernel (and user.elf; user-b.elf keeps them) without frame pointers
#                          (`-C force-frame-pointers=no`), with unwind tables (.eh_frame, kept
#                          by the linker scripts), and x86 entry stubs with neither a frame
#                          record nor CFI (`--cfg bare_entries`), into target/examples/nofp/
#                          under the same names: e2e/tests/no_frame_pointers.rs walks them by
#                          CFI and the stubs' instructions alone
#
# i386: examples/kernel with Debian's rustc for i686 into target/examples/kernel.elf.
# No Cargo: examples/kernel-common/src/lib.rs compiled into an rlib, then one `rustc` call on
# examples/kernel/src/main.rs with `core` and that rlib (--extern kernel_common), linked by
# GNU ld with examples/kernel/linker.ld. The toolchain comes from scripts/setup.sh.
# First the kernel's user program (user=on): examples/kernel-common/user/main.rs (the virt
# kernels' too), linked with examples/kernel/user/linker.ld, into target/examples/user.elf
# (give that one to
# `kern-profile --user`); the kernel embeds a copy without debug info
# (target/examples/user.embed.elf, through $KP_USER_ELF and include_bytes!). The same source
# built with `--cfg variant_b` is procs=on's second program, target/examples/user-b.elf
# (embedded as user-b.embed.elf through $KP_USER_B_ELF).
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/guests/lib.sh"

case "$(arch_arg "$@")" in
    i386) ;;
    x86_64) exec "$KP_ROOT/scripts/guests/build-kernel-x86_64.sh" "$@" ;;
    riscv64|aarch64) exec "$KP_ROOT/scripts/guests/build-kernel-virt.sh" "$@" ;;
    *) die "unknown --arch '$(arch_arg "$@")': i386, x86_64, riscv64 or aarch64" ;;
esac
build_args "$@"

SRC="$KP_ROOT/examples/kernel"
USER_SRC="$KP_ROOT/examples/kernel-common/user/main.rs"
OUT_DIR="$KP_ROOT/target/examples"
FRAMES=(-C force-frame-pointers=yes)
if [ "$nofp" = 1 ]; then
    OUT_DIR="$OUT_DIR/nofp"
    # And entry stubs as hobby kernels write them: no frame record, no CFI (bare_entries).
    FRAMES=(-C force-frame-pointers=no -C force-unwind-tables=yes --cfg bare_entries)
fi
ELF="$OUT_DIR/kernel.elf"
STAMP="$OUT_DIR/kernel.flags"
USER_ELF="$OUT_DIR/user.elf"
USER_EMBED="$OUT_DIR/user.embed.elf"
USER_B_ELF="$OUT_DIR/user-b.elf"
USER_B_EMBED="$OUT_DIR/user-b.embed.elf"

[ -x "$GUEST_RUSTC" ] ||
    die "$GUEST_RUSTC not found: the guest-kernel toolchain is missing; run scripts/setup.sh"
compgen -G "$GUEST_RUSTLIB_I686/libcore-*.rlib" >/dev/null ||
    die "no i686 core in $GUEST_RUSTLIB_I686: the guest-kernel toolchain is incomplete; run scripts/setup.sh"
command -v ld >/dev/null || die "GNU ld not found (binutils); run scripts/setup.sh"
command -v objcopy >/dev/null || die "objcopy not found (binutils); run scripts/setup.sh"

# Every flag matters to the tests: frame pointers for the EBP walks (or none, with unwind
# tables: --no-frame-pointers), opt-level 2 so that
# mix_inlined is really inlined, full debug info (DWARF inline records), a static non-PIE
# image, overflow checks off (the workloads rely on wrapping arithmetic without core method
# calls), one codegen unit for a stable layout. The kernel and its user program share them.
CODEGEN=(
    --edition 2021 --target i686-unknown-linux-gnu
    -C opt-level=2 -C debuginfo=2 "${FRAMES[@]}"
    -C panic=abort -C relocation-model=static
    -C overflow-checks=off -C debug-assertions=off -C codegen-units=1
    # Paths in DWARF relative to the repository, whatever the checkout's location.
    --remap-path-prefix "$KP_ROOT/="
)
LINK=(
    --crate-type bin
    -C linker=ld -C linker-flavor=ld
    -C link-arg=-melf_i386 -C link-arg=-nostdlib -C link-arg=-static
    -C link-arg=--build-id=none -C link-arg=-zmax-page-size=0x1000
)
# The kernel's shared code (examples/kernel-common), an rlib built with the kernel's flags.
COMMON_FLAGS=(--crate-name kernel_common --crate-type rlib "${CODEGEN[@]}")
USER_FLAGS=(--crate-name user "${CODEGEN[@]}" "${LINK[@]}" -C "link-arg=-T$SRC/user/linker.ld")
USER_B_FLAGS=("${USER_FLAGS[@]}" --cfg variant_b)
if [ "$nofp" = 1 ]; then
    # One program of each kind beside the kernel without frame pointers: variant B keeps them
    # (the later -C wins), user.elf has none (its .eh_frame only).
    USER_B_FLAGS+=(-C force-frame-pointers=yes)
fi
FLAGS=(--crate-name kernel "${CODEGEN[@]}" "${LINK[@]}" -C "link-arg=-T$SRC/linker.ld")

mkdir -p "$OUT_DIR"
# Tests may build concurrently: one build at a time, the others then find it up to date.
exec 9>"$OUT_DIR/.kernel.lock"
flock 9

want_flags="$("$GUEST_RUSTC" --version) ${COMMON_FLAGS[*]} / ${USER_FLAGS[*]} / ${USER_B_FLAGS[*]} / ${FLAGS[*]}"
if is_stale "$STAMP" "$want_flags" "$ELF" "$USER_ELF" "$USER_EMBED" "$USER_B_ELF" "$USER_B_EMBED" -- \
    "$SRC/src" "$SRC/linker.ld" "$SRC/user" "$KP_ROOT/examples/kernel-common/src" \
    "$KP_ROOT/examples/kernel-common/user" \
    "$KP_ROOT/scripts/guests/build-kernel.sh" "$KP_ROOT/scripts/guests/lib.sh"; then
    say "building examples/kernel (and its user program) with $("$GUEST_RUSTC" --version)"
    tmp="$(mktemp -d "$OUT_DIR/.build.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$KP_ROOT" && "$GUEST_RUSTC" "${USER_FLAGS[@]}" -o "$tmp/user.elf" "$USER_SRC") ||
        die "rustc failed to build the user program"
    objcopy --strip-debug "$tmp/user.elf" "$tmp/user.embed.elf" ||
        die "objcopy failed on the user program"
    (cd "$KP_ROOT" && "$GUEST_RUSTC" "${USER_B_FLAGS[@]}" -o "$tmp/user-b.elf" "$USER_SRC") ||
        die "rustc failed to build the user program (--cfg variant_b)"
    objcopy --strip-debug "$tmp/user-b.elf" "$tmp/user-b.embed.elf" ||
        die "objcopy failed on the second user program"
    (cd "$KP_ROOT" && "$GUEST_RUSTC" "${COMMON_FLAGS[@]}" -o "$tmp/libkernel_common.rlib" \
        examples/kernel-common/src/lib.rs) || die "rustc failed to build examples/kernel-common"
    (cd "$KP_ROOT" && KP_USER_ELF="$tmp/user.embed.elf" KP_USER_B_ELF="$tmp/user-b.embed.elf" \
        "$GUEST_RUSTC" "${FLAGS[@]}" --extern "kernel_common=$tmp/libkernel_common.rlib" \
        -o "$tmp/kernel.elf" "$SRC/src/main.rs") ||
        die "rustc failed to build examples/kernel"
    mv -f "$tmp/user.elf" "$USER_ELF"
    mv -f "$tmp/user.embed.elf" "$USER_EMBED"
    mv -f "$tmp/user-b.elf" "$USER_B_ELF"
    mv -f "$tmp/user-b.embed.elf" "$USER_B_EMBED"
    mv -f "$tmp/kernel.elf" "$ELF"
    printf '%s\n' "$want_flags" >"$STAMP"
fi
printf '%s\n' "$ELF"
