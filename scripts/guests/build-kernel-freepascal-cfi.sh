#!/usr/bin/env bash
# Builds target/examples/nofp/kernel64-freepascal-cfi.elf: the x86_64 example kernel without
# frame pointers (build-kernel.sh --arch x86_64 --no-frame-pointers) with the .debug_frame
# FreePascal would write for it (scripts/guests/freepascal_cfi.py: 32-bit FDEs with 8-byte CIE
# pointers, and FDEs of discarded routines that read as DWARF says cover the kernel) in place
# of its .eh_frame (renamed .eh_frame.unused), only when that kernel or these scripts changed,
# and prints the ELF's path on stdout. e2e/tests/malformed_cfi.rs records it with `elf=`
# naming it.
#
# usage: scripts/guests/build-kernel-freepascal-cfi.sh [--force]
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/guests/lib.sh"

build_args "$@"
command -v python3 >/dev/null || die "python3 not found (Debian: apt-get install python3)"
command -v objcopy >/dev/null || die "objcopy not found (binutils); run scripts/setup.sh"

SRC="$(bash "$KP_ROOT/scripts/guests/build-kernel.sh" --arch x86_64 --no-frame-pointers)" ||
    die "building the x86_64 kernel without frame pointers failed"
OUT_DIR="$(dirname "$SRC")"
ELF="$OUT_DIR/kernel64-freepascal-cfi.elf"
STAMP="$OUT_DIR/kernel64-freepascal-cfi.flags"
CONVERT="$KP_ROOT/scripts/guests/freepascal_cfi.py"

# Tests may build concurrently: one build at a time, the others then find it up to date.
exec 9>"$OUT_DIR/.freepascal-cfi.lock"
flock 9

want="$(python3 --version) / $(objcopy --version | head -n 1)"
if is_stale "$STAMP" "$want" "$ELF" -- "$SRC" "$CONVERT" \
    "$KP_ROOT/scripts/guests/build-kernel-freepascal-cfi.sh"; then
    say "writing $SRC's call-frame information as FreePascal's .debug_frame"
    tmp="$(mktemp -d "$OUT_DIR/.freepascal-cfi.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    python3 "$CONVERT" "$SRC" "$tmp/debug_frame" || die "freepascal_cfi.py failed"
    # No .eh_frame left (FreePascal writes none): renamed, not removed, so that the file's
    # layout stays (multiboot's a.out kludge loads the image by file offsets).
    objcopy --rename-section .eh_frame=.eh_frame.unused \
        --rename-section .eh_frame_hdr=.eh_frame_hdr.unused \
        --add-section ".debug_frame=$tmp/debug_frame" "$SRC" "$tmp/kernel.elf" ||
        die "objcopy failed"
    mv -f "$tmp/kernel.elf" "$ELF"
    printf '%s\n' "$want" >"$STAMP"
fi
printf '%s\n' "$ELF"
