#!/usr/bin/env bash
# Makes the fuzz targets' seed corpus, fuzz/corpus/<target>/, from real files: raw files
# recorded from the example kernels by the real plugin in QEMU (short runs, so each is a few
# kilobytes), legacy files converted from them, Maestro memtraces of the example kernel's
# COM2, tiny.elf of the command's tests (plain, zlib- and zstd-compressed DWARF,
# stripped) and its riscv64 ones (with and without CFI), the ring-3 example programs, `nm` symbol maps,
# plugin argument strings, allocator SPECs and tiny unwind tables (malformed ones too: entries
# outside the text, overlapping, FreePascal's .debug_frame). Inputs fuzzing found (found-*) are kept.
# The corpus is checked in; run this again after a format change (needs QEMU, the kernels
# and the plugin: scripts/setup.sh, scripts/build.sh).
#
# usage: scripts/fuzz/corpus.sh
. "$(dirname "$0")/../lib.sh"
cd "$KP_ROOT"
plugin="$KP_ROOT/target/release/kern-profile.so"
ex="$KP_ROOT/target/examples"
for f in "$plugin" "$ex/kernel.elf" "$ex/kernel64.elf" "$ex/user.elf"; do
    [ -e "$f" ] || die "$f is missing (scripts/build.sh)"
done
corpus="$KP_ROOT/fuzz/corpus"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
clear_generated_seeds "$corpus"
mkdir -p "$corpus"/{raw,legacy,memtrace,alloc_analyze,symbol_map,elf,plugin_args,cpu_e2e,alloc_spec,linux_image,unwind_orc,unwind_cfi}

# record NAME RUN-KERNEL-ARGS... PLUGIN-ARGS (the last argument)
record() {
    local name="$1"; shift
    local args=("$@")
    local pargs="${args[-1]}"
    unset 'args[-1]'
    bash scripts/guests/run-kernel.sh "${args[@]}" --com1 /dev/null --timeout 120 \
        --plugin "$plugin,out=$corpus/raw/$name.raw,$pargs" >/dev/null 2>&1 ||
        die "recording $name failed"
}
i386=(--kernel "$ex/kernel.elf" --memtrace none)
record i386-period "${i386[@]}" --rounds 20 --alloc-rounds 1 period=200000
record i386-delay "${i386[@]}" --rounds 20 --alloc-rounds 1 delay=500
record i386-exact "${i386[@]}" --rounds 5 --alloc-rounds 1 period=400000,exact=on,depth=8
record i386-exact-only "${i386[@]}" --rounds 5 --alloc-rounds 1 exact=only
record i386-smp "${i386[@]}" --rounds 20 --smp 2 period=400000
record i386-user "${i386[@]}" --rounds 20 --user period=200000
# Compressed (`record`'s recordings), whole and cut inside a block.
record i386-period-zstd "${i386[@]}" --rounds 20 --alloc-rounds 1 period=200000,compress=on
# Version 4 (`record`'s): the stack table, whole and cut.
record i386-period-stacks "${i386[@]}" --rounds 20 --alloc-rounds 1 period=200000,stacks=on
record x86_64-period --arch x86_64 --kernel "$ex/kernel64.elf" --memtrace none --rounds 100 period=400000
# Exact counts cover every block the guest ran (100 KB): keep the first 24 of each record.
python3 - "$corpus"/raw/i386-exact*.raw <<'PY'
import struct, sys
for path in sys.argv[1:]:
    raw = open(path, "rb").read()
    width = 4  # i386
    at = struct.unpack_from("<H", raw, 10)[0]
    out = bytearray(raw[:at])
    while at + 5 <= len(raw):
        kind, n = struct.unpack_from("<BI", raw, at)
        body = raw[at + 5:at + 5 + n]
        at += 5 + n
        if kind == 2:
            count, cut = min(24, struct.unpack_from("<I", body)[0]), 4
            for _ in range(count):
                cut += 10 + width * struct.unpack_from("<H", body, cut + 8)[0]
            body = struct.pack("<I", count) + body[4:cut]
        out += struct.pack("<BI", kind, len(body)) + body
    open(path, "wb").write(out)
PY
# A file cut inside its last record (QEMU killed while writing).
head -c -7 "$corpus/raw/i386-period.raw" >"$corpus/raw/i386-period-cut.raw"
head -c -40 "$corpus/raw/i386-period-zstd.raw" >"$corpus/raw/i386-period-zstd-cut.raw"
head -c -7 "$corpus/raw/i386-period-stacks.raw" >"$corpus/raw/i386-period-stacks-cut.raw"

# Memtraces: two short runs' COM2.
for r in 1 3; do
    bash scripts/guests/run-kernel.sh --kernel "$ex/kernel.elf" --com1 /dev/null --timeout 120 \
        --memtrace "$corpus/memtrace/alloc-rounds-$r.memtrace" --rounds 1 --alloc-rounds "$r" \
        >/dev/null 2>&1 || die "memtrace run failed"
done
cp "$corpus"/memtrace/* "$corpus/alloc_analyze/"

# Legacy files: the samples of real raw files in the original C plugin's layout.
python3 - "$corpus" <<'PY'
import struct, sys, pathlib
corpus = pathlib.Path(sys.argv[1])
def samples(raw):
    version, hlen = struct.unpack_from("<HH", raw, 8)
    at = hlen
    while at + 5 <= len(raw):
        kind, n = struct.unpack_from("<BI", raw, at)
        body = raw[at + 5:at + 5 + n]
        at += 5 + n
        if kind != 1 or len(body) != n:
            continue
        frames = struct.unpack_from("<H", body, 6)[0]
        fixed, words = (24, 3) if version == 1 else (36, 4)
        width = (n - fixed) // (words + frames)
        fmt = "<I" if width == 4 else "<Q"
        word = lambda i: struct.unpack_from(fmt, body, fixed + i * width)[0]
        yield [word(0)] + [word(words + i) for i in range(frames)]
for name in ["i386-period", "i386-user", "x86_64-period"]:
    out = bytearray()
    for addrs in samples((corpus / "raw" / f"{name}.raw").read_bytes()):
        addrs = addrs[:255]
        out += bytes([len(addrs)]) + b"".join(struct.pack("<Q", a) for a in addrs)
    (corpus / "legacy" / f"{name}.legacy").write_bytes(out)
PY
cp "$corpus"/raw/* "$corpus"/legacy/* "$corpus/cpu_e2e/"

# ELFs and symbol maps.
tiny="$KP_ROOT/aggregator/command/tests/data/tiny.elf"
cp "$tiny" "$corpus/elf/tiny.elf"
objcopy --compress-debug-sections=zlib "$tiny" "$corpus/elf/tiny-zlib.elf"
objcopy --compress-debug-sections=zstd "$tiny" "$corpus/elf/tiny-zstd.elf"
strip -o "$corpus/elf/tiny-stripped.elf" "$tiny"
cp "$ex/user.embed.elf" "$corpus/elf/user-embed.elf"
# riscv64 with call-frame information (.eh_frame) and without.
cp aggregator/command/tests/data/tiny-riscv64.elf aggregator/command/tests/data/tiny-riscv64-nocfi.elf "$corpus/elf/"
# FreePascal's mangled names and its DWARF (unit names, case-insensitive identifiers).
fpc_elf=common/symbols/tests/data/freepascal/kernel.elf
cp "$fpc_elf" "$corpus/elf/freepascal.elf"
strip -o "$corpus/elf/user-stripped.elf" "$ex/user.elf"
nm "$tiny" >"$corpus/symbol_map/tiny.nm"
nm "$fpc_elf" >"$corpus/symbol_map/freepascal.nm"
nm -S -C "$ex/user.elf" >"$corpus/symbol_map/user.nm-S-C"
nm -n "$ex/kernel.elf" | head -n 200 >"$corpus/symbol_map/kernel.System.map"
# /proc/kallsyms' layout: a tab, then the module in brackets.
nm -n "$ex/kernel64.elf" | head -n 60 | sed '1~3s/$/\t[example]/' >"$corpus/symbol_map/kernel64.kallsyms"

# Unwind tables: tiny ORC tables in the 6.1 and 6.4 layouts, a .debug_frame, ELFs with
# .eh_frame and .debug_frame; tables whose entries the checks refuse in part, FreePascal's
# .debug_frame layout.
python3 - "$corpus" <<'PY'
import struct, sys, pathlib
corpus = pathlib.Path(sys.argv[1])
# ORC: the layout byte, .orc_unwind_ip (offsets from each word, loaded at IP_ADDR), .orc_unwind.
IP_ADDR = 0xffffffff82000000
K = 0xffffffff81000000
def orc(layout, entries):
    ips = b"".join(struct.pack("<i", a - (IP_ADDR + 4 * i)) for i, (a, _) in enumerate(entries))
    return bytes([layout]) + ips + b"".join(e for _, e in entries)
def entry(sp_reg, sp_off, bp_reg, bp_off, flags):
    return struct.pack("<hhBB", sp_off, bp_off, sp_reg | bp_reg << 4, flags)
d = corpus / "unwind_orc"
# 6.4 layout: a call frame, a kernel thread's end, pt_regs, an interrupt frame, an interrupt
# stack's saved pointer, a gap.
(d / "typed").write_bytes(orc(2, [
    (K + 0x1000, entry(5, 16, 0, 0, 2)), (K + 0x2000, entry(0, 0, 0, 0, 1)),
    (K + 0x3000, entry(5, 0, 0, 0, 3)), (K + 0x4000, entry(5, 0, 0, 0, 4 | 8)),
    (K + 0x5000, entry(9, 8, 0, 0, 2)), (K + 0x6000, entry(4, 16, 1, -16, 2)),
    (K + 0x7000, entry(0, 0, 0, 0, 0))]))
# 6.1 layout: a frame-pointer frame, pt_regs, the end bit.
(d / "original").write_bytes(orc(0, [
    (K + 0x1000, entry(4, 16, 1, -16, 0)), (K + 0x2000, entry(5, 0, 0, 0, 1)),
    (K + 0x3000, entry(0, 0, 0, 0, 4)), (K + 0x4000, entry(0, 0, 0, 0, 0))]))
# CFI: a .debug_frame of one CIE (CFA = rsp + 8, return address at CFA - 8) and one FDE.
def debug_frame():
    cie = bytes([0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1])
    cie += bytes((-(len(cie) + 4)) % 8)
    fde = struct.pack("<IQQ", 0, 0x1000, 0x40) + bytes([0x41, 0x0e, 16, 0x86, 2, 0x44, 0x0d, 6])
    fde += bytes((-(len(fde) + 4)) % 8)
    return struct.pack("<I", len(cie)) + cie + struct.pack("<I", len(fde)) + fde
d = corpus / "unwind_cfi"
(d / "debug-frame").write_bytes(debug_frame())
# Tables the entry checks refuse parts of. The target checks a section against the text
# 0x2000..0x100000. ORC (the text around IP_ADDR): an entry 1.8 GiB below the kernel, two
# real entries at one address.
(corpus / "unwind_orc" / "refused").write_bytes(orc(2, [
    (K + 0x1000, entry(5, 16, 0, 0, 2)), (IP_ADDR - 0x7000_0000, entry(5, 8, 0, 0, 2)),
    (K + 0x2000, entry(5, 8, 0, 0, 2)), (K + 0x2000, entry(5, 24, 0, 0, 2)),
    (K + 0x3000, entry(0, 0, 0, 0, 0))]))
INSNS = bytes([0x41, 0x0e, 16, 0x86, 2, 0x44, 0x0d, 6])
def frame(fdes):
    """A .debug_frame: the CIE of debug_frame(), then FDEs (bytes after the length)."""
    cie = debug_frame()[:24]
    return cie + b"".join(struct.pack("<I", len(f)) + f for f in fdes)
def fde(start, size, cie=0):
    return struct.pack("<IQQ", cie, start, size) + INSNS
# FDEs outside the text, overlapping, wrapping, empty, naming no CIE, and a length past
# the section's end.
(d / "checks-debug-frame").write_bytes(frame([
    fde(0x2000, 0x40), fde(0x1000, 0x40), fde(0x2020, 0x40), fde(0x2000, 0x100),
    fde(2**64 - 0x10, 0x40), fde(0x3000, 0), fde(0x3100, 0x40, cie=28), fde(0x2040, 0x40),
]) + struct.pack("<I", 0x100) + bytes(20))
# FreePascal's layout: 32-bit FDEs with 8-byte CIE pointers; one of a discarded routine (at
# 0, 0x27 bytes), which read as DWARF says covers 0 to 0x27_0000_0000.
fpc = lambda start, size: struct.pack("<QQQ", 0, start, size) + INSNS
(d / "freepascal-debug-frame").write_bytes(frame([
    fpc(0x2000, 0x40), fpc(0, 0x27), fpc(0x2100, 0x40), fde(0x2200, 0x40)]))
PY
cp "$tiny" aggregator/command/tests/data/tiny-riscv64.elf "$corpus/unwind_cfi/"
# FreePascal's .debug_frame in a real ELF.
cp common/symbols/tests/data/freepascal/kernel.elf "$corpus/unwind_cfi/freepascal.elf"

# Plugin arguments as QEMU passes them (comma-separated) and command lines as
# /proc/self/cmdline holds them (NUL-separated).
printf '%s' "out=cpu.raw" >"$corpus/plugin_args/default"
printf '%s' "out=cpu.raw,period=100000,exact=on" >"$corpus/plugin_args/period-exact"
printf '%s' "out=/tmp/x.raw,delay=200,depth=1024" >"$corpus/plugin_args/delay-depth"
printf '%s' "out=x.raw,exact=only" >"$corpus/plugin_args/exact-only"
printf '%s' "out=x.raw,period=1000,compress=on" >"$corpus/plugin_args/compress"
printf '%s' "out=x.raw,flight=5,flight_trigger=panic,elf=k.elf,max_size=64M" >"$corpus/plugin_args/flight"
printf 'qemu-system-i386\0-accel\0tcg,thread=single\0-plugin\0kern-profile.so,out=x\0' \
    >"$corpus/plugin_args/cmdline-single"
printf 'qemu-system-x86_64\0-smp\0' >"$corpus/plugin_args/cmdline-cut"
printf 'qemu-system-i386\0-smp\0002\0-accel\0tcg\0-plugin\0kern-profile.so,out=x,period=1000\0' \
    >"$corpus/plugin_args/cmdline-smp"

# Allocator SPECs: the presets, the example kernels' file, and that file with the kernel's
# symbol map after a NUL (the target resolves the SPEC against it).
for p in plugin/sampler/src/alloc_hooks/presets/*.spec; do
    cp "$p" "$corpus/alloc_spec/preset-$(basename "$p")"
done
cp examples/kernel-common/alloc.spec "$corpus/alloc_spec/kernel.spec"
{ cat examples/kernel-common/alloc.spec; printf '\0'; nm "$ex/kernel.elf" | grep -i kalloc; } \
    >"$corpus/alloc_spec/kernel-with-nm.spec"

# Linux images: tiny synthetic bzImages, Images and kallsyms tables in every layout.
cargo run -q -p kern-profile-linux-image --example fuzz_seeds -- "$corpus/linux_image"

du -sh "$corpus"/*
