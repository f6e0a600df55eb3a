#!/usr/bin/env python3
"""Writes the `.debug_frame` FreePascal 3.2 would write for an x86_64 ELF's `.eh_frame`.

usage: scripts/guests/freepascal_cfi.py ELF OUT

Reads ELF's `.eh_frame` (the example kernel built without frame pointers) and writes to OUT
the same rules as a `.debug_frame` laid out as FreePascal lays out its own (readelf
--debug-dump=frames common/symbols/tests/data/freepascal/kernel.elf): CIEs of version 1 with
no augmentation, FDEs in the 32-bit DWARF format whose CIE pointer takes 8 bytes, as it would
in the 64-bit format, then absolute 8-byte addresses. Read as DWARF says, every FDE then
covers its start and end shifted left by 32 bits.

It adds what FreePascal writes for the routines the linker discarded: FDEs at 0 (one of 0x27
bytes covers 0 to 0x27_0000_0000 read as DWARF says: a kernel linked below that, as
FreePascal's are, is covered whole), and, for this kernel linked in the top 2 GiB, one at
0xffff_ffff_ffff_fffe whose DWARF reading covers that top instead. scripts/guests/
build-kernel-freepascal-cfi.sh puts OUT in the ELF, its `.eh_frame` renamed.
"""

import struct
import sys

# DW_EH_PE encodings of .eh_frame pointers.
ABSPTR, UDATA4, SDATA4, UDATA8, SDATA8 = 0x00, 0x03, 0x0B, 0x04, 0x0C
PCREL = 0x10


def die(msg):
    sys.exit(f"[kern-profile] error: freepascal_cfi.py: {msg}")


def uleb(data, at):
    value = shift = 0
    while True:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, at


def sleb(data, at):
    value, end = uleb(data, at)
    bits = 7 * (end - at)
    if value & (1 << (bits - 1)):
        value -= 1 << bits
    return value, end


def section(elf, name):
    """The (address, bytes) of an ELF64 little-endian section."""
    if elf[:5] != b"\x7fELF\x02" or elf[5] != 1:
        die("not a little-endian ELF64")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    for name_off, _, _, addr, off, size in headers:
        end = elf.index(b"\0", names + name_off)
        if elf[names + name_off:end].decode() == name:
            return addr, elf[off:off + size]
    die(f"no {name} section")


def pointer(data, at, encoding, address):
    """An encoded pointer at `at` (the section loaded at `address`): (value, next offset)."""
    fmt = {ABSPTR: "<Q", UDATA4: "<I", SDATA4: "<i", UDATA8: "<Q", SDATA8: "<q"}.get(encoding & 0x0F)
    if fmt is None or encoding & 0x70 not in (0, PCREL):
        die(f"pointer encoding {encoding:#x}")
    value, = struct.unpack_from(fmt, data, at)
    if encoding & 0x70 == PCREL:
        value += address + at
    return value & (2**64 - 1), at + struct.calcsize(fmt)


def read_eh_frame(address, data):
    """The CIEs (offset -> (code align, data align, return column, instructions, pointer
    encoding)) and the FDEs (CIE offset, start, size, instructions) of an .eh_frame."""
    cies, fdes, at = {}, [], 0
    while at + 4 <= len(data):
        length, = struct.unpack_from("<I", data, at)
        if length == 0:
            break
        if length == 0xFFFFFFFF:
            die("64-bit DWARF entries")
        body, end = at + 4, at + 4 + length
        ident, = struct.unpack_from("<I", data, body)
        if ident == 0:
            version = data[body + 4]
            aug_end = data.index(b"\0", body + 5)
            aug = data[body + 5:aug_end].decode()
            p = aug_end + 1
            code, p = uleb(data, p)
            align, p = sleb(data, p)
            if version == 1:
                ra, p = data[p], p + 1
            else:
                ra, p = uleb(data, p)
            encoding = ABSPTR
            if aug.startswith("z"):
                n, p = uleb(data, p)
                aug_data, p = data[p:p + n], p + n
                for i, c in enumerate(aug[1:]):
                    if c == "R":
                        encoding = aug_data[i]
                    elif c != "S":
                        # S (a signal frame) has no .debug_frame form: dropped.
                        die(f"augmentation {aug!r}")
            cies[at] = (code, align, ra, data[p:end], encoding)
        else:
            cie = body - ident
            if cie not in cies:
                die(f"FDE at {at:#x}: no CIE at {cie:#x}")
            encoding = cies[cie][4]
            start, p = pointer(data, body + 4, encoding, address)
            size, p = pointer(data, p, encoding & 0x0F, address)
            n, p = uleb(data, p)
            fdes.append((cie, start, size, data[p + n:end]))
        at = end
    return cies, fdes


def ule(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def sle(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        done = (v == 0 and not b & 0x40) or (v == -1 and b & 0x40)
        out.append(b | (0 if done else 0x80))
        if done:
            return bytes(out)


def entry(body):
    """An entry in the 32-bit format, its length before it (FreePascal pads none)."""
    return struct.pack("<I", len(body)) + body


def main():
    if len(sys.argv) != 3:
        die("usage: freepascal_cfi.py ELF OUT")
    elf = open(sys.argv[1], "rb").read()
    cies, fdes = read_eh_frame(*section(elf, ".eh_frame"))
    if not fdes:
        die("no FDE in .eh_frame")
    # A routine the linker discarded: push rbp; mov rbp, rsp, as FreePascal writes it
    # (rbp at CFA - 16 with the data alignment of -8 the CIEs below keep).
    discarded = bytes([0x41, 0x0E, 16, 0x86, 2, 0x44, 0x0D, 6])
    first_cie = min(cies)
    fdes += [
        (first_cie, 0, 0x27, discarded),
        (first_cie, 0, 0x13, discarded),
        (first_cie, 0xFFFF_FFFF_FFFF_FFFE, 1, discarded),
    ]
    out, where = bytearray(), {}
    for off, (code, align, ra, insns, _) in sorted(cies.items()):
        where[off] = len(out)
        out += entry(struct.pack("<IB", 0xFFFFFFFF, 1) + b"\0" + ule(code) + sle(align)
                     + bytes([ra]) + insns)
    for cie, start, size, insns in fdes:
        # The 8-byte CIE pointer of a 32-bit entry: FreePascal's layout.
        out += entry(struct.pack("<QQQ", where[cie], start, size) + insns)
    open(sys.argv[2], "wb").write(out)
    print(f"{len(fdes) - 3} FDEs of .eh_frame and 3 of discarded routines", file=sys.stderr)


main()
