"""Workload 6, allocation hooks: QEMU running the x86 example kernels' allocation-heavy phase
(`rounds=0 alloc_rounds=N`, no COM2 device) without the plugin and with the plugin hooking its
six allocator functions (`alloc=examples/kernel-common/alloc.spec`, nothing sampled),
round-robin; wall and CPU time, ratios to bare (min/median/max over the rounds), events, cost
per hooked call.
"""

import os
import re

from common import (BenchError, compare, fmt_int, fmt_rss, fmt_s, fmt_spread, format_table,
                    judge, round_robin, rss_floor_kb, say)

NAME = "alloc_hooks"
ARCHES = ["i386", "x86_64"]
TARGET_RATIO = 1.30
TARGETS = {"alloc_hooks_wall_ratio_max": TARGET_RATIO}

# examples/kernel/README.md: one allocator call per memtrace record, 23 + 8 * alloc_rounds.
FIXED_CALLS = 23
CALLS_PER_ROUND = 8
ALLOC_LINE_RE = re.compile(r"alloc hooks on (\d+) functions: (\d+) events written, (\d+) dropped")

SPEC = "examples/kernel-common/alloc.spec"
CONFIGS = [("bare", None), ("alloc=alloc.spec", SPEC)]


def measure_arch(b, arch):
    append = f"rounds=0 alloc_rounds={b.alloc_rounds}"
    com1 = os.path.join(b.data, f"alloc-hooks-{arch}-com1.txt")
    raw = os.path.join(b.data, f"alloc-hooks-{arch}.raw")
    spec = os.path.join(b.root, SPEC)
    argvs = [b.qemu_cmd(com1, "none", append, None, arch),
             b.qemu_cmd(com1, "none", append, f"out={raw},alloc={spec},elf={b.kernels[arch]}",
                        arch)]
    calls = FIXED_CALLS + CALLS_PER_ROUND * b.alloc_rounds
    say(f"allocation hooks, {arch}: bare and hooked x {b.runs} runs, round-robin ({append}, "
        f"{fmt_int(calls)} allocator calls, no COM2)")

    def run_one(i):
        fig, err = b.run_figures(argvs[i], f"alloc-hooks-{arch}-{i}")
        if i == 1:
            m = ALLOC_LINE_RE.search(err)
            if not m:
                raise BenchError(f"no 'alloc hooks on ...' line from the plugin ({arch}):\n"
                                 f"{err[-2000:]}")
            events, dropped = int(m.group(2)), int(m.group(3))
            if events + dropped != calls:
                raise BenchError(f"{arch}: the hooks saw {events + dropped} calls, "
                                 f"{calls} were made")
            fig["events"], fig["dropped"] = events, dropped
        return fig

    per, orders = round_robin(CONFIGS, b.runs, run_one, f"alloc hooks {arch}")
    rows = compare(per, CONFIGS)
    hooked, bare = per[CONFIGS[1][0]], per[CONFIGS[0][0]]
    ev = sorted(hooked["events"])[len(hooked["events"]) // 2]
    cost = {k: (sorted(hooked[f"{k}_s"])[len(hooked[f"{k}_s"]) // 2]
                - sorted(bare[f"{k}_s"])[len(bare[f"{k}_s"]) // 2]) / ev * 1e6 if ev else None
            for k in ("wall", "cpu")}
    return {"kernel": b.sources["kernels"][arch], "append": append, "calls": calls,
            "runs_per_config": b.runs, "orders": orders, "configs": rows,
            "median_events": ev, "dropped": sum(hooked["dropped"]), "us_per_call": cost}


def measure(b):
    """Each x86 kernel that is built; into b.results["alloc_hooks"]."""
    res = {"archs": {}, "skipped": {}}
    b.results["alloc_hooks"] = res
    for arch in ARCHES:
        if arch not in b.kernels:
            res["skipped"][arch] = "kernel not built"
            continue
        res["archs"][arch] = measure_arch(b, arch)


def table(b):
    ah = b.results["alloc_hooks"]
    groups, checks = [], []
    for arch, a in ah["archs"].items():
        rows = []
        for name, spec in CONFIGS:
            r = a["configs"][name]
            targets, fails = [], []
            if spec is not None:
                targets.append(f"≤{TARGET_RATIO:.2f}x")
                if r["wall_ratio"]["median"] > TARGET_RATIO:
                    fails.append("ratio")
            r["targets"], r["result"] = targets, judge(targets, fails)
            if targets:
                checks.append((f"alloc hooks {arch}", r["result"]))
            c = a["us_per_call"]
            cost = f"{c['wall']:.3f}/{c['cpu']:.3f} µs" if spec is not None and c["wall"] is not None else "-"
            rows.append((f"{arch} {name}", fmt_s(r["wall_s"]["median"]), fmt_spread(r["wall_ratio"]),
                         fmt_s(r["cpu_s"]["median"]), fmt_spread(r["cpu_ratio"]),
                         fmt_int(a["median_events"]) if spec is not None else "-", cost,
                         fmt_rss(r["median_rss_mb"] * 1024, rss_floor_kb()),
                         ", ".join(targets) or "-", r["result"]))
        groups.append((f"{arch}: {os.path.basename(a['kernel']['path'])}, {a['append']}, "
                       f"{a['runs_per_config']} run(s) of each", rows))
    if not groups:
        return "allocation hooks: no kernel could be measured (see the notes)", checks
    head = ("configuration", "median wall", "wall ratio min/med/max", "median CPU",
            "CPU ratio min/med/max", "events", "µs/call wall/CPU", "peak RSS", "target",
            "result")
    text = format_table(head, groups, {1, 2, 3, 4, 5, 6, 7})
    return ("Allocation hooks, the example kernels' allocation phase (QEMU with alloc= vs "
            "without):\n" + text), checks


def notes(b):
    ah = b.results["alloc_hooks"]
    n = ["allocation hooks: per x86 kernel, the allocation phase alone (rounds=0, each "
         "allocator call also building its memtrace record, which goes nowhere without COM2), "
         "bare and alloc= round-robin; alloc= alone samples nothing; µs/call = (median with - "
         "median bare) / events; the target judges the median wall ratio."]
    for arch, a in ah["archs"].items():
        if a["dropped"]:
            n.append(f"  {arch}: the plugin dropped {a['dropped']} events (writer behind)")
    for arch, why in ah["skipped"].items():
        n.append(f"  {arch}: skipped: {why}")
    return n
