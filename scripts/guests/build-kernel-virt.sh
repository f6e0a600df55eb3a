#!/usr/bin/env bash
# Builds the riscv64 or aarch64 example kernel (examples/kernel-ARCH: the binary, its linker
# scripts; its code in examples/virt-common and examples/kernel-common) with Debian's rustc
# into target/examples/kernel-ARCH.elf, only when its sources, this script or its flags
# changed, and prints the ELF's path on stdout.
#
# usage: scripts/guests/build-kernel-virt.sh --arch riscv64|aarch64 [--force] [--no-frame-pointers]
#
# --no-frame-pointers: the same kernel and user program without frame records
# (`-C force-frame-pointers=no`), their unwind tables (.eh_frame) kept, and entry stubs
# (trap_vector, svc_entry, isr_timer) that build no frame record either (`--cfg
# bare_entries`), into target/examples/nofp/ under the same names (`core` is the one
# sysroot's).
#
# No Cargo. First `core` for the target, compiled once from Debian's
# rust-web-src (the same 1.85 as rustc-web; `RUSTC_BOOTSTRAP=1`) into
# target/examples/virt-sysroot; then examples/kernel-common into an rlib (crate
# kernel_common); the user program (examples/kernel-common/user/main.rs, linked with
# examples/kernel-ARCH/user/linker.ld) into
# target/examples/user-ARCH.elf (give that one to `kern-profile --user`; the kernel embeds a
# copy without debug info); then examples/virt-common into an
# rlib with it (crate `kernel`: --extern kernel_common), and the binary
# (examples/kernel-ARCH/src/main.rs) with both (--extern kernel), linked by GNU ld
# (binutils-ARCH-linux-gnu) with examples/kernel-ARCH/linker.ld.
# The toolchain comes from scripts/setup/virt.sh.
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/guests/lib.sh"

arch=""
force=0
nofp=0
while [ $# -gt 0 ]; do
    case "$1" in
        --arch) need "$@"; arch="$2"; shift 2 ;;
        --force) force=1; shift ;;
        --no-frame-pointers) nofp=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
case "$arch" in
    riscv64) target=riscv64gc-unknown-none-elf; ld=riscv64-linux-gnu-ld ;;
    aarch64) target=aarch64-unknown-none; ld=aarch64-linux-gnu-ld ;;
    "") die "--arch riscv64|aarch64 is required" ;;
    *) die "unknown --arch '$arch': riscv64 or aarch64" ;;
esac
objcopy="${ld%-ld}-objcopy"

SRC="$KP_ROOT/examples/kernel-$arch"
COMMON_SRC="$KP_ROOT/examples/virt-common"
OUT_DIR="$KP_ROOT/target/examples"
SYSROOT="$OUT_DIR/virt-sysroot"
FRAMES=(-Z unstable-options -C force-frame-pointers=non-leaf)
if [ "$nofp" = 1 ]; then
    OUT_DIR="$OUT_DIR/nofp"
    # And entry stubs as hobby kernels write them: a trap frame, no frame record (bare_entries).
    FRAMES=(-C force-frame-pointers=no --cfg bare_entries)
fi
ELF="$OUT_DIR/kernel-$arch.elf"
STAMP="$OUT_DIR/kernel-$arch.flags"
USER_ELF="$OUT_DIR/user-$arch.elf"
USER_EMBED="$OUT_DIR/user-$arch.embed.elf"
CORE_SRC=/usr/src/rustc-"$("$GUEST_RUSTC" --version | awk '{print $2}')"/library/core/src/lib.rs

[ -x "$GUEST_RUSTC" ] || die "$GUEST_RUSTC not found: run scripts/setup.sh"
[ -f "$CORE_SRC" ] || die "$CORE_SRC not found (Debian's rust-web-src, the version of $GUEST_RUSTC): run scripts/setup.sh"
command -v "$ld" >/dev/null || die "$ld not found (binutils-$arch-linux-gnu): run scripts/setup.sh"
command -v "$objcopy" >/dev/null || die "$objcopy not found: run scripts/setup.sh"

# Unstable flags (-Z) need RUSTC_BOOTSTRAP on Debian's stable rustc: building `core` itself,
# and `force-frame-pointers=non-leaf`, which gives every function that calls another a frame
# record and leaves leaves without one, as GCC and clang do by default (the leaf path of the
# unwinder is what the tests exercise); --no-frame-pointers: none at all. Unwind tables:
# .eh_frame for CFI-based unwinders.
export RUSTC_BOOTSTRAP=1
CODEGEN=(
    --edition 2021 --target "$target" --sysroot "$SYSROOT"
    -C opt-level=2 -C debuginfo=2 "${FRAMES[@]}"
    -C force-unwind-tables=yes -C panic=abort -C relocation-model=static
    -C overflow-checks=off -C debug-assertions=off -C codegen-units=1
    --remap-path-prefix "$KP_ROOT/="
)
LINK=(
    --crate-type bin -C linker="$ld" -C linker-flavor=ld
    -C link-arg=-nostdlib -C link-arg=-static -C link-arg=--build-id=none
    -C link-arg=-zmax-page-size=0x1000
)
# The code shared with the x86 kernels (examples/kernel-common: cmdline, memcmp, the
# allocation phase) and with the other virt kernel (examples/virt-common, crate `kernel`:
# everything else, the board's part chosen by target_arch): rlibs built with the kernel's
# flags. The binary only links them.
KCOMMON_FLAGS=(--crate-name kernel_common --crate-type rlib "${CODEGEN[@]}")
VCOMMON_FLAGS=(--crate-name kernel --crate-type rlib "${CODEGEN[@]}")
USER_FLAGS=(--crate-name user "${CODEGEN[@]}" "${LINK[@]}" -C "link-arg=-T$SRC/user/linker.ld")
FLAGS=(--crate-name "kernel_$arch" "${CODEGEN[@]}" "${LINK[@]}" -C "link-arg=-T$SRC/linker.ld")
CORE_FLAGS=(--edition 2021 --crate-type lib --crate-name core --target "$target"
            -C opt-level=2 -C panic=abort -C debuginfo=1 -C force-unwind-tables=yes
            -Z force-unstable-if-unmarked --cap-lints allow)

mkdir -p "$OUT_DIR"
# One lock for both variants: they share the sysroot's `core`.
exec 9>"$KP_ROOT/target/examples/.kernel-virt.lock"
flock 9

# core and a compiler_builtins stand-in, once per compiler version and target (about 30 s).
core_dir="$SYSROOT/lib/rustlib/$target/lib"
core_want="$("$GUEST_RUSTC" --version) ${CORE_FLAGS[*]} $(cksum <"$COMMON_SRC/compiler_builtins.rs")"
if [ "$(cat "$core_dir/core.flags" 2>/dev/null)" != "$core_want" ] ||
    [ ! -f "$core_dir/libcore.rlib" ] || [ ! -f "$core_dir/libcompiler_builtins.rlib" ]; then
    say "building core for $target from $(dirname "$(dirname "$CORE_SRC")") (once)"
    mkdir -p "$core_dir"
    "$GUEST_RUSTC" "${CORE_FLAGS[@]}" -o "$core_dir/libcore.rlib.tmp" "$CORE_SRC" ||
        die "rustc failed to build core for $target"
    mv -f "$core_dir/libcore.rlib.tmp" "$core_dir/libcore.rlib"
    "$GUEST_RUSTC" --edition 2021 --crate-type lib --crate-name compiler_builtins \
        --target "$target" --sysroot "$SYSROOT" -C opt-level=2 -C panic=abort \
        -o "$core_dir/libcompiler_builtins.rlib" "$COMMON_SRC/compiler_builtins.rs" ||
        die "rustc failed to build the compiler_builtins stand-in for $target"
    printf '%s\n' "$core_want" >"$core_dir/core.flags"
    force=1
fi

want_flags="$("$GUEST_RUSTC" --version) ${KCOMMON_FLAGS[*]} / ${VCOMMON_FLAGS[*]} / ${USER_FLAGS[*]} / ${FLAGS[*]}"
if is_stale "$STAMP" "$want_flags" "$ELF" "$USER_ELF" "$USER_EMBED" -- \
    "$SRC/src" "$SRC/linker.ld" "$SRC/user" "$COMMON_SRC" "$KP_ROOT/examples/kernel-common/src" \
    "$KP_ROOT/examples/kernel-common/user" \
    "$KP_ROOT/scripts/guests/build-kernel-virt.sh" "$KP_ROOT/scripts/guests/lib.sh"; then
    say "building examples/kernel-$arch (and its user program) with $("$GUEST_RUSTC" --version)"
    tmp="$(mktemp -d "$OUT_DIR/.build-$arch.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$KP_ROOT" && "$GUEST_RUSTC" "${KCOMMON_FLAGS[@]}" -o "$tmp/libkernel_common.rlib" \
        examples/kernel-common/src/lib.rs) || die "rustc failed to build examples/kernel-common"
    (cd "$KP_ROOT" && "$GUEST_RUSTC" "${USER_FLAGS[@]}" -o "$tmp/user.elf" \
        examples/kernel-common/user/main.rs) ||
        die "rustc failed to build the $arch user program"
    "$objcopy" --strip-debug "$tmp/user.elf" "$tmp/user.embed.elf" ||
        die "$objcopy failed on the user program"
    (cd "$KP_ROOT" && KP_USER_ELF="$tmp/user.embed.elf" \
        "$GUEST_RUSTC" "${VCOMMON_FLAGS[@]}" --extern "kernel_common=$tmp/libkernel_common.rlib" \
        -o "$tmp/libkernel.rlib" examples/virt-common/src/lib.rs) ||
        die "rustc failed to build examples/virt-common for $arch"
    (cd "$KP_ROOT" && "$GUEST_RUSTC" "${FLAGS[@]}" -L "dependency=$tmp" \
        --extern "kernel=$tmp/libkernel.rlib" -o "$tmp/kernel.elf" "$SRC/src/main.rs") ||
        die "rustc failed to build examples/kernel-$arch"
    mv -f "$tmp/user.elf" "$USER_ELF"
    mv -f "$tmp/user.embed.elf" "$USER_EMBED"
    mv -f "$tmp/kernel.elf" "$ELF"
    printf '%s\n' "$want_flags" >"$STAMP"
fi
printf '%s\n' "$ELF"
