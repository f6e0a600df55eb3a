#!/usr/bin/env bash
# Builds the x86_64 example guest kernel (examples/kernel64) with rustup's rustc (the host's
# x86_64 `core`) into target/examples/kernel64.elf, only when its sources, this script, its
# flags or the compiler changed, and prints the ELF's path on stdout.
#
# usage: scripts/guests/build-kernel-x86_64.sh [--force] [--no-frame-pointers]
#
# --no-frame-pointers: the same kernel and user program without frame pointers, their unwind
# tables kept (.eh_frame), into target/examples/nofp/.
#
# First the kernel's user program (user=on): examples/kernel-common/user/main.rs (the other
# kernels' too), linked with examples/kernel64/user/linker.ld, into
# target/examples/user-x86_64.elf (give that one to `kern-profile --user`); the kernel embeds
# a copy without debug info (target/examples/user-x86_64.embed.elf, through $KP_USER_ELF and
# include_bytes!).
#
# No Cargo: examples/kernel-common/src/lib.rs compiled into an rlib, then one `rustc` call on
# examples/kernel64/src/main.rs with `core` and that rlib (--extern kernel_common), linked by
# GNU ld with examples/kernel64/linker.ld. The compiler is `rustc` from PATH (the
# rustup toolchain; any rustc whose sysroot holds x86_64-unknown-linux-gnu's `core` does),
# or $KP_RUSTC64.
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/guests/lib.sh"

build_args "$@"

SRC="$KP_ROOT/examples/kernel64"
OUT_DIR="$KP_ROOT/target/examples"
FRAMES=(-C force-frame-pointers=yes)
if [ "$nofp" = 1 ]; then
    OUT_DIR="$OUT_DIR/nofp"
    # And entry stubs as hobby kernels write them: no frame record, no CFI (bare_entries).
    FRAMES=(-C force-frame-pointers=no -C force-unwind-tables=yes --cfg bare_entries)
fi
ELF="$OUT_DIR/kernel64.elf"
STAMP="$OUT_DIR/kernel64.flags"
USER_ELF="$OUT_DIR/user-x86_64.elf"
USER_EMBED="$OUT_DIR/user-x86_64.embed.elf"
TARGET=x86_64-unknown-linux-gnu

RUSTC64="${KP_RUSTC64:-$(command -v rustc || true)}"
[ -n "$RUSTC64" ] && [ -x "$RUSTC64" ] ||
    die "${KP_RUSTC64:-rustc} not found: install Rust (rustup's stable toolchain), or set KP_RUSTC64"
sysroot="$("$RUSTC64" --print sysroot)" || die "$RUSTC64 --print sysroot failed"
compgen -G "$sysroot/lib/rustlib/$TARGET/lib/libcore-*.rlib" >/dev/null ||
    die "no $TARGET core in $sysroot/lib/rustlib/$TARGET/lib: $RUSTC64 cannot build the x86_64 kernel"
command -v ld >/dev/null || die "GNU ld not found (binutils); run scripts/setup.sh"
command -v readelf >/dev/null || die "readelf not found (binutils); run scripts/setup.sh"
command -v objcopy >/dev/null || die "objcopy not found (binutils); run scripts/setup.sh"

# Every flag matters to the tests: frame pointers for the RBP walks (or none, with unwind
# tables: --no-frame-pointers), opt-level 2 so that
# mix_inlined is really inlined, full debug info (DWARF inline records), a static image in
# the top 2 GiB (code-model=kernel: 32-bit sign-extended absolute addresses), no red zone
# (kernel code; interrupts stay off, but an exception handler must not clobber a leaf's
# locals), overflow checks off (the workload relies on wrapping arithmetic without core
# method calls), one codegen unit for a stable layout. SSE stays on (the prebuilt `core`
# assumes it; _start enables it).
CODEGEN=(
    --edition 2021 --target "$TARGET"
    -C opt-level=2 -C debuginfo=2 "${FRAMES[@]}"
    -C panic=abort -C relocation-model=static -C code-model=kernel -C no-redzone=yes
    -C overflow-checks=off -C debug-assertions=off -C codegen-units=1
    # Paths in DWARF relative to the repository, whatever the checkout's location.
    --remap-path-prefix "$KP_ROOT/="
)
# The kernel's shared code (examples/kernel-common), an rlib built with the kernel's flags.
COMMON_FLAGS=(--crate-name kernel_common --crate-type rlib "${CODEGEN[@]}")
# The user program: the kernel's flags but an ordinary user-space image (the small code model,
# linked at 64 MiB; the red zone is the program's own, interrupts switch to the kernel stack).
USER_FLAGS=(
    --crate-name user --edition 2021 --target "$TARGET"
    -C opt-level=2 -C debuginfo=2 "${FRAMES[@]}"
    -C panic=abort -C relocation-model=static
    -C overflow-checks=off -C debug-assertions=off -C codegen-units=1
    --remap-path-prefix "$KP_ROOT/="
    --crate-type bin -C linker=ld -C linker-flavor=ld
    -C link-arg=-nostdlib -C link-arg=-static
    -C link-arg=--build-id=none -C link-arg=-zmax-page-size=0x1000
    -C "link-arg=-T$SRC/user/linker.ld"
)
FLAGS=(
    --crate-name kernel64 "${CODEGEN[@]}" --crate-type bin
    -C linker=ld -C linker-flavor=ld
    -C link-arg=-nostdlib -C link-arg=-static
    -C link-arg=--build-id=none -C link-arg=-zmax-page-size=0x1000
    -C link-arg=--no-warn-rwx-segments
    -C "link-arg=-T$SRC/linker.ld"
)

# QEMU loads the image from the file by the multiboot header's address fields, not by the
# program headers: every loaded segment must sit in the file at the same offset from its
# physical address, and the header in the first 8 KiB.
check_layout() {
    local type off vaddr paddr filesz rest n=0 first=0 off0=0
    while read -r type off vaddr paddr filesz rest; do
        [ "$type" = LOAD ] && [ $((filesz)) -gt 0 ] || continue
        n=$((n + 1))
        if [ "$n" = 1 ]; then
            first=$((off - paddr)) off0=$((off))
        elif [ $((off - paddr)) != "$first" ]; then
            echo "LOAD segments not at one file-offset-to-physical-address distance"; return 1
        fi
    done < <(readelf -lW "$1")
    [ "$n" -gt 0 ] || { echo "no LOAD segment"; return 1; }
    [ "$off0" -lt 8192 ] || { echo "the first LOAD segment (multiboot header) is beyond 8 KiB"; return 1; }
}

mkdir -p "$OUT_DIR"
# Tests may build concurrently: one build at a time, the others then find it up to date.
exec 9>"$OUT_DIR/.kernel64.lock"
flock 9

want_flags="$("$RUSTC64" --version) $sysroot ${COMMON_FLAGS[*]} / ${USER_FLAGS[*]} / ${FLAGS[*]}"
if is_stale "$STAMP" "$want_flags" "$ELF" "$USER_ELF" "$USER_EMBED" -- "$SRC/src" "$SRC/linker.ld" \
    "$SRC/user" "$KP_ROOT/examples/kernel-common/src" "$KP_ROOT/examples/kernel-common/user" \
    "$KP_ROOT/scripts/guests/build-kernel-x86_64.sh" "$KP_ROOT/scripts/guests/lib.sh"; then
    say "building examples/kernel64 (and its user program) with $("$RUSTC64" --version)"
    tmp="$(mktemp -d "$OUT_DIR/.build64.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$KP_ROOT" && "$RUSTC64" "${USER_FLAGS[@]}" -o "$tmp/user.elf" \
        examples/kernel-common/user/main.rs) || die "rustc failed to build the x86_64 user program"
    objcopy --strip-debug "$tmp/user.elf" "$tmp/user.embed.elf" ||
        die "objcopy failed on the user program"
    (cd "$KP_ROOT" && "$RUSTC64" "${COMMON_FLAGS[@]}" -o "$tmp/libkernel_common.rlib" \
        examples/kernel-common/src/lib.rs) || die "rustc failed to build examples/kernel-common"
    (cd "$KP_ROOT" && KP_USER_ELF="$tmp/user.embed.elf" "$RUSTC64" "${FLAGS[@]}" --extern "kernel_common=$tmp/libkernel_common.rlib" \
        -o "$tmp/kernel64.elf" "$SRC/src/main.rs") ||
        die "rustc failed to build examples/kernel64"
    why="$(check_layout "$tmp/kernel64.elf")" ||
        die "examples/kernel64/linker.ld: bad image layout for the multiboot loader: $why"
    mv -f "$tmp/user.elf" "$USER_ELF"
    mv -f "$tmp/user.embed.elf" "$USER_EMBED"
    mv -f "$tmp/kernel64.elf" "$ELF"
    printf '%s\n' "$want_flags" >"$STAMP"
fi
printf '%s\n' "$ELF"
