"""Workload 4, aggregator throughput: `kern-profile RAW ELF -f folded|svg` on a recording of
at least 10 M samples made with the real plugin (period=400): samples/s and peak RSS; then
raw -> folded side by side with a pinned older build of the aggregator (BASE_COMMIT, or the
commit $KP_BENCH_AGG_BASE names), the two alternated on the same file: wall and CPU
min/median/max and their ratios round by round, so that a slowdown shows as a ratio on any
machine and under any load, not as a figure to compare with another machine's. The pinned
build is made once, by `git archive` and `cargo build` with its own target directory, and
kept in $KP_OUT/bench-cache.

Then the stack table (format version 4, the plugin's stacks=on, which `record` passes): the
same workload recorded with stacks=on, and that recording made 10 times longer (its sample
runs repeated after it, their times going on: the same stacks, 10 times the samples), each
drawn raw -> folded: samples/s by wall and by CPU time, and peak RSS, which must stay flat
from 10 M to 100 M samples.
"""

import math
import os
import struct
import re
import shlex
import shutil
import subprocess

from common import (TOOL_HEAD, TOOL_RIGHT, BenchError, add_run, capture, fmt_int, fmt_rate,
                    fmt_rss, fmt_s, fmt_spread, format_table, judge, loadavg, median,
                    rss_floor_kb, run_measured, say, spread, tail)

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

# The build raw -> folded is timed against: main before the aggregator's per-distinct-stack
# key building (issue 42), whose outputs this build's equal byte for byte, so the ratio is of
# the same work (the side-by-side table says whether the outputs were equal). An older pin,
# e.g. the 2026-11-23 build the issue found faster (d1feec9), names frames differently.
BASE_COMMIT = "1b25cd426df5e956796a45c3ce79e0d3f648b772"
BASE_ENV = "KP_BENCH_AGG_BASE"
TARGET_TABLE_SAMPLES_PER_S = 30e6   # raw v4 -> folded, on 100 M samples
TABLE_COPIES = 10                   # the long recording: the big one's runs 10 times
TABLE_RSS_GROWTH = 1.5              # peak RSS at 100 M samples over that at 10 M, at most
KIND_STATS, KIND_STACK, KIND_RUN = 3, 11, 12
SIDE_ROUNDS = 5               # alternated rounds of the side-by-side comparison


def big_samples(b):
    return BIG_SAMPLES // 10 if b.a.quick else BIG_SAMPLES


def record_big_raw(b, stacks=False):
    """The aggregator's input: the example kernel at period=BIG_PERIOD; with `stacks`, the
    plugin's stacks=on (format version 4)."""
    name = "big-stacks" if stacks else "big"
    path = os.path.join(b.data, f"{name}.raw")
    # 3% over the target: firmware and boot add few samples; drops would remove some.
    rounds = math.ceil(big_samples(b) * 1.03 * BIG_PERIOD / b.insns_per_round)
    meta = {"kernel_sha256": b.kernel_sha, "plugin_sha256": b.plugin_sha,
            "period": BIG_PERIOD, "rounds": rounds, "stacks": stacks}
    old = b.kept(path, meta, "samples")
    if old:
        return path, old
    append = f"rounds={rounds} alloc_rounds=0"
    pargs = f"out={path},period={BIG_PERIOD}" + (",stacks=on" if stacks else "")
    say(f"recording the aggregator's input: {append}, {pargs[len(path) + 5:]} "
        f"(~{big_samples(b) / 1e6:g} M samples)")
    argv = b.qemu_cmd(os.path.join(b.data, f"{name}-com1.txt"), "none", append, pargs)
    wall, _, _, _, err = b.run_qemu(argv, f"{name}-record", 1200)
    samples, dropped = b.parse_summary(err, f"{name}-record")
    if samples < big_samples(b):
        raise BenchError(f"the recording holds {samples} samples ({dropped} dropped), "
                         f"fewer than the {big_samples(b)} wanted")
    info = dict(meta, samples=samples, dropped=dropped, bytes=os.path.getsize(path),
                record_wall_s=wall, append=append)
    return b.made(path, info)


def lengthen(src, dst, copies):
    """`src` (a plain version-4 recording) with its sample runs written `copies` times: the
    stacks once, then the runs again and again (their time deltas go on from where the last
    left off), the statistics record last with its sample count multiplied."""
    data = open(src, "rb").read()
    at = struct.unpack_from("<H", data, 10)[0]
    head, runs, rest, stats = [data[:at]], [], [], None
    while at + 5 <= len(data):
        kind, n = data[at], struct.unpack_from("<I", data, at + 1)[0]
        rec = data[at:at + 5 + n]
        at += 5 + n
        if kind == KIND_STATS:
            body = bytearray(rec)
            samples = struct.unpack_from("<Q", body, 5)[0]
            struct.pack_into("<Q", body, 5, samples * copies)
            stats = bytes(body)
            continue
        rest.append(rec)
        if kind == KIND_RUN:
            runs.append(rec)
    with open(dst + ".tmp", "wb") as f:
        f.write(b"".join(head + rest))
        for _ in range(copies - 1):
            f.write(b"".join(runs))
        if stats:
            f.write(stats)
    os.replace(dst + ".tmp", dst)


def measure_table(b, raw10, samples10):
    """raw -> folded on the stack-table recording and on it made TABLE_COPIES times longer."""
    raw100 = os.path.join(b.data, "big-stacks-x10.raw")
    lengthen(raw10, raw100, TABLE_COPIES)
    out = {}
    for name, raw, samples in (("10x", raw100, samples10 * TABLE_COPIES),
                               ("1x", raw10, samples10)):
        with open(raw, "rb") as f:
            while f.read(1 << 20):
                pass
        d = {"wall_s": [], "user_s": [], "sys_s": [], "rss_kb": []}
        for r in range(b.agg_runs):
            outp = os.path.join(b.data, f"table-{name}.folded")
            se = os.path.join(b.data, f"table-{name}.stderr")
            cmd = [b.kp, raw, b.kernel, "-f", "folded", "-o", outp]
            status, wall, user, sys_, rss = run_measured(
                cmd, os.path.join(b.data, f"table-{name}.stdout"), se, 900)
            if status != 0:
                raise BenchError(f"kern-profile failed ({status}): {shlex.join(cmd)}\n{tail(se)}")
            m = AGG_SAMPLES_RE.search(open(se, errors="replace").read())
            if not m or int(m.group(2)) != samples:
                raise BenchError(f"kern-profile read {m and m.group(2)} samples from {raw}, "
                                 f"{samples} expected")
            add_run(d, wall, user, sys_, rss)
            say(f"  stack table x{name[:-1]} raw -> folded run {r + 1}/{b.agg_runs}: "
                f"{wall:.2f} s, {samples / wall / 1e6:.2f} M samples/s, {rss / 1024:.0f} MB")
        d["cpu_s"] = [u + k for u, k in zip(d["user_s"], d["sys_s"])]
        out[name] = {"samples": samples, "bytes": os.path.getsize(raw), "runs": d,
                     "median_wall_s": median(d["wall_s"]), "median_cpu_s": median(d["cpu_s"]),
                     "peak_rss_mb": max(d["rss_kb"]) / 1024}
    os.remove(raw100)
    return out


def base_binary(b):
    """The pinned aggregator build: (commit, its date, the binary), built into
    $KP_OUT/bench-cache/aggregator-COMMIT the first time (source by `git archive`, its own
    CARGO_TARGET_DIR, no plugin embedded: reports need none) and reused after."""
    rev = os.environ.get(BASE_ENV) or BASE_COMMIT
    commit = capture(["git", "-C", b.root, "rev-parse", "--verify", "--quiet",
                      rev + "^{commit}"]).strip()
    date = capture(["git", "-C", b.root, "show", "-s", "--format=%cd", "--date=short",
                    commit]).strip()
    cache = os.path.join(b.out, "bench-cache", f"aggregator-{commit[:12]}")
    binary = os.path.join(cache, "kern-profile")
    if os.path.isfile(binary):
        say(f"pinned aggregator build {commit[:12]} ({date}): reusing {binary}")
        return commit, date, binary
    say(f"building the pinned aggregator {commit[:12]} ({date}) into {cache} (once)")
    src = os.path.join(cache, "src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    tar = os.path.join(cache, "src.tar")
    capture(["git", "-C", b.root, "archive", "--format=tar", f"--output={tar}", commit])
    capture(["tar", "-xf", tar, "-C", src])
    os.remove(tar)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(cache, "target"), KP_EMBED_PLUGIN="0")
    log = os.path.join(cache, "build.log")
    with open(log, "w") as f:
        r = subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "kern-profile"],
                           cwd=src, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=f)
    if r.returncode != 0:
        raise BenchError(f"building the pinned aggregator {commit[:12]} failed ({r.returncode}):\n"
                         f"{tail(log)}")
    shutil.copy2(os.path.join(cache, "target", "release", "kern-profile"), binary + ".tmp")
    os.replace(binary + ".tmp", binary)
    # The binary is what is kept: the sources and the ~1 GB of build products are not.
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(os.path.join(cache, "target"), ignore_errors=True)
    return commit, date, binary


def side_by_side(b, raw, samples):
    """raw -> folded by this build and by the pinned one, alternated (which runs first swaps
    every round), SIDE_ROUNDS rounds: each one's wall and CPU, and this build's over the pinned
    one's round by round (paired: a busy spell of the machine slows both)."""
    commit, date, base = base_binary(b)
    bins = {"new": b.kp, "base": base}
    runs = {k: {"wall_s": [], "user_s": [], "sys_s": [], "rss_kb": []} for k in bins}
    load0 = loadavg()
    say(f"  side by side with {commit[:12]} ({date}), {SIDE_ROUNDS} rounds, "
        f"load average {load0}")
    for r in range(SIDE_ROUNDS):
        order = ("new", "base") if r % 2 == 0 else ("base", "new")
        line = []
        for k in order:
            outp = os.path.join(b.data, f"side-{k}.folded")
            se = os.path.join(b.data, f"side-{k}.stderr")
            cmd = [bins[k], raw, b.kernel, "-f", "folded", "-o", outp]
            status, wall, user, sys_, rss = run_measured(
                cmd, os.path.join(b.data, f"side-{k}.stdout"), se, 600)
            if status != 0:
                raise BenchError(f"kern-profile failed ({status}): {shlex.join(cmd)}\n{tail(se)}")
            add_run(runs[k], wall, user, sys_, rss)
            line.append(f"{k} {wall:.2f}s")
        say(f"  side by side round {r + 1}/{SIDE_ROUNDS}: " + ", ".join(line))
    for d in runs.values():
        d["cpu_s"] = [u + k for u, k in zip(d["user_s"], d["sys_s"])]
    new, old = runs["new"], runs["base"]
    with open(os.path.join(b.data, "side-new.folded"), "rb") as f1, \
            open(os.path.join(b.data, "side-base.folded"), "rb") as f2:
        same = f1.read() == f2.read()
    return {"base_commit": commit, "base_date": date, "base_binary": base,
            "rounds": SIDE_ROUNDS, "samples": samples, "runs": runs,
            "loadavg_start": load0, "loadavg_end": loadavg(), "same_output": same,
            "wall_s": {k: spread(d["wall_s"]) for k, d in runs.items()},
            "cpu_s": {k: spread(d["cpu_s"]) for k, d in runs.items()},
            "wall_ratio": spread([n / o for n, o in zip(new["wall_s"], old["wall_s"])]),
            "cpu_ratio": spread([n / o for n, o in zip(new["cpu_s"], old["cpu_s"])])}


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
    res["side_by_side"] = side_by_side(b, raw, samples)
    raw4, info4 = record_big_raw(b, stacks=True)
    res["table_input"] = {"samples": info4["samples"], "bytes": info4["bytes"],
                          "plain_bytes_per_sample": info["bytes"] / samples,
                          "table_bytes_per_sample": info4["bytes"] / info4["samples"]}
    res["table"] = measure_table(b, raw4, info4["samples"])
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
    t = ag["table"]
    rss_flat = t["10x"]["peak_rss_mb"] <= TABLE_RSS_GROWTH * max(t["1x"]["peak_rss_mb"], 1)
    for name in ("1x", "10x"):
        r = t[name]
        targets, fails = [], []
        if name == "10x":
            targets = [f"≥{TARGET_TABLE_SAMPLES_PER_S / 1e6:g} M/s",
                       f"RSS ≤{TABLE_RSS_GROWTH:g}x the 1x run's"]
            fails = (["throughput"] if r["samples"] / r["median_wall_s"]
                     < TARGET_TABLE_SAMPLES_PER_S else []) + ([] if rss_flat else ["RSS"])
        result = judge(targets, fails) if targets else ""
        if targets:
            checks.append(("aggregator stack table raw -> folded, 100 M samples", result))
        rows.append((f"stack table (v4) raw -> folded, {name}", fmt_s(r["median_wall_s"]),
                     f"{fmt_rate(r['samples'] / r['median_wall_s'])} samples/s "
                     f"({fmt_rate(r['samples'] / r['median_cpu_s'])}/s of CPU)",
                     fmt_s(r["median_cpu_s"]), fmt_int(r["samples"]) + " samples",
                     fmt_rss(r["peak_rss_mb"] * 1024, rss_floor_kb()),
                     ", ".join(targets), result))
    text = "Aggregator:\n" + format_table(TOOL_HEAD, [(None, rows)], TOOL_RIGHT)
    return (text + "\n\n" + side_table(ag["side_by_side"]), checks)


SIDE_HEAD = ("raw -> folded, same file, alternated", "wall min/median/max",
             "CPU min/median/max", "throughput (median wall)", "peak RSS")


def side_table(sb):
    """This build against the pinned one: their times, then the ratios round by round."""
    def row(k, name):
        w = sb["wall_s"][k]
        return (name, fmt_spread(w, " s"), fmt_spread(sb["cpu_s"][k], " s"),
                f"{fmt_rate(sb['samples'] / w['median'])} samples/s",
                fmt_rss(max(sb["runs"][k]["rss_kb"]), rss_floor_kb()))
    rows = [row("new", "this build"),
            row("base", f"pinned {sb['base_commit'][:12]} ({sb['base_date']})"),
            ("this build / pinned (per round)", fmt_spread(sb["wall_ratio"]),
             fmt_spread(sb["cpu_ratio"]), "", "")]
    same = ("the same folded output" if sb["same_output"] else
            "DIFFERENT folded outputs (expected only when the pinned build names frames "
            "differently)")
    return (f"Aggregator side by side ({sb['rounds']} rounds, load average "
            f"{sb['loadavg_start']} -> {sb['loadavg_end']}; {same}):\n"
            + format_table(SIDE_HEAD, [(None, rows)], {1, 2, 3, 4}))


def notes(b):
    ag = b.results["aggregator"]["input"]
    return [f"aggregator input: {fmt_int(ag['samples'])} samples, {ag['bytes'] / 1e6:.0f} MB "
            f"(period={ag['period']}, rounds={ag['rounds']}"
            + (f", recorded in {ag['record_wall_s']:.1f} s" if ag["record_wall_s"] else ", reused (--keep)")
            + f"); median of {b.agg_runs}, input in the page cache; peak RSS = max of the runs.",
            f"stack table: {b.results['aggregator']['table_input']['table_bytes_per_sample']:.1f} "
            f"bytes a sample (stacks=on, plain) against "
            f"{b.results['aggregator']['table_input']['plain_bytes_per_sample']:.1f} without; "
            f"1x is that recording, 10x its runs repeated {TABLE_COPIES} times."]
