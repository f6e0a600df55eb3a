"""Many vCPUs (issue 42, point 3): whether the plugin's cost per vCPU stays flat as the vCPUs
grow. The i386 example kernel's SMP workload (`smp=on`: every CPU runs its own; period=100000,
so that the samples follow the instructions whatever the host's timer) and Debian's amd64 guest
(delay=100, record's way), each at -smp 1, 2, 4 and 8, with the plugin against its own bare run
at the same -smp, round-robin. These machines have 2 cores: the rows beyond 2 vCPUs are
oversubscribed, and are read as ratios to their own bare runs, with the host CPU time each
sample costs ((with - bare) / samples) and the samples the writer dropped.

The example kernel's rows are judged on the cost of one more sample (period=10000 against
period=100000, paired by round): the per-block instruction count both pay is QEMU's inline
code, whose speed on this loop depends on where the heap puts the vCPU's CPU state (16 bytes
past a cache line: 1.06x; elsewhere: about 1.3x; measured with gdb on the running QEMU), and
the heap's layout moves with the length of every path on the command line. Each round pads
the paths by a different length, so that the rounds sample several layouts, and the two
plugin configurations of a round share one.
"""

import os

import linux
from common import (BenchError, compare, fmt_int, fmt_spread, format_table, judge, marginal_cost,
                    round_robin, say)

from kernel_command import KernelCommandError, qemu_command  # noqa: E402  (linux.py's path)

NAME = "scaling"
SMPS = (1, 2, 4, 8)
PLUGIN_ARGS = "delay=100"
EXAMPLE_ARGS = "period=100000"
# As long as EXAMPLE_ARGS, so that both leave the heap the same (see above); 10x the samples.
EXAMPLE_MORE = "period=010000"
# Characters added to the paths each round (a different heap layout a round).
LAYOUT_STEP = 16
# Both kinds of rows under one name, the plugin's.
CONFIGS = [("bare", None), ("plugin", PLUGIN_ARGS)]
# Flat: the host CPU time a sample costs at N vCPUs, at most this many times -smp 1's; and
# no sample dropped.
FLAT_RATIO = 1.5
TARGETS = {"scaling_cpu_per_sample_vs_smp1_max": FLAT_RATIO, "scaling_dropped": 0}
EXAMPLE_ROUNDS = 400000  # about 3 s at -smp 2 (20000 took 0.3 s: start-up swamped the cost)


def example_argv(b, outdir, vcpus, pargs):
    args = ["--kernel", b.kernels["i386"], "--com1", os.path.join(outdir, "com1.txt"),
            "--memtrace", "none", "--smp", str(vcpus), "--rounds", str(EXAMPLE_ROUNDS)]
    if pargs is not None:
        args += ["--plugin", f"{b.plugin},out={os.path.join(outdir, 'cpu.raw')},{pargs}"]
    try:
        return qemu_command("i386", *args)
    except KernelCommandError as e:
        raise BenchError(str(e))


def measure_example(b, vcpus):
    configs = [("bare", None), ("plugin", EXAMPLE_ARGS), ("more", EXAMPLE_MORE)]
    done = [0] * len(configs)

    def run_one(i):
        # Round r's paths are r * LAYOUT_STEP characters longer, for every configuration.
        pad = "l" * (LAYOUT_STEP * done[i])
        done[i] += 1
        tag = f"scaling-example-{vcpus}-{i}"
        outdir = os.path.join(b.data, tag, pad or ".")
        os.makedirs(outdir, exist_ok=True)
        argv = example_argv(b, os.path.normpath(outdir), vcpus, configs[i][1])
        fig, _ = b.run_figures(argv, tag, summary=tag if configs[i][1] else None)
        fig["layout_pad"] = len(pad)
        return fig

    per, orders = round_robin(configs, b.runs, run_one, f"scaling i386 example -smp {vcpus}")
    return {"vcpus": vcpus, "orders": orders, "configs": compare(per, configs),
            "us_per_more_sample": marginal_cost(per, "plugin", "more")}


def measure(b):
    res = {"example": {}, "linux": {}, "skipped": {}}
    b.results[NAME] = res
    if "i386" in b.kernels:
        for n in SMPS:
            res["example"][n] = measure_example(b, n)
    else:
        res["skipped"]["example"] = "target/examples/kernel.elf is not built"
    why = linux.unavailable(b, "x86_64")
    if why is not None:
        say(f"scaling, Linux: skipped: {why}")
        res["skipped"]["linux"] = why
        return
    for n in SMPS:
        vmlinuz = os.path.join(b.root, "target/linux/x86_64/vmlinuz")
        configs = [("bare", None), (PLUGIN_ARGS, f"{PLUGIN_ARGS},elf={vmlinuz}")]
        r = linux.measure_configs(b, "x86_64", configs, b.linux_runs, f"scaling-{n}", n)
        # The same names as the example kernel's rows.
        r["configs"] = {name: r["configs"][c] for (name, _), (c, _) in zip(CONFIGS, configs)}
        res["linux"][n] = r


def judged_cost(r):
    """The cost a row is judged on, µs of CPU: one more sample where the row has it (the
    example kernel), else the whole cost a sample."""
    more = r.get("us_per_more_sample")
    if more is not None:
        return more["cpu"]["median"] if more["cpu"] else None
    return r["configs"]["plugin"].get("us_per_sample_incl_fixed", {}).get("cpu")


def rows_of(runs):
    """The table rows of {vcpus: result}, and the checks against -smp 1's cost a sample."""
    rows, fails = [], {}
    base = None
    for n, r in sorted(runs.items()):
        p = r["configs"]["plugin"]
        total = p.get("us_per_sample_incl_fixed", {}).get("cpu")
        cost = judged_cost(r)
        dropped = sum(sum(c["runs"].get("dropped", [])) for c in r["configs"].values())
        if base is None:
            base = cost
        flat = cost / base if cost is not None and base else None
        f = []
        if flat is None or flat > FLAT_RATIO:
            f.append("cost")
        if dropped:
            f.append("drops")
        fails[n] = f
        more = r.get("us_per_more_sample")
        rows.append((f"-smp {n}", fmt_spread(p["wall_ratio"], "x"), fmt_spread(p["cpu_ratio"], "x"),
                     fmt_int(round(p.get("median_samples", 0))),
                     f"{total:.2f} µs" if total is not None else "-",
                     fmt_spread(more["cpu"], " µs", 2) if more else "-",
                     f"{flat:.2f}x" if flat is not None else "-", fmt_int(dropped),
                     judge([f"≤{FLAT_RATIO:g}x", "0 dropped"], f)))
    return rows, fails


def table(b):
    res = b.results[NAME]
    groups, checks = [], []
    for key, title, pargs, runs in (
            ("example", "i386 example kernel, smp=on", f"{EXAMPLE_ARGS} (and {EXAMPLE_MORE})",
             b.runs),
            ("linux", "Debian's amd64 guest", PLUGIN_ARGS, b.linux_runs)):
        if not res[key]:
            continue
        rows, fails = rows_of(res[key])
        for n, f in fails.items():
            checks.append((f"scaling {key} -smp {n}", judge(["flat"], f)))
        groups.append((f"{title}: {pargs} against bare at the same -smp, {runs} run(s) "
                       f"of each", rows))
    if not groups:
        return "Scaling: skipped (see the notes)", checks
    head = ("vCPUs", "wall ratio min/med/max", "CPU ratio min/med/max", "samples",
            "CPU a sample", "one more sample (CPU) min/med/max", "vs -smp 1", "dropped",
            "result")
    return ("Many vCPUs: the plugin's cost as the vCPUs grow (2 host cores: beyond -smp 2 the "
            "guest is oversubscribed; read each row against its own bare run):\n"
            + format_table(head, groups, {1, 2, 3, 4, 5, 6, 7}), checks)


def notes(b):
    res = b.results[NAME]
    n = [f"scaling: {EXAMPLE_ARGS} (example kernel, {EXAMPLE_ROUNDS} rounds a CPU) and "
         f"{PLUGIN_ARGS} (Linux) at -smp {', '.join(map(str, SMPS))}; 'CPU a sample' is "
         f"(median CPU with - median CPU bare) / median samples; 'one more sample' is "
         f"({EXAMPLE_MORE} - {EXAMPLE_ARGS}) / their difference in samples, paired by round "
         f"(the per-block count both pay left out: its speed follows the heap's layout, and "
         f"each round's paths are {LAYOUT_STEP} characters longer than the last's). The "
         f"target: the example kernel's one more sample, and Linux's whole cost a sample, at "
         f"most {FLAT_RATIO:g}x -smp 1's, and no sample dropped."]
    for key, why in res["skipped"].items():
        n.append(f"  scaling {key} skipped: {why}")
    return n
