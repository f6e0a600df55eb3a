#!/usr/bin/env python3
"""Check a Maestro `memtrace` file written by an example kernel, through the aggregator.

    examples/kernel/check-memtrace.py MEMTRACE [--elf kernel.elf] [--com1 com1.txt]
                                     [--expect examples/kernel/expected.toml] [--bin kern-profile]

The trace is read by `kern-profile --alloc` (the aggregator: --bin, $KP_BIN, or
target/release/kern-profile), not by this script: its text report gives each allocator's
counters and the trace's inconsistencies (frees or reallocs of a pointer the trace does not
know, double frees, allocs at a live pointer); its folded output (`--no-inline`, one frame
per return address) gives the stacks, by units allocated (`--view allocated`: the alloc-only
total, the frames per allocation and reallocation record) and by units still live at the end
(`--view live`, the leaks).

Prints per-allocator totals and the leaked blocks by allocating function. Exits 1 when the
aggregator cannot read the file or warns about it (a cut record), when the trace is not
self-consistent, or when totals
differ from the kernel's own counters (--com1) or from expected.toml (--expect, the default
alloc_rounds only).

Trace semantics (those of Maestro, see /work/shared/notes/formats.md): alloc is recorded
after the allocation with the new pointer; realloc and free before the operation with the
old pointer; a moving realloc's new pointer is not recorded. So a realloc'ed block is kept
under its OLD pointer with its NEW size, and its allocating stack.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The allocators' entry points (frame 0 of every record) and the tracer: not the function
# that allocated.
ALLOCATOR_FRAMES = ("kernel_common::kalloc::", "kernel_common::memtrace::")

HEADER_RE = re.compile(r"^memtrace: (\d+) records, (\d+) allocator\(s\)$", re.M)
ALLOCATOR_RE = re.compile(r"^allocator `([^`]+)`", re.M)
# Text report line label -> counter.
REPORT_KEYS = {
    "operations": "records", "allocations": "alloc", "reallocations": "realloc",
    "frees": "free", "peak live": "peak_live", "live at end": "live_at_end",
    "frees of unknown pointers": "unknown_frees", "double frees": "double_frees",
    "allocs at a live pointer": "reused_live",
}
LINE_RE = re.compile(r"^  (\S.*?)\s{2,}(\d+)(.*)$")
UNKNOWN_REALLOCS_RE = re.compile(r"\((\d+) of a pointer not live\)")
COM1_RE = re.compile(r"alloc (\S+): alloc=(\d+) realloc=(\d+) \(moved=(\d+)\) free=(\d+) "
                     r"total_allocated=(\d+) peak_live=(\d+) live_at_end=(\d+)")
KEYS = ["alloc", "realloc", "free", "total_allocated", "peak_live", "live_at_end"]
PROBLEMS = {"unknown_frees": "free(s) of an unknown pointer",
            "unknown_reallocs": "realloc(s) of an unknown pointer",
            "double_frees": "double free(s)",
            "reused_live": "alloc(s) of a pointer already live"}


class AggregatorError(Exception):
    pass


def kern_profile(bin_path, *args):
    p = subprocess.run([bin_path, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AggregatorError(f"kern-profile {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def report(bin_path, memtrace, elf):
    """(records, warnings, {allocator: counters}) from the aggregator's text report (the
    warnings: a cut file, regions skipped)."""
    text = kern_profile(bin_path, "--alloc", memtrace, elf, "-f", "text", "--top", "0")
    m = HEADER_RE.search(text)
    if m is None:
        raise AggregatorError(f"no header in the text report:\n{text}")
    stats = {}
    starts = list(ALLOCATOR_RE.finditer(text))
    head = text[:starts[0].start()] if starts else text
    warnings = [line for line in head.splitlines() if line.startswith("warning:")]
    for i, a in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        s = {k: 0 for k in REPORT_KEYS.values()}
        s["unknown_reallocs"] = 0
        for line in text[a.end():end].splitlines():
            lm = LINE_RE.match(line)
            if lm and lm.group(1) in REPORT_KEYS:
                s[REPORT_KEYS[lm.group(1)]] = int(lm.group(2))
                um = UNKNOWN_REALLOCS_RE.search(lm.group(3))
                if lm.group(1) == "reallocations" and um:
                    s["unknown_reallocs"] = int(um.group(1))
        stats[a.group(1)] = s
    return int(m.group(1)), warnings, stats


def folded(bin_path, memtrace, elf, view):
    """{allocator: [(frames root first, units)]} of `--view VIEW`, one frame per address."""
    with tempfile.TemporaryDirectory(prefix="kp-memtrace-") as d:
        kern_profile(bin_path, "--alloc", memtrace, elf, "-f", "folded", "--view", view,
                     "--no-inline", "--addresses", "-o", d)
        out = {}
        for f in sorted(os.listdir(d)):
            m = re.fullmatch(r"mem-(.+)\.folded", f)
            if m is None:
                continue
            stacks = []
            for line in open(os.path.join(d, f)):
                if line.strip():
                    stack, n = line.rstrip("\n").rsplit(" ", 1)
                    stacks.append((stack.split(";"), int(n)))
            out[m.group(1)] = stacks
        return out


def leaker(frames):
    """The first frame, from the leaf, outside the allocators and memtrace: the function that
    allocated."""
    for fn in reversed(frames):
        if not fn.startswith(ALLOCATOR_FRAMES):
            return fn
    return "?"


def analyse(bin_path, memtrace, elf):
    """(records, warnings, {allocator: counters, leaks and frame depths}) of the trace."""
    records, warnings, stats = report(bin_path, memtrace, elf)
    allocated = folded(bin_path, memtrace, elf, "allocated")
    live = folded(bin_path, memtrace, elf, "live")
    for name, s in stats.items():
        stacks = allocated.get(name, [])
        # Frame 0 is the allocator entry point: *realloc for the reallocations' new sizes.
        s["total_allocated"] = sum(n for st, n in stacks if not st[-1].endswith("realloc"))
        depths = [len(st) for st, _ in stacks]
        s["min_frames"], s["max_frames"] = min(depths, default=0), max(depths, default=0)
        leaks = {}
        for st, n in live.get(name, []):
            leaks[leaker(st)] = leaks.get(leaker(st), 0) + n
        s["leaks"] = leaks
    return records, warnings, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("memtrace")
    ap.add_argument("--elf", default=os.path.join(ROOT, "target/examples/kernel.elf"),
                    help="kernel ELF that wrote the trace (default: the i386 kernel)")
    ap.add_argument("--com1", help="COM1 output of the same run: compare with the kernel's counters")
    ap.add_argument("--expect", help="expected.toml: compare with its [memtrace] (default alloc_rounds)")
    ap.add_argument("--bin", default=os.environ.get("KP_BIN",
                                                     os.path.join(ROOT, "target/release/kern-profile")),
                    help="the aggregator (default: $KP_BIN or target/release/kern-profile)")
    args = ap.parse_args()

    try:
        records, warnings, stats = analyse(args.bin, args.memtrace, args.elf)
    except (AggregatorError, OSError) as e:
        print(f"memtrace: {e}")
        return 1
    size = os.path.getsize(args.memtrace)
    failed = False

    print(f"{records} records, {size} bytes")
    for w in warnings:
        print(f"memtrace: {w}")
        failed = True
    for name, s in sorted(stats.items()):
        print(f"{name}: " + " ".join(f"{k}={s[k]}" for k in ["records"] + KEYS)
              + f" frames={s['min_frames']}..{s['max_frames']}")
        for who, units in sorted(s["leaks"].items()):
            print(f"  leaked {units} by {who}")
        for k, what in PROBLEMS.items():
            if s[k]:
                print(f"inconsistent: {name}: {s[k]} {what}")
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
        lo = min((s["min_frames"] for s in stats.values()), default=0)
        hi = max((s["max_frames"] for s in stats.values()), default=0)
        if (lo, hi) != (exp["min_frames"], exp["max_frames"]):
            print(f"MISMATCH frames per record: {lo}..{hi}, expected "
                  f"{exp['min_frames']}..{exp['max_frames']}")
            failed = True
        if exp.get("records") != records or exp.get("bytes") != size:
            print(f"MISMATCH records/bytes: {records}/{size}, expected "
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
            if s["leaks"] != {e["leak_function"]: e["leaked"]}:
                print(f"MISMATCH {name} leaks: {s['leaks']}, expected "
                      f"{{{e['leak_function']!r}: {e['leaked']}}}")
                failed = True

    print("FAILED" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
