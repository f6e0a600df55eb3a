"""Workload 4, aggregator throughput: `kern-profile RAW ELF -f folded|svg` on a recording of
at least 10 M samples made with the real plugin (period=400): samples/s and peak RSS.
"""

import math
import os
import re
import shlex

from common import (TOOL_HEAD, TOOL_RIGHT, BenchError, add_run, fmt_int, fmt_rate, fmt_rss, fmt_s,
                    format_table, judge, median, rss_floor_kb, run_measured, say, tail)

NAME = "aggregator"

TARGET_FOLDED_SAMPLES_PER_S = 5e6
TARGET_AGG_RSS_MB = 256
TARGETS = {
    "aggregator_folded_samples_per_s_min": TARGET_FOLDED_SAMPLES_PER_S,
    "aggregator_peak_rss_mb_max": TARGET_AGG_RSS_MB,
}

BIG_PERIOD = 400              # guest instructions between samples of the big raw file
BIG_SAMPLES = 10_000_000      # at least this many samples in it
AGG_SAMPLES_RE = re.compile(r"(\d+) of (\d+) samples")


def big_samples(b):
    return BIG_SAMPLES // 10 if b.a.quick else BIG_SAMPLES


def record_big_raw(b):
    path = os.path.join(b.data, "big.raw")
    # 3% over the target: firmware and boot add few samples; drops would remove some.
    rounds = math.ceil(big_samples(b) * 1.03 * BIG_PERIOD / b.insns_per_round)
    meta = {"kernel_sha256": b.kernel_sha, "plugin_sha256": b.plugin_sha,
            "period": BIG_PERIOD, "rounds": rounds}
    old = b.kept(path, meta, "samples")
    if old:
        return path, old
    append = f"rounds={rounds} alloc_rounds=0"
    say(f"recording the aggregator's input: {append}, period={BIG_PERIOD} (~{big_samples(b) / 1e6:g} M samples)")
    argv = b.qemu_cmd(os.path.join(b.data, "big-com1.txt"), "none", append,
                         f"out={path},period={BIG_PERIOD}")
    wall, _, _, _, err = b.run_qemu(argv, "big-record", 1200)
    samples, dropped = b.parse_summary(err, "big-record")
    if samples < big_samples(b):
        raise BenchError(f"the recording holds {samples} samples ({dropped} dropped), "
                         f"fewer than the {big_samples(b)} wanted")
    info = dict(meta, samples=samples, dropped=dropped, bytes=os.path.getsize(path),
                record_wall_s=wall, append=append)
    return b.made(path, info)

def measure(b):
    """kern-profile raw -> folded and raw -> svg on the big recording; into
    b.results["aggregator"]."""
    raw, info = record_big_raw(b)
    samples = info["samples"]
    say(f"  {fmt_int(samples)} samples, {info['bytes'] / 1e6:.0f} MB"
        + (f", recorded in {info['record_wall_s']:.1f} s" if not info["reused"] else ""))
    # Read it once so that every run finds it in the page cache (the first run is not
    # special; in particular with --keep).
    with open(raw, "rb") as f:
        while f.read(1 << 20):
            pass
    res = {"input": {"path": raw, "bytes": info["bytes"], "samples": samples,
                     "dropped": info["dropped"], "period": info["period"],
                     "rounds": info["rounds"], "reused": info["reused"],
                     "record_wall_s": info.get("record_wall_s")}, "runs": b.agg_runs,
           "formats": {}}
    runs = {f: {"wall_s": [], "user_s": [], "sys_s": [], "rss_kb": []} for f in ("folded", "svg")}
    for r in range(b.agg_runs):
        for fmt in ("folded", "svg"):  # interleaved too
            outp = os.path.join(b.data, f"big.{fmt}")
            se = os.path.join(b.data, f"agg-{fmt}.stderr")
            cmd = [b.kp, raw, b.kernel, "-f", fmt, "-o", outp]
            status, wall, user, sys_, rss = run_measured(
                cmd, os.path.join(b.data, f"agg-{fmt}.stdout"), se, 600)
            if status != 0:
                raise BenchError(f"kern-profile failed ({status}): {shlex.join(cmd)}\n{tail(se)}")
            m = AGG_SAMPLES_RE.search(open(se, errors="replace").read())
            if m and int(m.group(2)) != samples:
                raise BenchError(f"kern-profile read {m.group(2)} samples from {raw}, "
                                 f"the plugin wrote {samples}")
            add_run(runs[fmt], wall, user, sys_, rss)
            say(f"  raw -> {fmt} run {r + 1}/{b.agg_runs}: {wall:.2f} s, "
                f"{samples / wall / 1e6:.2f} M samples/s, {rss / 1024:.0f} MB")
    for fmt, d in runs.items():
        m = median(d["wall_s"])
        d["cpu_s"] = [u + k for u, k in zip(d["user_s"], d["sys_s"])]
        res["formats"][fmt] = {"runs": d, "median_wall_s": m,
                               "median_cpu_s": median(d["cpu_s"]),
                               "samples_per_s": samples / m,
                               "peak_rss_mb": max(d["rss_kb"]) / 1024,
                               "rss_upper_bound_only": max(d["rss_kb"]) <= rss_floor_kb(),
                               "output_bytes": os.path.getsize(os.path.join(b.data, f"big.{fmt}"))}
    b.results["aggregator"] = res


def table(b):
    rows, checks = [], []
    ag = b.results["aggregator"]
    for fmt in ("folded", "svg"):
        r = ag["formats"][fmt]
        targets, fails = [], []
        if fmt == "folded":
            targets.append(f"≥{TARGET_FOLDED_SAMPLES_PER_S / 1e6:g} M/s")
            if r["samples_per_s"] < TARGET_FOLDED_SAMPLES_PER_S:
                fails.append("throughput")
        targets.append(f"RSS <{TARGET_AGG_RSS_MB} MB")
        if r["peak_rss_mb"] >= TARGET_AGG_RSS_MB:
            fails.append("RSS")
        result = judge(targets, fails)
        r["targets"], r["result"] = targets, result
        checks.append((f"aggregator raw -> {fmt}", result))
        rows.append((f"kern-profile raw -> {fmt}", fmt_s(r["median_wall_s"]),
                     f"{fmt_rate(r['samples_per_s'])} samples/s",
                     fmt_s(r["median_cpu_s"]), fmt_int(ag["input"]["samples"]) + " samples",
                     fmt_rss(r["peak_rss_mb"] * 1024, rss_floor_kb()),
                     ", ".join(targets), result))
    return ("Aggregator:\n" + format_table(TOOL_HEAD, [(None, rows)], TOOL_RIGHT), checks)


def notes(b):
    ag = b.results["aggregator"]["input"]
    return [f"aggregator input: {fmt_int(ag['samples'])} samples, {ag['bytes'] / 1e6:.0f} MB "
            f"(period={ag['period']}, rounds={ag['rounds']}"
            + (f", recorded in {ag['record_wall_s']:.1f} s" if ag["record_wall_s"] else ", reused (--keep)")
            + f"); median of {b.agg_runs}, input in the page cache; peak RSS = max of the runs."]
