"""Workload 5, memtrace: `kern-profile --alloc TRACE ELF -f folded` on a memtrace the example
kernel recorded on COM2: records/s.
"""

import os
import re
import shlex

from common import (TOOL_HEAD, TOOL_RIGHT, BenchError, add_run, fmt_int, fmt_rate, fmt_rss, fmt_s,
                    format_table, median, rss_floor_kb, run_measured, say, tail)

NAME = "memtrace"

TARGET_MEMTRACE_RECORDS_PER_S = 2e6
TARGETS = {"memtrace_records_per_s_min": TARGET_MEMTRACE_RECORDS_PER_S}

MEMTRACE_FIXED_RECORDS = 23   # examples/kernel/README.md: records = 23 + 8 * alloc_rounds
MEMTRACE_RECORDS_PER_ROUND = 8
COM1_MEMTRACE_RE = re.compile(r"memtrace: (\d+) records, (\d+) bytes")


def record_memtrace(b):
    path = os.path.join(b.data, "memtrace.bin")
    records_expected = MEMTRACE_FIXED_RECORDS + MEMTRACE_RECORDS_PER_ROUND * b.alloc_rounds
    meta = {"kernel_sha256": b.kernel_sha, "alloc_rounds": b.alloc_rounds}
    old = b.kept(path, meta, "records")
    if old:
        return path, old
    append = f"rounds=0 alloc_rounds={b.alloc_rounds}"
    com1 = os.path.join(b.data, "memtrace-com1.txt")
    say(f"recording a memtrace: {append} ({fmt_int(records_expected)} records; QEMU writes "
        f"COM2 a byte per write(2), so this is the slow part)")
    argv = b.qemu_cmd(com1, path, append)
    wall, _, _, _, _ = b.run_qemu(argv, "memtrace-record", 1800)
    m = COM1_MEMTRACE_RE.search(open(com1, errors="replace").read())
    if not m:
        raise BenchError(f"no 'memtrace: N records, B bytes' line on COM1:\n{tail(com1)}")
    records, nbytes = int(m.group(1)), int(m.group(2))
    size = os.path.getsize(path)
    if size != nbytes or records != records_expected:
        raise BenchError(f"memtrace {path}: {size} bytes / {records} records, the kernel "
                         f"says {nbytes} bytes and {records_expected} records were expected")
    info = dict(meta, records=records, bytes=size, record_wall_s=wall, append=append)
    return b.made(path, info)

def measure(b):
    """kern-profile --alloc on a recorded memtrace; into b.results["memtrace"]."""
    trace, info = record_memtrace(b)
    records = info["records"]
    say(f"  {fmt_int(records)} records, {info['bytes'] / 1e6:.1f} MB"
        + (f", recorded in {info['record_wall_s']:.1f} s "
           f"({records / info['record_wall_s']:,.0f} records/s, "
           f"{info['record_wall_s'] / info['bytes'] * 1e6:.2f} µs a byte)" if not info["reused"] else ""))
    with open(trace, "rb") as f:
        while f.read(1 << 20):
            pass
    d = {"wall_s": [], "user_s": [], "sys_s": [], "rss_kb": []}
    outdir = os.path.join(b.data, "mem")
    for r in range(b.agg_runs):
        se = os.path.join(b.data, "alloc.stderr")
        cmd = [b.kp, "--alloc", trace, b.kernel, "-f", "folded", "-o", outdir]
        status, wall, user, sys_, rss = run_measured(
            cmd, os.path.join(b.data, "alloc.stdout"), se, 600)
        if status != 0:
            raise BenchError(f"kern-profile --alloc failed ({status}): {shlex.join(cmd)}\n{tail(se)}")
        add_run(d, wall, user, sys_, rss)
        say(f"  --alloc run {r + 1}/{b.agg_runs}: {wall:.3f} s, "
            f"{records / wall / 1e6:.2f} M records/s")
    m = median(d["wall_s"])
    b.results["memtrace"] = {
        "input": {"path": trace, "bytes": info["bytes"], "records": records,
                  "alloc_rounds": info["alloc_rounds"], "reused": info["reused"],
                  "record_wall_s": info.get("record_wall_s"),
                  "record_records_per_s": (records / info["record_wall_s"]
                                           if info.get("record_wall_s") else None)},
        "runs": d, "median_wall_s": m, "records_per_s": records / m,
        "median_cpu_s": median([u + k for u, k in zip(d["user_s"], d["sys_s"])]),
        "peak_rss_mb": max(d["rss_kb"]) / 1024,
        "rss_upper_bound_only": max(d["rss_kb"]) <= rss_floor_kb(),
    }


def table(b):
    mt = b.results["memtrace"]
    ok = mt["records_per_s"] >= TARGET_MEMTRACE_RECORDS_PER_S
    mt["targets"] = [f"≥{TARGET_MEMTRACE_RECORDS_PER_S / 1e6:g} M records/s"]
    mt["result"] = "pass" if ok else "MISS (throughput)"
    checks = [("memtrace --alloc -> folded", mt["result"])]
    rows = [("kern-profile --alloc -> folded", fmt_s(mt["median_wall_s"]),
             f"{fmt_rate(mt['records_per_s'])} records/s",
             fmt_s(mt["median_cpu_s"]), fmt_int(mt["input"]["records"]) + " records",
             fmt_rss(mt["peak_rss_mb"] * 1024, rss_floor_kb()),
             mt["targets"][0], mt["result"])]
    return ("Memtrace:\n" + format_table(TOOL_HEAD, [(None, rows)], TOOL_RIGHT), checks)


def notes(b):
    mt = b.results["memtrace"]["input"]
    n = []
    rec = (f"recorded in {mt['record_wall_s']:.1f} s = {mt['record_records_per_s']:,.0f} records/s "
           f"over COM2" if mt["record_wall_s"] else "reused (--keep)")
    n.append(f"memtrace input: {fmt_int(mt['records'])} records, {mt['bytes'] / 1e6:.1f} MB "
             f"(rounds=0 alloc_rounds={mt['alloc_rounds']}), {rec}; median of {b.agg_runs}.")
    if mt["records"] < 1_000_000 and not b.a.quick:
        n.append("  fewer than 1 M records: QEMU writes each COM2 byte with its own write(2) "
                 "(~1.5-2 µs a byte, ~70 bytes a record), so 1 M records take ~2 min to record; "
                 "the size is held to about a minute (--alloc-rounds N changes it).")
    return n
