"""Workload 1, plugin overhead: QEMU running each example kernel's CPU-bound workload (i386,
x86_64, riscv64, aarch64: every one that is built, whose QEMU is installed and which the
plugin supports) without the plugin and with each sampling configuration, round-robin; wall
and CPU time, ratios to bare (min/median/max over the rounds), samples, cost per sample.
"""

import os
import shutil

from common import (KERNELS, BenchError, compare, fmt_int, fmt_rss, fmt_s, fmt_spread,
                    format_table, judge, marginal_cost, round_robin, rss_floor_kb,
                    run_measured, say, tail)

NAME = "overhead"
ARCHES = ["i386", "x86_64", "riscv64", "aarch64"]
X86 = ("i386", "x86_64")

# Configurations: (name, plugin arguments or None for bare QEMU); bare first.
CONFIGS = [
    ("bare", None),
    ("delay=100", "delay=100"),
    ("delay=10", "delay=10"),
    # The same per-block test, the sampler parked (a window= no code enters, so the timer
    # sleeps): what delay= costs before any tick or sample, to tell fixed cost from the rest.
    ("delay=10 parked", "delay=10,window=0x1-0x2"),
    ("period=100000", "period=100000"),
    ("period=10000", "period=10000"),
    ("period=100000,exact=on", "period=100000,exact=on"),
]
# Targets on the median wall ratio to bare, and the architectures each holds on: issue 12's
# on the x86 example kernels, issue 14's period= on riscv64 and aarch64 too.
TARGET_RATIO = {"delay=100": (1.03, X86), "delay=10": (1.10, X86),
                "period=100000": (1.15, tuple(ARCHES))}
# The cost of one sample: period=10000 against period=100000 (the same per-block counting,
# 10x the samples), paired by round; issue 12's target on the x86 kernels (depth 64).
COST_LO, COST_HI = "period=100000", "period=10000"
TARGET_US_PER_SAMPLE = (0.3, X86)
# Where (with - bare) / samples is shown too: dense sampling without per-block counting.
TOTAL_COST_ROWS = ("delay=10",)

TARGETS = {
    "overhead_wall_ratio_max": {c: {"max": t, "arches": list(a)}
                                for c, (t, a) in TARGET_RATIO.items()},
    "overhead_us_per_sample_max": {"max": TARGET_US_PER_SAMPLE[0],
                                   "arches": list(TARGET_US_PER_SAMPLE[1])},
}
CALIBRATION_ROUNDS = 5000
CALIBRATION_TARGET_S = 2.0


def unavailable(b, arch):
    """Why `arch` cannot be measured, or None."""
    if arch not in b.kernels:
        return (f"target/examples/{KERNELS[arch][0]} is not built "
                f"(scripts/guests/build-kernel.sh --arch {arch})")
    if shutil.which(f"qemu-system-{arch}") is None:
        return f"qemu-system-{arch} is not installed"
    return None


def append_for(arch, rounds):
    return f"rounds={rounds} {KERNELS[arch][2]}".strip()


def bare_cpu_s(b, arch, rounds):
    argv = b.qemu_cmd(os.path.join(b.data, f"overhead-{arch}-com1.txt"), "none",
                      append_for(arch, rounds), None, arch)
    _, user, sys_, _, _ = b.run_qemu(argv, f"calibrate-{arch}", 300, KERNELS[arch][3])
    return user + sys_


def cpu_rounds(b, arch):
    """Rounds of the CPU workload for ~2 s of bare QEMU and where the figure comes from:
    expected.toml's [timing] rounds_for_2s, else two bare runs (0 and CALIBRATION_ROUNDS
    rounds; CPU time, which a loaded machine inflates less than wall time). --quick: 1/8."""
    rounds, how = b.rounds_for_2s(arch), f"{KERNELS[arch][1]} [timing] rounds_for_2s"
    if rounds is None:
        t0, t1 = bare_cpu_s(b, arch, 0), bare_cpu_s(b, arch, CALIBRATION_ROUNDS)
        per_round = max((t1 - t0) / CALIBRATION_ROUNDS, 1e-7)
        rounds = int(max(1000, round((CALIBRATION_TARGET_S - t0) / per_round, -3)))
        how = (f"calibrated: {CALIBRATION_ROUNDS} rounds took {t1 - t0:.2f} s of CPU more "
               f"than 0 rounds ({t0:.2f} s)")
    return (max(1, rounds // 8) if b.a.quick else rounds), how


def probe(b, arch):
    """One short unmeasured run with the plugin (QEMU, firmware and plugin come into the page
    cache before the first measured run); None, or why the plugin cannot run on `arch`."""
    argv = b.qemu_cmd(os.path.join(b.data, f"overhead-{arch}-com1.txt"), "none",
                      append_for(arch, 0),
                      f"out={os.path.join(b.data, f'warmup-{arch}.raw')},period=100000", arch)
    se = os.path.join(b.data, f"warmup-{arch}.stderr")
    status = run_measured(argv, os.path.join(b.data, f"warmup-{arch}.stdout"), se, 120,
                          cwd=b.root)[0]
    if status == KERNELS[arch][3]:
        return None
    err = open(se, errors="replace").read()
    unsupported = [line for line in err.splitlines() if "not supported" in line]
    if unsupported:
        return f"the plugin does not run there ({unsupported[0].strip()})"
    raise BenchError(f"QEMU ({arch}) with the plugin exited with status {status}:\n{tail(se)}")


def measure_arch(b, arch, rounds, how):
    append = append_for(arch, rounds)
    com1 = os.path.join(b.data, f"overhead-{arch}-com1.txt")
    argvs = []
    for i, (_, pargs) in enumerate(CONFIGS):
        if pargs is not None:
            pargs = f"out={os.path.join(b.data, f'overhead-{arch}-{i}.raw')},{pargs}"
        argvs.append(b.qemu_cmd(com1, "none", append, pargs, arch))
    say(f"plugin overhead, {arch}: {len(CONFIGS)} configurations x {b.runs} runs, round-robin "
        f"({append}, no memtrace)")

    def run_one(i):
        name, pargs = CONFIGS[i]
        fig, _ = b.run_figures(argvs[i], f"overhead-{arch}-{i}", KERNELS[arch][3],
                               None if pargs is None else f"{arch} {name}")
        return fig

    per, orders = round_robin(CONFIGS, b.runs, run_one, arch)
    return {"kernel": b.sources["kernels"][arch], "append": append, "rounds": rounds,
            "rounds_from": how, "runs_per_config": b.runs, "orders": orders,
            "configs": compare(per, CONFIGS),
            "us_per_sample": marginal_cost(per, COST_LO, COST_HI)}


def measure(b):
    """Every available architecture, one after the other; into b.results["plugin_overhead"]."""
    res = {"order": "round-robin per architecture, start rotated each round",
           "cpu_s": "user + sys of the QEMU process (all threads), from wait4",
           "ratios": "each round's run / that round's bare run: min, median, max",
           "us_per_sample": f"({COST_HI} - {COST_LO}) / (their samples' difference), by round",
           "archs": {}, "skipped": {}}
    b.results["plugin_overhead"] = res
    for arch in ARCHES:
        why = unavailable(b, arch) or probe(b, arch)
        if why is not None:
            say(f"plugin overhead, {arch}: skipped: {why}")
            res["skipped"][arch] = why
            continue
        res["archs"][arch] = measure_arch(b, arch, *cpu_rounds(b, arch))


def row(arch, name, r, targets, result, cost):
    return (f"{arch} {name}", fmt_s(r["wall_s"]["median"]), fmt_spread(r["wall_ratio"]),
            fmt_s(r["cpu_s"]["median"]), fmt_spread(r["cpu_ratio"]),
            fmt_int(round(r["median_samples"])) if "median_samples" in r else "-", cost,
            fmt_rss(r["median_rss_mb"] * 1024, rss_floor_kb()), ", ".join(targets) or "-", result)


def table(b):
    """This workload's table and its (check, result) pairs."""
    po = b.results["plugin_overhead"]
    groups, checks = [], []
    for arch, a in po["archs"].items():
        rows = []
        for name, pargs in CONFIGS:
            r = a["configs"][name]
            targets, fails, cost = [], [], "-"
            if name in TARGET_RATIO and arch in TARGET_RATIO[name][1]:
                targets.append(f"≤{TARGET_RATIO[name][0]:.2f}x")
                if r["wall_ratio"]["median"] > TARGET_RATIO[name][0]:
                    fails.append("ratio")
            if name in TOTAL_COST_ROWS and r.get("us_per_sample_incl_fixed"):
                c = r["us_per_sample_incl_fixed"]
                cost = f"{c['wall']:.3f}/{c['cpu']:.3f} µs*"
            if name == COST_HI and a["us_per_sample"]["wall"]:
                c = a["us_per_sample"]
                cost = f"{c['wall']['median']:.3f}/{c['cpu']['median']:.3f} µs"
                if arch in TARGET_US_PER_SAMPLE[1]:
                    targets.append(f"≤{TARGET_US_PER_SAMPLE[0]:g} µs/sample")
                    if c["wall"]["median"] > TARGET_US_PER_SAMPLE[0]:
                        fails.append("cost")
            elif name == COST_HI and arch in TARGET_US_PER_SAMPLE[1]:
                targets.append(f"≤{TARGET_US_PER_SAMPLE[0]:g} µs/sample")
                fails.append("cost: no sample difference")
            r["targets"], r["result"] = targets, judge(targets, fails)
            if targets:
                checks.append((f"overhead {arch} {name}", r["result"]))
            rows.append(row(arch, name, r, targets, r["result"], cost))
        title = (f"{arch}: {os.path.basename(a['kernel']['path'])}, {a['append']}, "
                 f"{a['runs_per_config']} run(s) of each")
        groups.append((title, rows))
    if not groups:
        return "plugin overhead: no architecture could be measured (see the notes)", checks
    head = ("configuration", "median wall", "wall ratio min/med/max", "median CPU",
            "CPU ratio min/med/max", "samples", "µs/sample wall/CPU", "peak RSS", "target",
            "result")
    text = format_table(head, groups, {1, 2, 3, 4, 5, 6, 7})
    return "Plugin overhead, example kernels (QEMU with the plugin vs without):\n" + text, checks


def notes(b):
    po = b.results["plugin_overhead"]
    n = [f"plugin overhead: per architecture, bare QEMU and each configuration round-robin "
         f"(start rotated each round), no memtrace, the plugin's other options at their defaults "
         f"(depth=64); wall = QEMU start to exit, CPU = user+sys "
         f"of QEMU (all threads: the plugin's writer and timer too); ratios = each round's run "
         f"/ that round's bare run, min/median/max; targets judge the median wall ratio. "
         f"µs/sample on the {COST_HI} row: ({COST_HI} - {COST_LO}) / their samples' "
         f"difference (the cost of one more sample, the same per-block counting), median of "
         f"the rounds; * on {', '.join(TOTAL_COST_ROWS)}: (median - bare median) / samples "
         f"(everything the plugin adds, per sample). 'delay=10 parked': each block's arm-slot "
         f"test with the sampler parked by a window= that no code enters (the timer sleeps, "
         f"0 samples): delay='s fixed cost."]
    for arch, a in po["archs"].items():
        bare = a["configs"]["bare"]
        c = a["us_per_sample"]
        cost = (f"; µs/sample min/med/max wall {fmt_spread(c['wall'], ' µs')}, CPU "
                f"{fmt_spread(c['cpu'], ' µs')}" if c["wall"] else "")
        n.append(f"  {arch}: rounds={a['rounds']} ({a['rounds_from']}); bare wall "
                 f"{fmt_spread(bare['wall_s'], ' s', 2)}, CPU {fmt_spread(bare['cpu_s'], ' s', 2)}"
                 f"{cost}")
        if bare["wall_s"]["median"] < 1.5 and not b.a.quick:
            n.append(f"  {arch}: bare median {bare['wall_s']['median']:.2f} s is well under "
                     f"2 s: the machine is faster than {a['rounds_from']} assumes")
        dropped = sum(sum(a["configs"][c]["runs"].get("dropped", [])) for c, _ in CONFIGS)
        if dropped:
            n.append(f"  {arch}: the plugin dropped {dropped} samples (writer behind)")
    for arch, why in po["skipped"].items():
        n.append(f"  {arch} skipped: {why}")
    return n
