"""Workload 7, a hostile guest: the i386 example kernel's `hostile=on` phase (spin loops with
EBP on a frame-pointer cycle, unmapped memory, a misaligned address and a chain of one frame
per page: examples/kernel/src/hostile.rs) without the plugin, with the sampler parked, and
with the most expensive sampling settings (depth=1024), round-robin; wall and CPU time,
ratios to bare and to the parked run of the same round (min/median/max over the rounds),
samples, throttled ticks.

docs/sampling.md's cost bound: under delay= sampling stays under a tenth of each vCPU's host
time, so about 1.1x over the guest's own emulation time plus the per-block check, whatever
the guest's stacks are, and the timer thread at most a tenth of a core. "Plus the per-block
check" is the parked run: the same settings and per-block test, the sampler parked by a
window= no code enters (so the timer sleeps). So the bound is judged against it; the
per-block check's own cost is the overhead workload's.
"""

import os
import re

from common import (BenchError, compare, fmt_int, fmt_rss, fmt_s, fmt_spread, format_table,
                    judge, round_robin, rss_floor_kb, say, spread)

NAME = "hostile"
ARCH = "i386"
PARKED = "delay=10 parked"
# The stated bound, against the parked run of the same round.
TARGET_RATIO = {"delay=10,depth=1024": 1.15}
# What each configuration's bound is judged against.
BASELINE = {"delay=10,depth=1024": PARKED}
TARGETS = {"hostile_wall_ratio_max": TARGET_RATIO}
CONFIGS = [
    ("bare", None),
    (PARKED, "delay=10,depth=1024,window=0x1-0x2"),
    ("delay=10,depth=1024", "delay=10,depth=1024"),
    ("period=10000,depth=1024", "period=10000,depth=1024"),
]
SAMPLES_RE = re.compile(r"kern-profile: (\d+) samples written")
THROTTLED_RE = re.compile(r"(\d+) vCPU ticks skipped to keep slow stack walks")
# hostile=on runs rounds x 1000 spin iterations per case, each a call of a two-instruction
# leaf: 60,000 rounds are ~3 s of bare QEMU here.
ROUNDS = 60000


def measure(b):
    """The i386 kernel, when built; into b.results["hostile"]."""
    res = {"skipped": None}
    b.results[NAME] = res
    if ARCH not in b.kernels:
        res["skipped"] = "the i386 example kernel is not built"
        return
    append = f"hostile=on rounds={ROUNDS // (10 if b.a.quick else 1)} alloc_rounds=0"
    com1 = os.path.join(b.data, "hostile-com1.txt")
    raws = [None] + [os.path.join(b.data, f"hostile-{i}.raw") for i in range(1, len(CONFIGS))]
    argvs = [b.qemu_cmd(com1, "none", append, None if spec is None else
                        f"out={raws[i]},{spec}", ARCH)
             for i, (_, spec) in enumerate(CONFIGS)]
    say(f"hostile guest: bare and {len(CONFIGS) - 1} sampling settings x {b.runs} runs, "
        f"round-robin ({append})")

    def run_one(i):
        fig, err = b.run_figures(argvs[i], f"hostile-{i}")
        if CONFIGS[i][1] is not None:
            m = SAMPLES_RE.search(err)
            if not m:
                raise BenchError(f"no sample count in the plugin's exit line:\n{err[-2000:]}")
            fig["samples"] = int(m.group(1))
            t = THROTTLED_RE.search(err)
            fig["throttled"] = int(t.group(1)) if t else 0
        return fig

    per, orders = round_robin(CONFIGS, b.runs, run_one, "hostile guest")
    configs = compare(per, CONFIGS)
    for name, base in BASELINE.items():
        configs[name]["wall_ratio_to_baseline"] = spread(
            [w / p for w, p in zip(per[name]["wall_s"], per[base]["wall_s"])])
        configs[name]["baseline"] = base
    res.update({"kernel": b.sources["kernels"][ARCH], "append": append,
                "runs_per_config": b.runs, "orders": orders, "configs": configs,
                "samples": {n: sorted(per[n]["samples"])[len(per[n]["samples"]) // 2]
                            for n, s in CONFIGS if s is not None},
                "throttled": {n: sorted(per[n]["throttled"])[len(per[n]["throttled"]) // 2]
                              for n, s in CONFIGS if s is not None}})


def table(b):
    h = b.results[NAME]
    if h["skipped"]:
        return f"hostile guest: skipped ({h['skipped']})", []
    rows, checks = [], []
    for name, spec in CONFIGS:
        r = h["configs"][name]
        targets, fails = [], []
        if name in TARGET_RATIO:
            targets.append(f"≤{TARGET_RATIO[name]:.2f}x of parked")
            if r["wall_ratio_to_baseline"]["median"] > TARGET_RATIO[name]:
                fails.append("ratio")
        r["targets"], r["result"] = targets, judge(targets, fails)
        if targets:
            checks.append((f"hostile {name}", r["result"]))
        rows.append((name, fmt_s(r["wall_s"]["median"]), fmt_spread(r["wall_ratio"]),
                     fmt_spread(r.get("wall_ratio_to_baseline")),
                     fmt_s(r["cpu_s"]["median"]), fmt_spread(r["cpu_ratio"]),
                     fmt_int(h["samples"][name]) if spec else "-",
                     fmt_int(h["throttled"][name]) if spec else "-",
                     fmt_rss(r["median_rss_mb"] * 1024, rss_floor_kb()),
                     ", ".join(targets) or "-", r["result"]))
    head = ("configuration", "median wall", "wall ratio min/med/max", "wall vs parked",
            "median CPU", "CPU ratio min/med/max", "samples", "throttled ticks", "peak RSS",
            "target", "result")
    group = (f"i386: {os.path.basename(h['kernel']['path'])}, {h['append']}, "
             f"{h['runs_per_config']} run(s) of each", rows)
    return ("Hostile guest, frame chains no compiler makes (QEMU with the plugin vs "
            "without):\n" + format_table(head, [group], {1, 2, 3, 4, 5, 6, 7, 8})), checks


def notes(b):
    h = b.results[NAME]
    if h["skipped"]:
        return [f"hostile guest: skipped: {h['skipped']}"]
    return ["hostile guest: every sample walks a hostile chain (a cycle, unmapped memory, a "
            "misaligned frame pointer, one frame per page over 4096 pages) at depth=1024; "
            "each walk stops at the read budget (32 windows) or its stop reason. delay= is "
            "held to the stated bound (sampling under a tenth of each vCPU's host time, "
            "ticks skipped and counted as 'throttled'), judged against the parked run (the "
            "same settings and per-block test, the sampler parked by a window= no code "
            "enters); period= has the read budget only."]
