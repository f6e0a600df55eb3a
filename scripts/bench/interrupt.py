"""Workload 8, trigger=interrupt: sampling at the guest's own interrupts (QEMU's discontinuity
callback, QEMU 10.2 and later), on Debian sid's QEMU 11.1 (scripts/setup/qemu-sid.sh's
wrappers first on PATH, the API-7 plugin build), against bare sid QEMU, round-robin: the
example kernels of every architecture with their 1 kHz timer on (`irq=on`) and the Linux
guest; wall and CPU ratios, the samples and the rate they came at, and, on the example
kernels, the documented functions' self shares against their exact instruction shares
(expected.toml, `self_share_inline`). The example kernels also run under QEMU's -icount
(against bare QEMU under the same -icount), where the samples fall by instructions.
"""

import os
import subprocess

import linux
import overhead
from common import (KERNELS, BenchError, compare, fmt_int, fmt_s, fmt_spread, format_table,
                    judge, leaf_counts, read_toml, round_robin, say)

NAME = "interrupt"
CONFIGS = [
    ("bare", None),
    # Its default delay=1000: ticks no faster than the guest's timer.
    ("trigger=interrupt", "trigger=interrupt"),
    # The block-entry trigger on the same QEMU and guest, for comparison.
    ("delay=10", "delay=10"),
]
# Under QEMU's -icount the guest's timer follows instructions and each sample is the
# interrupted instruction: shares by instructions. QEMU is then several times slower itself,
# so the ratio is against bare QEMU under the same -icount.
ICOUNT = ["-icount", "shift=0"]
ICOUNT_CONFIGS = [
    ("bare -icount", None),
    ("trigger=interrupt -icount", "trigger=interrupt"),
]
LINUX_CONFIGS = [("bare", None), ("trigger=interrupt", "trigger=interrupt")]
TARGET_RATIO = 1.02
TARGET_LINUX_RATIO = 1.03
TARGET_SHARE_POINTS = 3.0
TARGETS = {"interrupt_wall_ratio_max": {"example kernels": TARGET_RATIO,
                                        "Linux": TARGET_LINUX_RATIO},
           "interrupt_share_points_max": TARGET_SHARE_POINTS}


def sid_bin(b):
    return subprocess.run(["bash", "-c", '. "$1/scripts/lib.sh"; qemu_sid_bin_dir', "-", b.root],
                          capture_output=True, text=True).stdout.strip()


class OnSid:
    """Within it, QEMU is sid's (its wrappers first on PATH) and the plugin the API-7 build."""

    def __init__(self, b, api7):
        self.b, self.api7 = b, api7

    def __enter__(self):
        self.path, self.plugin = os.environ["PATH"], self.b.plugin
        os.environ["PATH"] = sid_bin(self.b) + ":" + self.path
        self.b.plugin = self.api7
        return self

    def __exit__(self, *_):
        os.environ["PATH"], self.b.plugin = self.path, self.plugin


def documented(b, arch):
    """(symbol, exact self share) of `arch`'s documented workload functions over 1%."""
    e = read_toml(os.path.join(b.root, KERNELS[arch][1]))
    return [(f["symbol"], f["self_share_inline"]) for f in e["cpu"]["function"]
            if f["self_share_inline"] > 0.01]


def kernel_leaf_counts(b, raw, elf):
    """Self samples per leaf function (inline marker removed), kernel functions only."""
    return {f: n for f, n in leaf_counts(b, raw, elf).items() if not f.startswith("[")}


def measure_arch(b, arch):
    rounds, how = overhead.cpu_rounds(b, arch)
    append = f"rounds={rounds} irq=on alloc_rounds=0"
    com1 = os.path.join(b.data, f"interrupt-{arch}-com1.txt")
    every = CONFIGS + ICOUNT_CONFIGS
    raws = [os.path.join(b.data, f"interrupt-{arch}-{i}.raw") for i in range(len(every))]
    argvs = [b.qemu_cmd(com1, "none", append, p and f"out={raws[i]},{p}", arch)
             + (ICOUNT if (name, p) in ICOUNT_CONFIGS else [])
             for i, (name, p) in enumerate(every)]
    say(f"trigger=interrupt, {arch}: {len(every)} configurations x {b.runs} runs on sid's "
        f"QEMU, round-robin ({append})")
    summed = [{} for _ in every]

    def run_one(i):
        name, pargs = every[i]
        fig, _ = b.run_figures(argvs[i], f"interrupt-{arch}-{i}", KERNELS[arch][3],
                               None if pargs is None else f"{arch} {name}")
        if pargs is not None:
            for f, n in kernel_leaf_counts(b, raws[i], b.kernels[arch]).items():
                summed[i][f] = summed[i].get(f, 0) + n
        return fig

    per, orders = round_robin(every, b.runs, run_one, f"interrupt {arch}")
    # Each group against its own bare QEMU.
    rows = {**compare(per, CONFIGS), **compare(per, ICOUNT_CONFIGS)}
    doc = documented(b, arch)
    for i, (name, pargs) in enumerate(every):
        if pargs is None:
            continue
        total = sum(summed[i].values()) or 1
        rows[name]["shares"] = {s: {"sampled": summed[i].get(s, 0) / total, "exact": x}
                                for s, x in doc}
        rows[name]["kernel_samples"] = total
    return {"append": append, "rounds": rounds, "rounds_from": how,
            "runs_per_config": b.runs, "orders": orders, "configs": rows}


def measure(b):
    res = {"archs": {}, "skipped": {}, "linux": None}
    b.results["interrupt"] = res
    sid = sid_bin(b)
    api7 = os.path.join(b.root, "target/release/kern-profile-api7.so")
    if not os.path.isfile(os.path.join(sid, "qemu-system-i386")):
        res["skipped"]["all"] = f"no sid QEMU in {sid} (scripts/setup/qemu-sid.sh makes it)"
        say(f"trigger=interrupt: skipped: {res['skipped']['all']}")
        return
    res["plugin"], api7 = b.snapshot(api7, os.path.join(b.data, "bin"))
    with OnSid(b, api7):
        res["qemu"] = subprocess.run(["qemu-system-i386", "--version"], capture_output=True,
                                     text=True).stdout.splitlines()[0]
        for arch in overhead.ARCHES:
            why = overhead.unavailable(b, arch) or overhead.probe(b, arch)
            if why is not None:
                res["skipped"][arch] = why
                say(f"trigger=interrupt, {arch}: skipped: {why}")
                continue
            res["archs"][arch] = measure_arch(b, arch)
        why = linux.unavailable(b, "i386")
        if why is None:
            res["linux"] = linux.measure_configs(b, "i386", LINUX_CONFIGS, b.linux_runs,
                                                 "interrupt-linux")
        else:
            res["skipped"]["linux"] = why


def share_points(r):
    """The largest |sampled - exact| self share of the documented functions, in points."""
    return max((abs(v["sampled"] - v["exact"]) * 100 for v in r["shares"].values()), default=0)


def judged_rows(label, configs, a, ratio_max, checks):
    """The rows of one kernel's configurations; every sampling one is judged against
    `ratio_max` and, where shares were measured, TARGET_SHARE_POINTS."""
    rows = []
    for name, pargs in configs:
        r = a["configs"][name]
        targets, fails, points, rate = [], [], "-", "-"
        if pargs is not None:
            rate = f"{r['median_samples'] / r['wall_s']['median']:.0f}/s"
        if "shares" in r:
            points = f"{share_points(r):.1f}"
        if name.startswith("trigger=interrupt"):
            targets = [f"≤{ratio_max:.2f}x"]
            if r["wall_ratio"]["median"] > ratio_max:
                fails.append("ratio")
            if "shares" in r:
                targets.append(f"≤{TARGET_SHARE_POINTS:g} points")
                if share_points(r) > TARGET_SHARE_POINTS:
                    fails.append("shares")
            r["result"] = judge(targets, fails)
            checks.append((f"interrupt {label} {name}", r["result"]))
        rows.append((f"{label} {name}", fmt_s(r["wall_s"]["median"]),
                     fmt_spread(r["wall_ratio"]), fmt_s(r["cpu_s"]["median"]),
                     fmt_spread(r["cpu_ratio"]),
                     fmt_int(round(r["median_samples"])) if "median_samples" in r else "-",
                     rate, points, ", ".join(targets) or "-", r.get("result", "-")))
    return rows


def table(b):
    res = b.results["interrupt"]
    if not res["archs"] and not res["linux"]:
        return "trigger=interrupt: skipped (see the notes)", []
    groups, checks = [], []
    for arch, a in res["archs"].items():
        groups.append((f"{arch}: {a['append']}, {a['runs_per_config']} run(s) of each",
                       judged_rows(arch, CONFIGS + ICOUNT_CONFIGS, a, TARGET_RATIO, checks)))
    l = res["linux"]
    if l:
        groups.append((f"Linux i386: -smp {l['vcpus']}, {l['runs_per_config']} run(s) of each",
                       judged_rows("Linux i386", LINUX_CONFIGS, l, TARGET_LINUX_RATIO, checks)))
    head = ("configuration", "median wall", "wall ratio min/med/max", "median CPU",
            "CPU ratio min/med/max", "samples", "rate", "max share error (points)", "target",
            "result")
    return (f"trigger=interrupt on {res['qemu']} (QEMU with the plugin vs without):\n"
            + format_table(head, groups, {1, 2, 3, 4, 5, 6, 7}), checks)


def notes(b):
    res = b.results["interrupt"]
    n = []
    if res["archs"] or res["linux"]:
        n.append("trigger=interrupt: sid's QEMU (scripts/setup/qemu-sid.sh's wrappers first on "
                 "PATH) with the API-7 plugin build, the example kernels with irq=on (a 1 kHz "
                 "timer; alloc_rounds=0), bare and each configuration round-robin; rate = "
                 "median samples / median wall; share error = the largest |sampled - exact| "
                 "self share of the documented functions over 1% (expected.toml's "
                 "self_share_inline), over kernel samples of all runs of the configuration. "
                 "The -icount rows run QEMU with -icount shift=0, against bare QEMU under the "
                 "same -icount.")
    for arch, a in res["archs"].items():
        for name, r in a["configs"].items():
            if "shares" in r:
                parts = ", ".join(f"{s.rsplit('::', 1)[-1]} {v['sampled'] * 100:.1f}/"
                                  f"{v['exact'] * 100:.1f}" for s, v in r["shares"].items())
                n.append(f"  {arch} {name}: sampled/exact % {parts} "
                         f"({r['kernel_samples']} kernel samples)")
    for what, why in res["skipped"].items():
        n.append(f"  trigger=interrupt {what} skipped: {why}")
    return n
