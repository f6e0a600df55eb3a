"""Workload 3 (only with --linux-bringup N), Linux CPU bring-up: Linux i386 booted N times at
delay=10 and N times bare, alternated; in how many runs the console says all CPUs came up
(issue 13: 20 of 20 at delay=10). The runs are linux.py's, so their ratios are shown too.
"""

import linux
from common import say

NAME = "bringup"
ARCH = "i386"
CONFIGS = [("bare", None), ("delay=10", "delay=10")]
TARGETS = {"linux_bringup_delay10": "all CPUs up in every run"}


def measure(b):
    """--linux-bringup runs of each of CONFIGS on Linux i386; into b.results["linux_bringup"]."""
    res = {"archs": {}, "skipped": {}}
    b.results["linux_bringup"] = res
    why = linux.unavailable(b, ARCH)
    if why is not None:
        say(f"Linux bring-up: skipped: {why}")
        res["skipped"][ARCH] = why
        return
    res["archs"][ARCH] = linux.measure_configs(b, ARCH, CONFIGS, b.a.linux_bringup, "bringup")


def table(b):
    res = b.results["linux_bringup"]
    if not res["archs"]:
        return "Linux bring-up: skipped (see the notes)", []
    text, checks = linux.table_of(res, CONFIGS, lambda name: (None, name != "bare"), "bring-up")
    return (f"Linux CPU bring-up, {b.a.linux_bringup} boots of each, alternated:\n" + text,
            checks)


def notes(b):
    if not b.results["linux_bringup"]["archs"]:
        return linux.run_notes(b.results["linux_bringup"], "bring-up")
    n = ["Linux bring-up: 'all CPUs up' counts the boots whose console says \"smp: Brought up "
         "1 node, 2 CPUs\"; the target is every boot at delay=10 (bare shows the guest's own "
         "rate)."]
    return n + linux.run_notes(b.results["linux_bringup"], "bring-up")
