#!/usr/bin/env python3
"""kern-profile's benchmark (run through scripts/bench.sh, which sets up and builds first).

Python 3 standard library only. Every measured command runs under measure.py (next to this
file): it forks the command, times it with time.perf_counter() and reaps it with os.wait4(),
whose rusage is that command's own (CPU times; peak RSS in ru_maxrss, KiB).
Only the components' command-line interfaces are used: scripts/run-kernel.sh --dry-run for
the QEMU command line, the plugin's arguments and its exit summary line on stderr, and
`kern-profile RAW ELF -f FORMAT -o OUT` / `kern-profile --alloc TRACE ELF -f folded -o DIR`.
"""

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

# Targets (the issue's): plugin ratio at delay=10 and period=100000, cost per sample,
# aggregator samples/s and peak RSS, memtrace records/s.
TARGET_RATIO_DELAY10 = 1.30
TARGET_RATIO_PERIOD100K = 1.15
TARGET_US_PER_SAMPLE = 1.0
TARGET_FOLDED_SAMPLES_PER_S = 5e6
TARGET_AGG_RSS_MB = 256
TARGET_MEMTRACE_RECORDS_PER_S = 2e6

# Plugin-overhead configurations: (name, plugin arguments or None for bare QEMU).
OVERHEAD = [
    ("bare (no plugin)", None),
    ("delay=10 (default)", "delay=10"),
    ("delay=100", "delay=100"),
    ("period=100000", "period=100000"),
    ("period=10000", "period=10000"),
    ("period=100000,exact=on", "period=100000,exact=on"),
]
# Rows whose cost per sample is held to the target: the dense-sampling ones. With few
# samples (delay=100, period=100000: ~50 k in the run) the difference to bare is mostly the
# plugin's fixed per-block instrumentation, not sampling, and dividing it by the samples
# says nothing about a sample's cost.
COST_TARGET_ROWS = {"delay=10 (default)", "period=10000"}

BIG_PERIOD = 400              # guest instructions between samples of the big raw file
BIG_SAMPLES = 10_000_000      # at least this many samples in it
MEMTRACE_FIXED_RECORDS = 23   # examples/kernel/README.md: records = 23 + 8 * alloc_rounds
MEMTRACE_RECORDS_PER_ROUND = 8
QEMU_SUCCESS = 33

SUMMARY_RE = re.compile(r"kern-profile: (\d+) samples written, (\d+) dropped")
AGG_SAMPLES_RE = re.compile(r"(\d+) of (\d+) samples")
COM1_MEMTRACE_RE = re.compile(r"memtrace: (\d+) records, (\d+) bytes")


class BenchError(Exception):
    pass


def say(msg):
    print(f"\033[1m[kern-profile]\033[0m {msg}" if sys.stderr.isatty() else f"[kern-profile] {msg}",
          file=sys.stderr, flush=True)


def tail(path, n=15):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join("    " + l for l in lines[-n:])
    except OSError:
        return "    (unreadable)"


# --------------------------------------------------------------------------- processes

_running = None  # the measure.py process of the child being measured
MEASURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measure.py")
_floor_kb = 0  # ru_maxrss of `true` run the same way: the floor under every peak RSS


def run_measured(cmd, stdout_path, stderr_path, timeout_s, cwd=None):
    """Runs cmd through measure.py; returns (exit status, wall s, user s, sys s, peak RSS KiB).

    measure.py (a stand-in for GNU time) forks the command from a small process and
    reaps it with wait4(): the times and ru_maxrss are the command's own. Not from this
    process: Linux carries the RSS high-water mark of the memory a process had before exec()
    into it, and Python starts children with vfork (in this ~20 MB process's memory).
    """
    global _running
    helper = [sys.executable, "-S", "-I", MEASURE, str(timeout_s), stdout_path, stderr_path] + cmd
    try:
        p = subprocess.Popen(helper, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=cwd, text=True)
    except OSError as e:
        raise BenchError(f"cannot start {sys.executable}: {e}")
    _running = p
    out, err = p.communicate()
    _running = None
    try:
        r = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise BenchError(f"measure.py failed ({p.returncode}) on {shlex.join(cmd)}:\n{err.strip()}")
    if r["timed_out"]:
        raise BenchError(f"timed out after {timeout_s} s: {shlex.join(cmd)}")
    if r["status"] == 127 and "measure.py: cannot run" in open(stderr_path, errors="replace").read():
        raise BenchError(tail(stderr_path, 2).strip())
    return r["status"], r["wall_s"], r["user_s"], r["sys_s"], r["maxrss_kb"]


def calibrate_floor():
    """Peak RSS that `true` gets through measure.py: figures at or under it are bounds only."""
    global _floor_kb
    null = os.devnull
    _floor_kb = max(run_measured(["true"], null, null, 30)[4] for _ in range(3))
    return _floor_kb


def rss_floor_kb():
    return _floor_kb


def kill_running():
    if _running is not None and _running.poll() is None:
        _running.terminate()  # measure.py kills its command, then exits
        try:
            _running.wait(10)
        except subprocess.TimeoutExpired:
            _running.kill()
            _running.wait()


def capture(cmd, cwd=None):
    try:
        r = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except OSError as e:
        raise BenchError(f"cannot run {cmd[0]}: {e}")
    if r.returncode != 0:
        raise BenchError(f"{shlex.join(cmd)} failed ({r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


# --------------------------------------------------------------------------- helpers

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_toml(path):
    try:
        import tomllib  # Python >= 3.11
        with open(path, "rb") as f:
            return tomllib.load(f)
    except ModuleNotFoundError:
        # Older Pythons: the two integers we need, by regex.
        text = open(path, encoding="utf-8").read()
        out = {"timing": {}, "cpu": {}}
        for table, key in (("timing", "rounds_for_2s"), ("cpu", "kernel_insns_per_round")):
            m = re.search(rf"^\s*{key}\s*=\s*(\d+)", text, re.M)
            if m:
                out[table][key] = int(m.group(1))
        return out


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_s(s):
    return f"{s:.3f} s" if s < 10 else f"{s:.2f} s"


def fmt_int(n):
    return f"{n:,}"


def fmt_rss(kb, floor_kb):
    """Peak RSS in MB; '≤' when it is not above the floor (an upper bound then)."""
    return ("≤" if kb <= floor_kb else "") + f"{kb / 1024:.0f} MB"


def fmt_rate(r):
    return f"{r / 1e6:.2f} M"


def machine_info(qemu_cmd0):
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        qv = capture([qemu_cmd0, "--version"]).splitlines()[0].strip()
    except (BenchError, IndexError):
        qv = "unknown"
    u = platform.uname()
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "qemu_version": qv,
        "kernel": f"{u.system} {u.release} {u.machine}",
        "kernel_version": u.version,
        "python": platform.python_version(),
        "mem_total_mb": mem_total_mb(),
    }


def mem_total_mb():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def loadavg():
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return None


def git_info(root):
    try:
        head = capture(["git", "-C", root, "rev-parse", "HEAD"]).strip()
        dirty = bool(capture(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"]).strip())
        return {"commit": head, "dirty": dirty}
    except BenchError:
        return None


# --------------------------------------------------------------------------- the bench

class Bench:
    def __init__(self, a):
        self.a = a
        self.root = a.root
        self.kernel = os.path.join(self.root, "target/examples/kernel.elf")
        self.plugin = os.path.join(self.root, "target/release/kern-profile.so")
        self.kp = os.path.join(self.root, "target/release/kern-profile")
        for p in (self.kernel, self.plugin, self.kp):
            if not os.path.isfile(p):
                raise BenchError(f"{p} is missing: scripts/build.sh should have built it")
        self.out = os.path.abspath(a.out)
        self.data = os.path.join(self.out, "bench-data")
        expected = read_toml(os.path.join(self.root, "examples/kernel/expected.toml"))
        try:
            self.rounds_2s = int(expected["timing"]["rounds_for_2s"])
            self.insns_per_round = int(expected["cpu"]["kernel_insns_per_round"])
        except (KeyError, TypeError, ValueError):
            raise BenchError("examples/kernel/expected.toml lacks [timing] rounds_for_2s or "
                             "[cpu] kernel_insns_per_round")
        quick = a.quick
        self.runs = a.runs if a.runs else (2 if quick else 5)
        self.agg_runs = 2 if quick else 3
        self.cpu_rounds = self.rounds_2s // 8 if quick else self.rounds_2s
        self.big_samples = BIG_SAMPLES // 10 if quick else BIG_SAMPLES
        self.alloc_rounds = a.alloc_rounds if a.alloc_rounds else (5000 if quick else 50000)
        self.results = {}
        self.notes = []

    def snapshot_binaries(self):
        """Copies the plugin, the aggregator and the kernel into the scratch dir and uses the
        copies: every measurement of this run then runs the same build, and a concurrent
        scripts/build.sh (its `cp -f` rewrites kern-profile.so in place) cannot pull the
        plugin from under a running QEMU (SIGBUS)."""
        bindir = os.path.join(self.data, "bin")
        os.makedirs(bindir, exist_ok=True)
        self.sources = {}
        for attr in ("plugin", "kp", "kernel"):
            src = getattr(self, attr)
            dst = os.path.join(bindir, os.path.basename(src))
            for _ in range(10):
                before = sha256(src)
                shutil.copy2(src, dst + ".tmp")
                if sha256(src) == before == sha256(dst + ".tmp"):
                    break
                time.sleep(2)  # being rewritten: try again
            else:
                raise BenchError(f"{src} keeps changing (a build running?): cannot snapshot it")
            os.replace(dst + ".tmp", dst)
            self.sources[attr] = {"path": src, "sha256": before,
                                  "mtime": datetime.datetime.fromtimestamp(
                                      os.path.getmtime(src), datetime.timezone.utc
                                  ).isoformat(timespec="seconds")}
            setattr(self, attr, dst)
        self.kernel_sha = self.sources["kernel"]["sha256"]
        self.plugin_sha = self.sources["plugin"]["sha256"]

    # -- QEMU command line, from run-kernel.sh (the one place that knows how to boot it)
    def qemu_cmd(self, com1, memtrace, append, plugin_args=None):
        cmd = ["bash", os.path.join(self.root, "scripts/run-kernel.sh"), "--dry-run",
               "--kernel", self.kernel, "--com1", com1, "--memtrace", memtrace,
               "-append", append]
        if plugin_args is not None:
            cmd += ["-plugin", f"{self.plugin},{plugin_args}"]
        line = capture(cmd, cwd=self.root).strip()
        argv = shlex.split(line)
        if not argv or "-kernel" not in argv or shutil.which(argv[0]) is None:
            raise BenchError(f"unexpected QEMU command line from run-kernel.sh --dry-run: {line}")
        return argv

    def run_qemu(self, argv, tag, timeout_s):
        so = os.path.join(self.data, f"{tag}.stdout")
        se = os.path.join(self.data, f"{tag}.stderr")
        status, wall, user, sys_, rss = run_measured(argv, so, se, timeout_s, cwd=self.root)
        if status != QEMU_SUCCESS:
            com1 = [x for x in argv if x.startswith("file:")]
            com1_tail = tail(com1[0][5:]) if com1 else ""
            raise BenchError(
                f"QEMU run '{tag}' exited with status {status}, not {QEMU_SUCCESS} (kernel success)\n"
                f"  command: {shlex.join(argv)}\n  stderr:\n{tail(se)}\n  COM1:\n{com1_tail}")
        with open(se, encoding="utf-8", errors="replace") as f:
            err = f.read()
        return wall, user, sys_, rss, err

    @staticmethod
    def parse_summary(err, tag):
        m = SUMMARY_RE.search(err)
        if not m:
            raise BenchError(f"no 'N samples written' summary from the plugin in run '{tag}'; "
                             f"its stderr:\n{err.strip()[-2000:]}")
        return int(m.group(1)), int(m.group(2))

    # -- 1. plugin overhead
    def overhead(self):
        append = f"rounds={self.cpu_rounds} alloc_rounds=0"
        com1 = os.path.join(self.data, "overhead-com1.txt")
        argvs = []
        for i, (name, pargs) in enumerate(OVERHEAD):
            if pargs is not None:
                pargs = f"out={os.path.join(self.data, f'overhead-{i}.raw')},{pargs}"
            argvs.append(self.qemu_cmd(com1, "none", append, pargs))
        # One short unmeasured boot with the plugin first: QEMU, its firmware and the plugin
        # come into the page cache before the first measured run.
        self.run_qemu(self.qemu_cmd(com1, "none", "rounds=0 alloc_rounds=0",
                                    f"out={os.path.join(self.data, 'warmup.raw')},period=100000"),
                      "warmup", 120)
        say(f"plugin overhead: {len(OVERHEAD)} configurations x {self.runs} runs, round-robin "
            f"({append}, no COM2)")
        per = {name: {"wall_s": [], "user_s": [], "sys_s": [], "rss_kb": [], "samples": [],
                      "dropped": []} for name, _ in OVERHEAD}
        n = len(OVERHEAD)
        for r in range(self.runs):
            order = [(r + k) % n for k in range(n)]  # rotate the start: no fixed position
            line = []
            for i in order:
                name, pargs = OVERHEAD[i]
                wall, user, sys_, rss, err = self.run_qemu(argvs[i], f"overhead-{i}", 600)
                d = per[name]
                d["wall_s"].append(wall)
                d["user_s"].append(user)
                d["sys_s"].append(sys_)
                d["rss_kb"].append(rss)
                if pargs is not None:
                    s, dr = self.parse_summary(err, name)
                    d["samples"].append(s)
                    d["dropped"].append(dr)
                line.append(f"{name.split(' ')[0]} {wall:.2f}s")
            say(f"  round {r + 1}/{self.runs}: " + ", ".join(line))
        bare = median(per[OVERHEAD[0][0]]["wall_s"])
        for d in per.values():
            d["cpu_s"] = [u + k for u, k in zip(d["user_s"], d["sys_s"])]
        bare_cpu = median(per[OVERHEAD[0][0]]["cpu_s"])
        rows = {}
        for name, pargs in OVERHEAD:
            d = per[name]
            m, c = median(d["wall_s"]), median(d["cpu_s"])
            row = {"plugin_args": pargs, "runs": d, "median_wall_s": m, "ratio": m / bare,
                   "median_cpu_s": c, "cpu_ratio": c / bare_cpu,
                   "median_rss_mb": median(d["rss_kb"]) / 1024,
                   "rss_upper_bound_only": median(d["rss_kb"]) <= rss_floor_kb()}
            if pargs is not None:
                smp = median(d["samples"])
                row["median_samples"] = smp
                row["cost_us_per_sample"] = (m - bare) / smp * 1e6 if smp else None
                row["cpu_cost_us_per_sample"] = (c - bare_cpu) / smp * 1e6 if smp else None
            rows[name] = row
        # Split the plugin's cost: fixed (per-block instrumentation: period=100000 vs bare,
        # few samples) and marginal per sample (period=10000 vs period=100000: the same
        # instrumentation, 10x the samples).
        lo, hi = rows["period=100000"], rows["period=10000"]
        ds = hi["median_samples"] - lo["median_samples"]
        split = {}
        for key, base in (("wall", bare), ("cpu", bare_cpu)):
            k = f"median_{key}_s"
            split[key] = {
                "fixed_s_period100000_vs_bare": lo[k] - base,
                "fixed_fraction_of_bare": (lo[k] - base) / base,
                "marginal_us_per_sample_period10000_vs_100000":
                    (hi[k] - lo[k]) / ds * 1e6 if ds > 0 else None,
            }
        self.results["plugin_overhead"] = {
            "append": append, "com2": False, "runs_per_config": self.runs,
            "order": "round-robin, start rotated each round",
            "cpu_s": "user + sys of the QEMU process (all threads), from wait4",
            "bare_median_wall_s": bare, "bare_median_cpu_s": bare_cpu, "configs": rows,
            "cost_split": split,
        }
        if bare < 2.0 and not self.a.quick:
            self.notes.append(f"bare median {bare:.2f} s is under 2 s: this machine is faster "
                              f"than expected.toml's rounds_for_2s assumes")

    # -- recorded inputs (fresh each run, reused with --keep when they match)
    def meta_ok(self, path, meta):
        mp = path + ".meta.json"
        if not (self.a.keep and os.path.isfile(path) and os.path.isfile(mp)):
            return None
        try:
            old = json.load(open(mp))
        except (OSError, ValueError):
            return None
        if any(old.get(k) != v for k, v in meta.items()):
            return None
        if old.get("bytes") != os.path.getsize(path):
            return None
        return old

    def record_big_raw(self):
        path = os.path.join(self.data, "big.raw")
        # 3% over the target: firmware and boot add few samples; drops would remove some.
        rounds = math.ceil(self.big_samples * 1.03 * BIG_PERIOD / self.insns_per_round)
        meta = {"kernel_sha256": self.kernel_sha, "plugin_sha256": self.plugin_sha,
                "period": BIG_PERIOD, "rounds": rounds}
        old = self.meta_ok(path, meta)
        if old:
            say(f"reusing {path} ({fmt_int(old['samples'])} samples, --keep)")
            old["reused"] = True
            return path, old
        append = f"rounds={rounds} alloc_rounds=0"
        say(f"recording the aggregator's input: {append}, period={BIG_PERIOD} (~{self.big_samples / 1e6:g} M samples)")
        argv = self.qemu_cmd(os.path.join(self.data, "big-com1.txt"), "none", append,
                             f"out={path},period={BIG_PERIOD}")
        wall, _, _, _, err = self.run_qemu(argv, "big-record", 1200)
        samples, dropped = self.parse_summary(err, "big-record")
        if samples < self.big_samples:
            raise BenchError(f"the recording holds {samples} samples ({dropped} dropped), "
                             f"fewer than the {self.big_samples} wanted")
        info = dict(meta, samples=samples, dropped=dropped, bytes=os.path.getsize(path),
                    record_wall_s=wall, append=append)
        with open(path + ".meta.json", "w") as f:
            json.dump(info, f, indent=1)
        info["reused"] = False
        return path, info

    # -- 2. aggregator throughput
    def aggregator(self):
        raw, info = self.record_big_raw()
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
                         "record_wall_s": info.get("record_wall_s")}, "runs": self.agg_runs,
               "formats": {}}
        runs = {f: {"wall_s": [], "user_s": [], "sys_s": [], "rss_kb": []} for f in ("folded", "svg")}
        for r in range(self.agg_runs):
            for fmt in ("folded", "svg"):  # interleaved too
                outp = os.path.join(self.data, f"big.{fmt}")
                se = os.path.join(self.data, f"agg-{fmt}.stderr")
                cmd = [self.kp, raw, self.kernel, "-f", fmt, "-o", outp]
                status, wall, user, sys_, rss = run_measured(
                    cmd, os.path.join(self.data, f"agg-{fmt}.stdout"), se, 600)
                if status != 0:
                    raise BenchError(f"kern-profile failed ({status}): {shlex.join(cmd)}\n{tail(se)}")
                m = AGG_SAMPLES_RE.search(open(se, errors="replace").read())
                if m and int(m.group(2)) != samples:
                    raise BenchError(f"kern-profile read {m.group(2)} samples from {raw}, "
                                     f"the plugin wrote {samples}")
                d = runs[fmt]
                d["wall_s"].append(wall)
                d["user_s"].append(user)
                d["sys_s"].append(sys_)
                d["rss_kb"].append(rss)
                say(f"  raw -> {fmt} run {r + 1}/{self.agg_runs}: {wall:.2f} s, "
                    f"{samples / wall / 1e6:.2f} M samples/s, {rss / 1024:.0f} MB")
        for fmt, d in runs.items():
            m = median(d["wall_s"])
            d["cpu_s"] = [u + k for u, k in zip(d["user_s"], d["sys_s"])]
            res["formats"][fmt] = {"runs": d, "median_wall_s": m,
                                   "median_cpu_s": median(d["cpu_s"]),
                                   "samples_per_s": samples / m,
                                   "peak_rss_mb": max(d["rss_kb"]) / 1024,
                                   "rss_upper_bound_only": max(d["rss_kb"]) <= rss_floor_kb(),
                                   "output_bytes": os.path.getsize(os.path.join(self.data, f"big.{fmt}"))}
        self.results["aggregator"] = res

    # -- 3. memtrace
    def record_memtrace(self):
        path = os.path.join(self.data, "memtrace.bin")
        records_expected = MEMTRACE_FIXED_RECORDS + MEMTRACE_RECORDS_PER_ROUND * self.alloc_rounds
        meta = {"kernel_sha256": self.kernel_sha, "alloc_rounds": self.alloc_rounds}
        old = self.meta_ok(path, meta)
        if old:
            say(f"reusing {path} ({fmt_int(old['records'])} records, --keep)")
            old["reused"] = True
            return path, old
        append = f"rounds=0 alloc_rounds={self.alloc_rounds}"
        com1 = os.path.join(self.data, "memtrace-com1.txt")
        say(f"recording a memtrace: {append} ({fmt_int(records_expected)} records; QEMU writes "
            f"COM2 a byte per write(2), so this is the slow part)")
        argv = self.qemu_cmd(com1, path, append)
        wall, _, _, _, _ = self.run_qemu(argv, "memtrace-record", 1800)
        m = COM1_MEMTRACE_RE.search(open(com1, errors="replace").read())
        if not m:
            raise BenchError(f"no 'memtrace: N records, B bytes' line on COM1:\n{tail(com1)}")
        records, nbytes = int(m.group(1)), int(m.group(2))
        size = os.path.getsize(path)
        if size != nbytes or records != records_expected:
            raise BenchError(f"memtrace {path}: {size} bytes / {records} records, the kernel "
                             f"says {nbytes} bytes and {records_expected} records were expected")
        info = dict(meta, records=records, bytes=size, record_wall_s=wall, append=append)
        with open(path + ".meta.json", "w") as f:
            json.dump(info, f, indent=1)
        info["reused"] = False
        return path, info

    def memtrace(self):
        trace, info = self.record_memtrace()
        records = info["records"]
        say(f"  {fmt_int(records)} records, {info['bytes'] / 1e6:.1f} MB"
            + (f", recorded in {info['record_wall_s']:.1f} s "
               f"({records / info['record_wall_s']:,.0f} records/s, "
               f"{info['record_wall_s'] / info['bytes'] * 1e6:.2f} µs a byte)" if not info["reused"] else ""))
        with open(trace, "rb") as f:
            while f.read(1 << 20):
                pass
        d = {"wall_s": [], "user_s": [], "sys_s": [], "rss_kb": []}
        outdir = os.path.join(self.data, "mem")
        for r in range(self.agg_runs):
            se = os.path.join(self.data, "alloc.stderr")
            cmd = [self.kp, "--alloc", trace, self.kernel, "-f", "folded", "-o", outdir]
            status, wall, user, sys_, rss = run_measured(
                cmd, os.path.join(self.data, "alloc.stdout"), se, 600)
            if status != 0:
                raise BenchError(f"kern-profile --alloc failed ({status}): {shlex.join(cmd)}\n{tail(se)}")
            d["wall_s"].append(wall)
            d["user_s"].append(user)
            d["sys_s"].append(sys_)
            d["rss_kb"].append(rss)
            say(f"  --alloc run {r + 1}/{self.agg_runs}: {wall:.3f} s, "
                f"{records / wall / 1e6:.2f} M records/s")
        m = median(d["wall_s"])
        self.results["memtrace"] = {
            "input": {"path": trace, "bytes": info["bytes"], "records": records,
                      "alloc_rounds": info["alloc_rounds"], "reused": info["reused"],
                      "record_wall_s": info.get("record_wall_s"),
                      "record_records_per_s": (records / info["record_wall_s"]
                                               if info.get("record_wall_s") else None)},
            "runs": d, "median_wall_s": m, "records_per_s": records / m,
            "median_cpu_s": median([u + k for u, k in zip(d["user_s"], d["sys_s"])]),
            "peak_rss_mb": max(d["rss_kb"]) / 1024,
            "rss_upper_bound_only": max(d["rss_kb"]) <= rss_floor_kb(),
        }

    # -- table
    def table(self):
        rows = []  # (config, wall, ratio/throughput, cpu, cpu ratio, samples, cost, rss, target, result)
        checks = []
        po = self.results["plugin_overhead"]
        for name, pargs in OVERHEAD:
            r = po["configs"][name]
            cost = r.get("cost_us_per_sample")
            targets, fails = [], []
            if name == "delay=10 (default)":
                targets.append(f"≤{TARGET_RATIO_DELAY10:.2f}x")
                if r["ratio"] > TARGET_RATIO_DELAY10:
                    fails.append("ratio")
            if name == "period=100000":
                targets.append(f"≤{TARGET_RATIO_PERIOD100K:.2f}x")
                if r["ratio"] > TARGET_RATIO_PERIOD100K:
                    fails.append("ratio")
            if name in COST_TARGET_ROWS:
                targets.append(f"<{TARGET_US_PER_SAMPLE:g} µs/sample")
                if cost is None or cost >= TARGET_US_PER_SAMPLE:
                    fails.append("cost")
            result = "-" if not targets else ("pass" if not fails else "MISS (" + ", ".join(fails) + ")")
            r["targets"] = targets
            r["result"] = result
            if targets:
                checks.append((f"plugin {name}", result))
            rows.append((f"QEMU {name}", fmt_s(r["median_wall_s"]), f"{r['ratio']:.3f}x",
                         fmt_s(r["median_cpu_s"]), f"{r['cpu_ratio']:.3f}x",
                         fmt_int(round(r["median_samples"])) if pargs else "-",
                         f"{cost:.3f} µs" if cost is not None else "-",
                         fmt_rss(r["median_rss_mb"] * 1024, rss_floor_kb()), ", ".join(targets) or "-", result))
        ag = self.results["aggregator"]
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
            result = "pass" if not fails else "MISS (" + ", ".join(fails) + ")"
            r["targets"], r["result"] = targets, result
            checks.append((f"aggregator raw -> {fmt}", result))
            rows.append((f"kern-profile raw -> {fmt}", fmt_s(r["median_wall_s"]),
                         f"{fmt_rate(r['samples_per_s'])} samples/s",
                         fmt_s(r["median_cpu_s"]), "-",
                         fmt_int(ag["input"]["samples"]), "-", fmt_rss(r["peak_rss_mb"] * 1024, rss_floor_kb()),
                         ", ".join(targets), result))
        mt = self.results["memtrace"]
        ok = mt["records_per_s"] >= TARGET_MEMTRACE_RECORDS_PER_S
        mt["targets"] = [f"≥{TARGET_MEMTRACE_RECORDS_PER_S / 1e6:g} M records/s"]
        mt["result"] = "pass" if ok else "MISS (throughput)"
        checks.append(("memtrace --alloc -> folded", mt["result"]))
        rows.append(("kern-profile --alloc -> folded", fmt_s(mt["median_wall_s"]),
                     f"{fmt_rate(mt['records_per_s'])} records/s",
                     fmt_s(mt["median_cpu_s"]), "-",
                     fmt_int(mt["input"]["records"]) + " rec", "-", fmt_rss(mt["peak_rss_mb"] * 1024, rss_floor_kb()),
                     mt["targets"][0], mt["result"]))
        head = ("configuration", "median wall", "ratio / throughput", "median CPU", "CPU ratio",
                "samples", "cost/sample", "peak RSS", "target", "result")
        widths = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
        right = {1, 2, 3, 4, 5, 6, 7}

        def line(cells):
            return "  ".join((str(c).rjust(w) if i in right else str(c).ljust(w))
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        out = [line(head), line(["-" * w for w in widths])]
        for i, r in enumerate(rows):
            if i in (len(OVERHEAD), len(OVERHEAD) + 2):
                out.append(line(["-" * w for w in widths]))
            out.append(line(r))
        self.results["checks"] = {k: v for k, v in checks}
        return "\n".join(out)

    def notes_text(self):
        po = self.results["plugin_overhead"]
        ag = self.results["aggregator"]["input"]
        mt = self.results["memtrace"]["input"]
        n = []
        n.append(f"plugin overhead: {po['append']}, no COM2, {po['runs_per_config']} run(s) of each "
                 f"configuration, round-robin; wall = QEMU start to exit, CPU = user+sys of QEMU "
                 f"(all threads: the plugin's writer too), medians; cost/sample = (median wall - "
                 f"bare median wall) / samples; targets judge wall time.")
        bare_runs = po["configs"][OVERHEAD[0][0]]["runs"]
        n.append(f"  bare runs: wall {min(bare_runs['wall_s']):.2f}-{max(bare_runs['wall_s']):.2f} s, "
                 f"CPU {min(bare_runs['cpu_s']):.2f}-{max(bare_runs['cpu_s']):.2f} s (wall spread "
                 f"beyond CPU spread = time waiting for a core other jobs held)")
        sp = po["cost_split"]
        n.append(f"  fixed cost, per-block instrumentation (period=100000 - bare, "
                 f"{fmt_int(round(po['configs']['period=100000']['median_samples']))} samples): wall "
                 f"{sp['wall']['fixed_s_period100000_vs_bare']:+.3f} s "
                 f"({sp['wall']['fixed_fraction_of_bare'] * 100:+.1f}%), CPU "
                 f"{sp['cpu']['fixed_s_period100000_vs_bare']:+.3f} s "
                 f"({sp['cpu']['fixed_fraction_of_bare'] * 100:+.1f}%)")
        mw = sp["wall"]["marginal_us_per_sample_period10000_vs_100000"]
        mc = sp["cpu"]["marginal_us_per_sample_period10000_vs_100000"]
        if mw is not None:
            n.append(f"  marginal cost per sample (period=10000 - period=100000, same instrumentation): "
                     f"wall {mw:.3f} µs, CPU {mc:.3f} µs")
        cc = ", ".join(f"{c} {po['configs'][c]['cpu_cost_us_per_sample']:.3f} µs"
                       for c in ("delay=10 (default)", "period=10000"))
        n.append(f"  cost/sample from CPU time instead of wall: {cc}")
        n.append("  the cost/sample target is checked where sampling is dense (delay=10, "
                 "period=10000); with ~100x fewer samples the fixed cost dominates the difference.")
        dropped = sum(sum(po["configs"][c]["runs"]["dropped"]) for c, p in OVERHEAD if p)
        if dropped:
            n.append(f"  the plugin dropped {dropped} samples in these runs (writer behind)")
        n.append(f"aggregator input: {fmt_int(ag['samples'])} samples, {ag['bytes'] / 1e6:.0f} MB "
                 f"(period={ag['period']}, rounds={ag['rounds']}"
                 + (f", recorded in {ag['record_wall_s']:.1f} s" if ag["record_wall_s"] else ", reused (--keep)")
                 + f"); median of {self.agg_runs}, input in the page cache; peak RSS = max of the runs.")
        rec = (f"recorded in {mt['record_wall_s']:.1f} s = {mt['record_records_per_s']:,.0f} records/s "
               f"over COM2" if mt["record_wall_s"] else "reused (--keep)")
        n.append(f"memtrace input: {fmt_int(mt['records'])} records, {mt['bytes'] / 1e6:.1f} MB "
                 f"(rounds=0 alloc_rounds={mt['alloc_rounds']}), {rec}; median of {self.agg_runs}.")
        if mt["records"] < 1_000_000 and not self.a.quick:
            n.append("  fewer than 1 M records: QEMU writes each COM2 byte with its own write(2) "
                     "(~1.5-2 µs a byte, ~70 bytes a record), so 1 M records take ~2 min to record; "
                     "the size is held to about a minute (--alloc-rounds N changes it).")
        n.append(f"peak RSS: ru_maxrss of the command alone (scripts/bench/measure.py forks it and "
                 f"reaps it with wait4); floor {rss_floor_kb() / 1024:.1f} MB (what `true` "
                 f"gets): '≤' marks a figure at that floor, an upper bound only.")
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
        self.snapshot_binaries()
        started = datetime.datetime.now(datetime.timezone.utc)
        load0 = loadavg()
        qemu0 = self.qemu_cmd("/dev/null", "none", "rounds=0")[0]
        calibrate_floor()
        self.results["machine"] = machine_info(qemu0)
        self.results["machine"]["loadavg_start"] = load0
        say(f"machine: {self.results['machine']['nproc']} CPUs, {self.results['machine']['cpu_model']}, "
            f"{self.results['machine']['qemu_version']}, load average {load0}")
        self.overhead()
        self.aggregator()
        self.memtrace()
        table = self.table()
        notes = self.notes_text()
        total = time.perf_counter() - t0
        self.results["machine"]["loadavg_end"] = loadavg()
        doc = {
            "date": started.isoformat(timespec="seconds"),
            "machine": self.results.pop("machine"),
            "git": git_info(self.root),
            "mode": "quick" if self.a.quick else "full",
            "kernel_elf": self.sources["kernel"],
            "plugin": self.sources["plugin"],
            "aggregator_binary": self.sources["kp"],
            "targets": {
                "plugin_ratio_delay10_max": TARGET_RATIO_DELAY10,
                "plugin_ratio_period100000_max": TARGET_RATIO_PERIOD100K,
                "plugin_us_per_sample_max": TARGET_US_PER_SAMPLE,
                "aggregator_folded_samples_per_s_min": TARGET_FOLDED_SAMPLES_PER_S,
                "aggregator_peak_rss_mb_max": TARGET_AGG_RSS_MB,
                "memtrace_records_per_s_min": TARGET_MEMTRACE_RECORDS_PER_S,
            },
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
        print()
        print(f"kern-profile benchmark, {doc['date']}: {m['nproc']} CPUs ({m['cpu_model']}), "
              f"{m['qemu_version']}, {m['kernel']}, load average {m['loadavg_start']} -> {m['loadavg_end']}")
        print()
        print(table)
        print()
        print(notes)
        missed = [k for k, v in self.results["checks"].items() if v != "pass"]
        print()
        print(f"targets: {len(self.results['checks']) - len(missed)} of {len(self.results['checks'])} met"
              + (f"; missed: {'; '.join(missed)}" if missed else ""))
        print(f"wrote {jpath} ({total:.0f} s of measuring)")
        if total > 540 and not self.a.quick:
            print("note: this took longer than the 9-10 minutes the bench is meant to fit in: "
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
    a = ap.parse_args()
    if a.runs < 0 or a.alloc_rounds < 0:
        ap.error("--runs and --alloc-rounds take positive numbers")
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
