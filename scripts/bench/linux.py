"""Workload 2, Linux: Debian's Linux guest (scripts/guests/run-linux.sh: boot, a busybox CPU + I/O
workload on 2 vCPUs, power off) without the plugin and with each sampling configuration,
round-robin; wall and CPU ratios to bare, and whether Linux brought up all its CPUs in each
run (timing-sensitive boot code fails when the guest runs slower). bringup.py reuses it.
"""

import os
import re
import shlex
import shutil
import sys

from common import (BenchError, compare, fmt_int, fmt_rss, fmt_s, fmt_spread, format_table,
                    judge, round_robin, rss_floor_kb, run_measured, say, spread, tail)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "guests"))
from kernel_command import KernelCommandError, linux_command  # noqa: E402

NAME = "linux"
CONFIGS = [
    ("bare", None),
    ("delay=100", "delay=100"),
    ("delay=10", "delay=10"),
    ("period=100000", "period=100000"),
]
# Issue 13's targets on the median wall ratio to bare; every plugin run brings up all CPUs.
TARGET_RATIO = {"delay=100": 1.05, "delay=10": 1.15, "period=100000": 1.25}
TARGETS = {"linux_wall_ratio_max": TARGET_RATIO, "linux_all_cpus_up": "every run"}
VCPUS = 2  # run-linux.sh's default -smp
BROUGHT_UP_RE = re.compile(r"smp: Brought up (\d+) nodes?, (\d+) CPUs?")
WORKLOAD_DONE_RE = re.compile(r"^workload done at ([0-9.]+) s", re.M)
# What Linux prints when its boot timing went wrong and a CPU may not start.
BOOT_PROBLEMS = ("APIC delivery error", "failed to wakeup CPU", "Fast TSC calibration failed")
RUN_TIMEOUT_S = 900


def arches(b):
    return ["i386", "x86_64", "aarch64"] if b.a.linux_arch == "all" else [b.a.linux_arch]


def unavailable(b, arch):
    """Why the Linux guest of `arch` cannot run, or None."""
    d = os.path.join(b.root, "target/linux", arch)
    if not (os.path.isfile(os.path.join(d, "vmlinuz")) and os.path.isfile(os.path.join(d, "busybox"))):
        return f"no Linux guest in target/linux/{arch} (scripts/setup.sh --with-linux fetches it)"
    if shutil.which(f"qemu-system-{arch}") is None:
        return f"qemu-system-{arch} is not installed"
    return None


def argv_for(b, arch, outdir, pargs, vcpus=VCPUS):
    args = ["--out", outdir, "--smp", str(vcpus)]
    if pargs is not None:
        args += ["--plugin", pargs]
    try:
        argv = linux_command(arch, *args, plugin=b.plugin)
    except KernelCommandError as e:
        raise BenchError(str(e))
    if not argv or "-kernel" not in argv:
        raise BenchError(f"unexpected QEMU command line from run-linux.sh: {argv}")
    return argv


def run_once(b, argv, outdir, tag, pargs):
    """One boot: figures, CPUs brought up, what went wrong at boot; raises unless the guest
    finished its workload and powered off (as run-linux.sh checks)."""
    console = os.path.join(outdir, "console.log")
    for f in ("console.log", "kallsyms.gz", "cpu.raw"):
        if os.path.exists(os.path.join(outdir, f)):
            os.remove(os.path.join(outdir, f))
    se = os.path.join(b.data, f"{tag}.stderr")
    status, wall, user, sys_, rss = run_measured(argv, os.path.join(b.data, f"{tag}.stdout"),
                                                 se, RUN_TIMEOUT_S, cwd=b.root)
    text = open(console, errors="replace").read() if os.path.exists(console) else ""
    done = WORKLOAD_DONE_RE.search(text)
    if status != 0 or "reboot: Power down" not in text or not done:
        raise BenchError(f"Linux run '{tag}' failed (QEMU status {status}; the guest must finish "
                         f"its workload and power off)\n  command: {shlex.join(argv)}\n"
                         f"  stderr:\n{tail(se)}\n  console:\n{tail(console)}")
    up = BROUGHT_UP_RE.search(text)
    fig = {"wall_s": wall, "user_s": user, "sys_s": sys_, "rss_kb": rss,
           "cpus_up": int(up.group(2)) if up else 0,
           "brought_up_line": up.group(0) if up else None,
           "boot_problems": [p for p in BOOT_PROBLEMS if p in text],
           "guest_uptime_s": float(done.group(1))}
    if pargs is not None:
        fig["samples"], fig["dropped"] = b.parse_summary(open(se, errors="replace").read(), tag)
    return fig


def measure_configs(b, arch, configs, runs, key, vcpus=VCPUS):
    """`configs` on Linux `arch` with `vcpus` vCPUs, `runs` rounds; a result dict (as the
    overhead workload's)."""
    argvs = []
    for i, (_, pargs) in enumerate(configs):
        outdir = os.path.join(b.data, f"{key}-{arch}-{i}")
        os.makedirs(outdir, exist_ok=True)
        argvs.append((argv_for(b, arch, outdir, pargs, vcpus), outdir))
    say(f"{key}, {arch}: {len(configs)} configurations x {runs} runs, round-robin "
        f"(run-linux.sh, -smp {vcpus}; ~15-30 s a run)")

    def run_one(i):
        argv, outdir = argvs[i]
        return run_once(b, argv, outdir, f"{key}-{arch}-{i}", configs[i][1])

    per, orders = round_robin(configs, runs, run_one, f"{key} {arch}")
    rows = compare(per, configs)
    for r in rows.values():
        r["all_cpus_up_runs"] = sum(1 for n in r["runs"]["cpus_up"] if n == vcpus)
    return {"command": shlex.join(argvs[0][0]), "vcpus": vcpus, "runs_per_config": runs,
            "orders": orders, "configs": rows}


def measure(b):
    """Linux guests of --linux-arch; into b.results["linux"]."""
    res = {"order": "round-robin per architecture, start rotated each round",
           "archs": {}, "skipped": {}}
    b.results["linux"] = res
    for arch in arches(b):
        why = unavailable(b, arch)
        if why is not None:
            say(f"Linux, {arch}: skipped: {why}")
            res["skipped"][arch] = why
            continue
        res["archs"][arch] = measure_configs(b, arch, CONFIGS, b.linux_runs, "linux")


def table_of(res, configs, targets_of, title):
    """The table of a measure_configs result per arch; targets_of(name) -> (ratio target or
    None, whether every run must bring up all CPUs)."""
    groups, checks = [], []
    for arch, a in res["archs"].items():
        rows = []
        for name, _ in configs:
            r = a["configs"][name]
            ratio_max, all_up = targets_of(name)
            targets, fails = [], []
            if ratio_max is not None:
                targets.append(f"≤{ratio_max:.2f}x")
                if r["wall_ratio"]["median"] > ratio_max:
                    fails.append("ratio")
            if all_up:
                targets.append(f"{a['vcpus']} CPUs up every run")
                if r["all_cpus_up_runs"] < len(r["runs"]["cpus_up"]):
                    fails.append("CPUs")
            r["targets"], r["result"] = targets, judge(targets, fails)
            if targets:
                checks.append((f"{title} {arch} {name}", r["result"]))
            rows.append((f"Linux {arch} {name}", fmt_s(r["wall_s"]["median"]),
                         fmt_spread(r["wall_ratio"]), fmt_s(r["cpu_s"]["median"]),
                         fmt_spread(r["cpu_ratio"]),
                         fmt_int(round(r["median_samples"])) if "median_samples" in r else "-",
                         f"{r['all_cpus_up_runs']}/{len(r['runs']['cpus_up'])}",
                         fmt_rss(r["median_rss_mb"] * 1024, rss_floor_kb()),
                         ", ".join(targets) or "-", r["result"]))
        groups.append((f"{arch}: -smp {a['vcpus']}, {a['runs_per_config']} run(s) of each", rows))
    head = ("configuration", "median wall", "wall ratio min/med/max", "median CPU",
            "CPU ratio min/med/max", "samples", "all CPUs up", "peak RSS", "target", "result")
    return format_table(head, groups, {1, 2, 3, 4, 5, 6, 7}), checks


def table(b):
    res = b.results["linux"]
    if not res["archs"]:
        return "Linux: skipped (see the notes)", []
    text, checks = table_of(res, CONFIGS, lambda name: (TARGET_RATIO.get(name), name != "bare"),
                            "linux")
    return "Linux guest (QEMU with the plugin vs without):\n" + text, checks


def run_notes(res, what):
    n = []
    for arch, a in res["archs"].items():
        for name, r in a["configs"].items():
            probs = sorted({p for ps in r["runs"]["boot_problems"] for p in ps})
            if r["all_cpus_up_runs"] < len(r["runs"]["cpus_up"]) or probs:
                lines = sorted({str(x) for x in r["runs"]["brought_up_line"]})
                n.append(f"  {what} {arch} {name}: all {a['vcpus']} CPUs up in "
                         f"{r['all_cpus_up_runs']} of {len(r['runs']['cpus_up'])} runs (console: "
                         f"{'; '.join(lines)}" + (f"; {', '.join(probs)}" if probs else "") + ")")
        bare = a["configs"]["bare"]
        n.append(f"  {what} {arch}: bare wall {fmt_spread(bare['wall_s'], ' s', 2)}, CPU "
                 f"{fmt_spread(bare['cpu_s'], ' s', 2)}; guest uptime at the end "
                 f"{fmt_spread(spread(bare['runs']['guest_uptime_s']), ' s', 2)}")
    indent = "  " if res["archs"] else ""  # under the workload's note, or alone
    for arch, why in res["skipped"].items():
        n.append(f"{indent}{what} {arch} skipped: {why}")
    return n


def notes(b):
    if not b.results["linux"]["archs"]:
        return run_notes(b.results["linux"], "Linux")
    n = [f"Linux: scripts/guests/run-linux.sh's QEMU command (--print0; QEMU measured alone), -smp "
         f"{VCPUS}, {b.linux_runs} run(s) of each configuration round-robin; ratios as above; "
         f"'all CPUs up' = runs whose console says \"smp: Brought up 1 node, {VCPUS} CPUs\"."]
    return n + run_notes(b.results["linux"], "Linux")
