#!/usr/bin/env python3
"""kern-profile's benchmark (run through scripts/bench.sh, which sets up and builds first).

Python 3 standard library only. Every measured command runs under measure.py (next to this
file): it forks the command, times it with time.perf_counter() and reaps it with os.wait4(),
whose rusage is that command's own (CPU times; peak RSS in ru_maxrss, KiB).
One module per workload (overhead.py: plugin overhead on the example kernels of every
architecture; linux.py: the same on the Linux guest; bringup.py: Linux's CPU bring-up, only
with --linux-bringup; aggregator.py: raw -> folded/svg; memtrace.py: --alloc; alloc_hooks.py:
the plugin's allocator hooks on the allocation phase; hostile.py: a guest with hostile frame
chains; interrupt.py: trigger=interrupt on sid's QEMU 11.1; sample_cost.py: a whole sample walked by
CFI against one walked by frame pointers, in QEMU; gdbstub.py: sampling through QEMU's gdbstub;
unwind.py: a walk by the kernel's unwind
tables against a frame-pointer walk, without QEMU), each with its
measurement, its table and its notes; common.py is the runner they share (measuring, QEMU
runs, with/without comparisons, recorded inputs, formatting, the machine's load).
Only the components' command-line interfaces are used: scripts/guests/run-kernel.sh --print0 and
scripts/guests/run-linux.sh --print0 for the QEMU command lines, the plugin's arguments and its exit
summary line on stderr, and `kern-profile RAW ELF -f FORMAT -o OUT` /
`kern-profile --alloc TRACE ELF -f folded -o DIR`.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import aggregator  # noqa: E402
import alloc_hooks  # noqa: E402
import bringup  # noqa: E402
import gdbstub  # noqa: E402
import hostile  # noqa: E402
import interrupt  # noqa: E402
import linux  # noqa: E402
import memtrace  # noqa: E402
import overhead  # noqa: E402
import sample_cost  # noqa: E402
import scaling  # noqa: E402
import unwind  # noqa: E402
from common import (BenchError, LoadMeter, Runner, calibrate_floor, git_info,  # noqa: E402
                    kill_running, load_warnings, machine_info, rss_floor_kb, say)

# The workloads, in the order they run and appear in the tables and the notes.
WORKLOADS = [overhead, linux, bringup, aggregator, memtrace, alloc_hooks, hostile, interrupt,
             unwind, sample_cost, gdbstub, scaling]
# Those that need neither QEMU nor the plugin: alone, scripts/bench.sh builds only what they
# run.
STANDALONE = [unwind]
# scaling's sixteen Linux boots a round (up to -smp 8 on these 2 cores): with --only scaling.
DEFAULT = [w.NAME for w in WORKLOADS if w is not bringup and w is not scaling]


def selected(a):
    """The workloads --only and --linux-bringup ask for (--linux-bringup alone: only it)."""
    names = a.only.split(",") if a.only else ([] if a.linux_bringup else list(DEFAULT))
    if a.linux_bringup and bringup.NAME not in names:
        names.append(bringup.NAME)
    return [w for w in WORKLOADS if w.NAME in names]


class Bench(Runner):
    def __init__(self, a):
        workloads = selected(a)
        self.standalone = all(w in STANDALONE for w in workloads)
        super().__init__(a, binaries=not self.standalone)
        self.workloads = workloads
        self.linux_runs = a.linux_runs if a.linux_runs else (1 if a.quick else 3)

    def tables(self):
        out, checks = [], []
        for w in self.workloads:
            text, cs = w.table(self)
            out.append(text)
            checks += cs
        self.results["checks"] = {k: v for k, v in checks}
        return "\n\n".join(out)

    def notes_text(self):
        n = [line for w in self.workloads for line in w.notes(self)]
        if any(w in (aggregator, memtrace) for w in self.workloads):
            n.append(f"peak RSS: ru_maxrss of the command alone (scripts/bench/measure.py forks "
                     f"it and reaps it with wait4); floor {rss_floor_kb() / 1024:.1f} MB (what "
                     f"`true` gets): '≤' marks a figure at that floor, an upper bound only.")
        if self.a.quick:
            n.append("QUICK MODE: fewer runs and smaller inputs; the numbers are a smoke test, "
                     "not comparable with the targets.")
        n += self.notes
        return "\n".join(n)

    def run(self):
        t0 = time.perf_counter()
        if os.path.isdir(self.data) and not self.a.keep:
            shutil.rmtree(self.data)
        os.makedirs(self.data, exist_ok=True)
        if self.standalone:
            self.sources = {"kernel": None, "kernels": {}, "plugin": None, "kp": None}
            qemu0 = "qemu-system-x86_64"
        else:
            self.snapshot_binaries()
            qemu0 = self.qemu_cmd("/dev/null", "none", "rounds=0")[0]
        started = datetime.datetime.now(datetime.timezone.utc)
        whole = LoadMeter()
        calibrate_floor()
        self.results["machine"] = machine_info(qemu0)
        self.results["machine"]["loadavg_start"] = whole.load0
        say(f"machine: {self.results['machine']['nproc']} CPUs, {self.results['machine']['cpu_model']}, "
            f"{self.results['machine']['qemu_version']}, load average {whole.load0}")
        say(f"workloads: {', '.join(w.NAME for w in self.workloads)}")
        self.results["load"] = {}
        for k, w in enumerate(self.workloads):
            meter = LoadMeter()
            w.measure(self)
            self.results["load"][w.NAME] = m = meter.read()
            self.notes += load_warnings(w.NAME, m, k == 0)
        tables = self.tables()
        notes = self.notes_text()
        total = time.perf_counter() - t0
        self.results["load"]["whole"] = wm = whole.read()
        self.results["machine"]["loadavg_end"] = wm["loadavg_end"]
        doc = {
            "date": started.isoformat(timespec="seconds"),
            "machine": self.results.pop("machine"),
            "git": git_info(self.root),
            "mode": "quick" if self.a.quick else "full",
            "workloads": [w.NAME for w in self.workloads],
            "kernel_elf": self.sources["kernel"],
            "kernels": self.sources["kernels"],
            "plugin": self.sources["plugin"],
            "aggregator_binary": self.sources["kp"],
            "targets": {k: v for w in self.workloads for k, v in w.TARGETS.items()},
            "rss_floor_mb": rss_floor_kb() / 1024,
            **self.results,
            "bench_wall_s": total,
        }
        os.makedirs(self.out, exist_ok=True)
        jpath = os.path.join(self.out, "bench.json")
        tmp = jpath + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, jpath)
        m = doc["machine"]
        others = f"{wm['others_cpus']:.2f}" if wm["others_cpus"] is not None else "?"
        print()
        print(f"kern-profile benchmark, {doc['date']}: {m['nproc']} CPUs ({m['cpu_model']}), "
              f"{m['qemu_version']}, {m['kernel']}, load average {m['loadavg_start']} -> "
              f"{m['loadavg_end']}; other processes used {others} CPUs on average")
        print()
        print(tables)
        print()
        print(notes)
        missed = [k for k, v in self.results["checks"].items() if v != "pass"]
        print()
        print(f"targets: {len(self.results['checks']) - len(missed)} of {len(self.results['checks'])} met"
              + (f"; missed: {'; '.join(missed)}" if missed else ""))
        print(f"wrote {jpath} ({total:.0f} s of measuring)")
        if total > 1200 and not self.a.quick:
            print("note: this took longer than the ~15-20 minutes the bench is meant to fit in: "
                  "the machine is slow or busy (see the load average above)")
        if self.a.keep:
            print(f"kept the recorded inputs in {self.data} (--keep reuses them)")

    def cleanup(self):
        # Without --keep the scratch data (the raw file is ~650 MB) goes, even after an error:
        # the error message already quotes the logs that matter.
        if not self.a.keep:
            shutil.rmtree(self.data, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description="kern-profile benchmark (use scripts/bench.sh)")
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True, help="directory of bench.json")
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--alloc-rounds", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated workloads")
    ap.add_argument("--linux-arch", default="i386", choices=("i386", "x86_64", "aarch64", "all"))
    ap.add_argument("--linux-runs", type=int, default=0)
    ap.add_argument("--linux-bringup", type=int, default=0)
    a = ap.parse_args()
    if min(a.runs, a.alloc_rounds, a.linux_runs, a.linux_bringup) < 0:
        ap.error("--runs, --alloc-rounds, --linux-runs and --linux-bringup take positive numbers")
    names = [w.NAME for w in WORKLOADS]
    unknown = [x for x in a.only.split(",") if x and x not in names] if a.only else []
    if unknown or (a.only and not a.only.strip(",")):
        ap.error(f"--only: unknown workload(s) {', '.join(unknown) or repr(a.only)}; "
                 f"known: {','.join(names)}")
    if bringup.NAME in a.only.split(",") and not a.linux_bringup:
        ap.error("--only bringup needs --linux-bringup N (how many boots)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bench = None
    try:
        bench = Bench(a)
        bench.run()
    except BenchError as e:
        kill_running()
        print(f"[kern-profile] error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        kill_running()
        print("[kern-profile] interrupted", file=sys.stderr)
        sys.exit(130)
    except BaseException:
        kill_running()
        raise
    finally:
        if bench is not None:
            bench.cleanup()


if __name__ == "__main__":
    main()
