#!/usr/bin/env python3
"""Parse and check a Maestro `memtrace` file written by the example kernel on COM2.

    examples/kernel/check-memtrace.py MEMTRACE [--elf kernel.elf] [--com1 com1.txt]
                                     [--expect examples/kernel/expected.toml]

Prints per-allocator totals and the leaked blocks by allocating function. Exits 1 when the
file does not parse, when the trace is not self-consistent (a free or realloc of a pointer
the trace does not know, an alloc of a pointer it thinks live), or when totals differ from
the kernel's own counters (--com1) or from expected.toml (--expect, the default alloc_rounds
only).

Trace semantics (those of Maestro, see /work/shared/notes/formats.md): alloc is recorded
after the allocation with the new pointer; realloc and free before the operation with the
old pointer; a moving realloc's new pointer is not recorded. So a realloc'ed block is kept
under its OLD pointer with its NEW size, and its allocating stack.
"""
import argparse
import re
import struct
import subprocess
import sys
import tomllib

OPS = {0: "alloc", 1: "realloc", 2: "free"}
MAX_FRAMES = 64


def parse(data):
    """Yields (name, op, ptr, size, frames); raises ValueError on a malformed record."""
    off = 0
    n = len(data)
    while off < n:
        start = off
        nlen = data[off]
        off += 1
        if off + nlen + 18 > n:
            raise ValueError(f"record at {start}: truncated header")
        name = data[off:off + nlen].decode("ascii")
        off += nlen
        op = data[off]
        off += 1
        if op not in OPS:
            raise ValueError(f"record at {start}: unknown op {op}")
        ptr, size = struct.unpack_from("<QQ", data, off)
        off += 16
        nframe = data[off]
        off += 1
        if nframe > MAX_FRAMES:
            raise ValueError(f"record at {start}: {nframe} frames (max {MAX_FRAMES})")
        if off + 8 * nframe > n:
            raise ValueError(f"record at {start}: truncated frames")
        frames = struct.unpack_from(f"<{nframe}Q", data, off)
        off += 8 * nframe
        yield name, op, ptr, size, frames


class Symbols:
    def __init__(self, elf):
        out = subprocess.run(["nm", "-n", "-C", "--defined-only", elf], check=True,
                             capture_output=True, text=True).stdout
        self.addrs, self.names = [], []
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in "tTwW":
                self.addrs.append(int(parts[0], 16))
                self.names.append(re.sub(r"::h[0-9a-f]{16}$", "", parts[2]))

    def lookup(self, addr):
        import bisect
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.names[i] if i >= 0 else f"{addr:#x}"


def analyse(records, syms=None):
    stats = {}
    problems = []
    for idx, (name, op, ptr, size, frames) in enumerate(records):
        s = stats.setdefault(name, {
            "alloc": 0, "realloc": 0, "free": 0, "records": 0, "total_allocated": 0,
            "live": {}, "live_sum": 0, "peak_live": 0, "max_frames": 0, "min_frames": 99})
        s["records"] += 1
        s["max_frames"] = max(s["max_frames"], len(frames))
        s["min_frames"] = min(s["min_frames"], len(frames))
        live = s["live"]
        if op == 0:
            s["alloc"] += 1
            s["total_allocated"] += size
            if ptr in live:
                problems.append(f"#{idx} {name}: alloc of {ptr:#x}, already live")
                s["live_sum"] -= live[ptr][0]
            live[ptr] = (size, frames)
            s["live_sum"] += size
        elif op == 1:
            s["realloc"] += 1
            if ptr not in live:
                problems.append(f"#{idx} {name}: realloc of unknown {ptr:#x}")
            else:
                old, st = live[ptr]
                live[ptr] = (size, st)
                s["live_sum"] += size - old
        else:
            s["free"] += 1
            if ptr not in live:
                problems.append(f"#{idx} {name}: free of unknown {ptr:#x}")
            else:
                s["live_sum"] -= live.pop(ptr)[0]
        s["peak_live"] = max(s["peak_live"], s["live_sum"])
    for name, s in stats.items():
        s["live_at_end"] = s["live_sum"]
        leaks = {}
        for size, frames in s["live"].values():
            who = leaker(frames, syms)
            leaks[who] = leaks.get(who, 0) + size
        s["leaks"] = leaks
    return stats, problems


def leaker(frames, syms):
    """The first frame outside the allocators and memtrace: the function that allocated."""
    if syms is None:
        return f"{frames[1]:#x}" if len(frames) > 1 else "?"
    for f in frames:
        fn = syms.lookup(f - 1)  # f is a return address: f - 1 is inside the call
        if not fn.startswith(("kernel::kalloc::", "kernel::memtrace::")):
            return fn
    return "?"


COM1_RE = re.compile(r"alloc (\S+): alloc=(\d+) realloc=(\d+) \(moved=(\d+)\) free=(\d+) "
                     r"total_allocated=(\d+) peak_live=(\d+) live_at_end=(\d+)")
KEYS = ["alloc", "realloc", "free", "total_allocated", "peak_live", "live_at_end"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("memtrace")
    ap.add_argument("--elf", help="kernel ELF, to name the leaking functions")
    ap.add_argument("--com1", help="COM1 output of the same run: compare with the kernel's counters")
    ap.add_argument("--expect", help="expected.toml: compare with its [memtrace] (default alloc_rounds)")
    args = ap.parse_args()

    data = open(args.memtrace, "rb").read()
    try:
        records = list(parse(data))
    except ValueError as e:
        print(f"memtrace: parse error: {e}")
        return 1
    syms = Symbols(args.elf) if args.elf else None
    stats, problems = analyse(records, syms)
    failed = False

    print(f"{len(records)} records, {len(data)} bytes")
    for name, s in sorted(stats.items()):
        print(f"{name}: " + " ".join(f"{k}={s[k]}" for k in ["records"] + KEYS)
              + f" frames={s['min_frames']}..{s['max_frames']}")
        for who, size in sorted(s["leaks"].items()):
            print(f"  leaked {size} by {who}")
    for p in problems[:20]:
        print("inconsistent:", p)
    if problems:
        failed = True

    if args.com1:
        seen = 0
        for m in COM1_RE.finditer(open(args.com1, errors="replace").read()):
            seen += 1
            name = m.group(1)
            kernel = dict(zip(["alloc", "realloc", "moved", "free"] + KEYS[3:],
                              map(int, m.groups()[1:])))
            s = stats.get(name)
            for k in KEYS:
                got = s[k] if s else 0
                if got != kernel[k]:
                    print(f"MISMATCH {name}.{k}: trace {got}, kernel says {kernel[k]}")
                    failed = True
        if seen == 0:
            print("MISMATCH: no allocator counters on COM1")
            failed = True

    if args.expect:
        exp = tomllib.load(open(args.expect, "rb"))["memtrace"]
        frames = [len(r[4]) for r in records]
        if (min(frames, default=0), max(frames, default=0)) != (exp["min_frames"], exp["max_frames"]):
            print(f"MISMATCH frames per record: {min(frames)}..{max(frames)}, expected "
                  f"{exp['min_frames']}..{exp['max_frames']}")
            failed = True
        if exp.get("records") != len(records) or exp.get("bytes") != len(data):
            print(f"MISMATCH records/bytes: {len(records)}/{len(data)}, expected "
                  f"{exp.get('records')}/{exp.get('bytes')}")
            failed = True
        for name, e in exp["allocator"].items():
            s = stats.get(name)
            if s is None:
                print(f"MISMATCH: no records of allocator {name}")
                failed = True
                continue
            for k in ["records"] + KEYS:
                if s[k] != e[k]:
                    print(f"MISMATCH {name}.{k}: {s[k]}, expected {e[k]}")
                    failed = True
            if syms is not None and s["leaks"] != {e["leak_function"]: e["leaked"]}:
                print(f"MISMATCH {name} leaks: {s['leaks']}, expected "
                      f"{{{e['leak_function']!r}: {e['leaked']}}}")
                failed = True

    print("FAILED" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
