"""The benchmark's common runner: measuring a command (through measure.py), the QEMU runs of
the example kernels (their command line from scripts/guests/run-kernel.sh), QEMU with and
without the plugin round-robin and their ratios, the recorded inputs kept with --keep,
formatting, and what is known of the machine (its load too). The workloads (overhead.py, linux.py,
bringup.py, aggregator.py, memtrace.py) measure through a `Runner`; bench.py puts them
together.
"""

import datetime
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "guests"))
from kernel_command import KernelCommandError, qemu_command  # noqa: E402

QEMU_SUCCESS = 33
SUMMARY_RE = re.compile(r"kern-profile: (\d+) samples written, (\d+) dropped")

# The example kernels, by architecture: the ELF the build puts in target/examples, the
# expected.toml with its [timing] rounds_for_2s, what the CPU-bound run adds to `rounds=N` on
# the kernel command line, and QEMU's exit status when the kernel succeeded.
KERNELS = {
    "i386": ("kernel.elf", "examples/kernel/expected.toml", "alloc_rounds=0", QEMU_SUCCESS),
    "x86_64": ("kernel64.elf", "examples/kernel64/expected.toml", "", QEMU_SUCCESS),
    "riscv64": ("kernel-riscv64.elf", "examples/kernel-riscv64/expected.toml", "alloc_rounds=0", 0),
    "aarch64": ("kernel-aarch64.elf", "examples/kernel-aarch64/expected.toml", "alloc_rounds=0", 0),
}

class BenchError(Exception):
    pass


def say(msg):
    print(f"\033[1m[kern-profile]\033[0m {msg}" if sys.stderr.isatty() else f"[kern-profile] {msg}",
          file=sys.stderr, flush=True)


def leaf_counts(b, raw, elf, *extra):
    """Self samples per leaf frame of `raw` named by `elf` (and `extra` report arguments, such
    as `--user PROG`), the inline marker removed: every leaf, `[user]` and the like too."""
    out = subprocess.run([b.kp, raw, elf, *extra, "-f", "folded", "-o", "-"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise BenchError(f"kern-profile {raw} failed:\n{out.stderr.strip()[-2000:]}")
    counts = {}
    for line in out.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        leaf = stack.split(";")[-1].removesuffix("_[i]")
        counts[leaf] = counts.get(leaf, 0) + int(n)
    return counts


def add_run(runs, wall, user, sys_, rss):
    """Appends one measured run's figures (run_measured's) to the lists of `runs`."""
    runs["wall_s"].append(wall)
    runs["user_s"].append(user)
    runs["sys_s"].append(sys_)
    runs["rss_kb"].append(rss)


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


def spread(xs):
    return {"min": min(xs), "median": median(xs), "max": max(xs)} if xs else None


def fmt_spread(sp, unit="x", digits=3):
    """min/median/max, or one figure when the runs agree (a single run)."""
    if sp is None:
        return "-"
    if sp["min"] == sp["max"]:
        return f"{sp['median']:.{digits}f}{unit}"
    return f"{sp['min']:.{digits}f}/{sp['median']:.{digits}f}/{sp['max']:.{digits}f}{unit}"


def format_table(head, groups, right):
    """A text table: `groups` is [(title or None, rows)], a rule between groups and a title
    line over a group's rows; columns in `right` are right-aligned."""
    rows = [r for _, rs in groups for r in rs]
    widths = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]

    def line(cells):
        return "  ".join((str(c).rjust(w) if i in right else str(c).ljust(w))
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    rule = line(["-" * w for w in widths])
    out = [line(head), rule]
    for k, (title, rs) in enumerate(groups):
        if k > 0:
            out.append(rule)
        if title:
            out.append(title)
        out.extend(line(r) for r in rs)
    return "\n".join(out)


# The columns of the offline tools' tables (aggregator.py, memtrace.py).
TOOL_HEAD = ("configuration", "median wall", "throughput", "median CPU", "input", "peak RSS",
             "target", "result")
TOOL_RIGHT = {1, 2, 3, 4, 5}


def judge(targets, fails):
    """The result cell: '-' without targets, pass, or MISS (what failed)."""
    if not targets:
        return "-"
    return "pass" if not fails else "MISS (" + ", ".join(fails) + ")"


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


# A load average above this (on the 1-minute figure, other jobs' share) makes ratios suspect.
LOAD_WARN = 1.5


def busy_cpu_s():
    """CPU time all processes have used since boot, seconds (/proc/stat's first line, steal
    included: on a VM the host taking our CPUs slows QEMU as another job would)."""
    try:
        f = open("/proc/stat").readline().split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f[1:9])
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None


def own_cpu_s():
    """CPU time of this process and every child it has reaped (measure.py reaps QEMU, so
    QEMU's time is in it once measure.py is reaped)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class LoadMeter:
    """How busy the machine was between two points: the load average, and the CPUs other
    processes used (all CPU time from /proc/stat minus the bench's own), on average."""

    def __init__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), busy_cpu_s(), own_cpu_s()
        self.load0 = loadavg()

    def read(self):
        dt = time.perf_counter() - self.t0
        busy = busy_cpu_s()
        own = own_cpu_s() - self.own0
        r = {"loadavg_start": self.load0, "loadavg_end": loadavg(), "wall_s": dt,
             "own_cpus": own / dt if dt > 0 else None, "others_cpus": None}
        if busy is not None and self.busy0 is not None and dt > 0:
            r["others_cpus"] = max(0.0, (busy - self.busy0 - own) / dt)
        return r


def load_warnings(what, m, first):
    """Notes for a LoadMeter reading `m` of `what` (a workload) when other jobs competed: a
    load average above LOAD_WARN when it started (`first`: before any QEMU of the bench, whose
    own runs stay in the 1-minute average a while), or other processes using more than
    LOAD_WARN - 1 CPUs while it ran (its own QEMU, ~1, is in the load average then: /proc/stat
    tells the others' share directly)."""
    why = []
    if first and m["loadavg_start"] and m["loadavg_start"][0] > LOAD_WARN:
        why.append(f"load average {m['loadavg_start'][0]:.2f} at its start")
    others = m["others_cpus"]
    if others is not None and others > LOAD_WARN - 1:
        why.append(f"other processes used {others:.2f} CPUs on average while it ran, the bench "
                   f"{m['own_cpus']:.2f}")
    if not why:
        return []
    return [f"WARNING: {what}: other jobs competed for the CPUs ({'; '.join(why)}; warned above "
            f"a load of {LOAD_WARN}): its figures are not trustworthy."]


def git_info(root):
    try:
        head = capture(["git", "-C", root, "rev-parse", "HEAD"]).strip()
        dirty = bool(capture(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"]).strip())
        return {"commit": head, "dirty": dirty}
    except BenchError:
        return None


# --------------------------------------------------------------------------- with and without

def round_robin(configs, runs, run_one, label):
    """Runs each of `configs` ([(name, plugin args or None)], bare first) `runs` times,
    round-robin, the start rotated each round so that no configuration always runs first or
    after the same one. run_one(i) measures configuration i once: a dict of figures (wall_s,
    user_s, sys_s, rss_kb, and what else it knows). Returns {name: {figure: [one per
    round]}} (index r is round r for every configuration) and each round's order."""
    n = len(configs)
    per = {name: {} for name, _ in configs}
    orders = []
    for r in range(runs):
        order = [(r + k) % n for k in range(n)]
        orders.append([configs[i][0] for i in order])
        line = []
        for i in order:
            fig = run_one(i)
            fig["cpu_s"] = fig["user_s"] + fig["sys_s"]
            for k, v in fig.items():
                per[configs[i][0]].setdefault(k, []).append(v)
            line.append(f"{configs[i][0]} {fig['wall_s']:.2f}s")
        say(f"  {label} round {r + 1}/{runs}: " + ", ".join(line))
    return per, orders


def compare(per, configs):
    """Each configuration's figures against bare (configs[0]): wall and CPU times and the
    ratios of each round's run to that round's bare run (paired: a slow spell of the
    machine hits both), min/median/max; samples and (with - bare) / samples."""
    bare = per[configs[0][0]]
    out = {}
    for name, pargs in configs:
        d = per[name]
        row = {"plugin_args": pargs, "runs": d,
               "wall_s": spread(d["wall_s"]), "cpu_s": spread(d["cpu_s"]),
               "wall_ratio": spread([w / b for w, b in zip(d["wall_s"], bare["wall_s"])]),
               "cpu_ratio": spread([c / b for c, b in zip(d["cpu_s"], bare["cpu_s"])]),
               "ratio_of_medians": {"wall": median(d["wall_s"]) / median(bare["wall_s"]),
                                    "cpu": median(d["cpu_s"]) / median(bare["cpu_s"])},
               "median_rss_mb": median(d["rss_kb"]) / 1024,
               "rss_upper_bound_only": median(d["rss_kb"]) <= rss_floor_kb()}
        if pargs is not None and d.get("samples"):
            smp = median(d["samples"])
            row["median_samples"] = smp
            row["us_per_sample_incl_fixed"] = {
                k: (median(d[f"{k}_s"]) - median(bare[f"{k}_s"])) / smp * 1e6 if smp else None
                for k in ("wall", "cpu")}
        out[name] = row
    return out


def marginal_cost(per, lo, hi):
    """Cost of one more sample, µs: configuration `hi` against `lo` (the same
    instrumentation, more samples), paired by round; {"wall": spread, "cpu": spread}."""
    a, b = per[lo], per[hi]
    out = {}
    for k in ("wall", "cpu"):
        xs = [(th - tl) / (sh - sl) * 1e6
              for th, tl, sh, sl in zip(b[f"{k}_s"], a[f"{k}_s"], b["samples"], a["samples"])
              if sh > sl]
        out[k] = spread(xs)
    return out


# --------------------------------------------------------------------------- the runner

class Runner:
    """What every workload needs: the options, the scratch directory, the binaries and the
    example kernels (copied there by snapshot_binaries), the kernels' documented numbers, and
    QEMU runs."""

    def __init__(self, a, binaries=True):
        """`binaries`: the plugin, the aggregator and the i386 kernel must be built (not for
        workloads that run neither)."""
        self.a = a
        self.root = a.root
        self.plugin = os.path.join(self.root, "target/release/kern-profile.so")
        self.kp = os.path.join(self.root, "target/release/kern-profile")
        # The example kernels that are built; i386's is the aggregator's and memtrace's too.
        self.kernels = {arch: os.path.join(self.root, "target/examples", elf)
                        for arch, (elf, _, _, _) in KERNELS.items()}
        self.kernels = {arch: p for arch, p in self.kernels.items() if os.path.isfile(p)}
        self.kernel = self.kernels.get("i386", os.path.join(self.root, "target/examples/kernel.elf"))
        for p in (self.kernel, self.plugin, self.kp) if binaries else ():
            if not os.path.isfile(p):
                raise BenchError(f"{p} is missing: scripts/build.sh should have built it")
        self.out = os.path.abspath(a.out)
        self.data = os.path.join(self.out, "bench-data")
        expected = read_toml(os.path.join(self.root, KERNELS["i386"][1]))
        try:
            self.insns_per_round = int(expected["cpu"]["kernel_insns_per_round"])
        except (KeyError, TypeError, ValueError):
            raise BenchError(f"{KERNELS['i386'][1]} lacks [cpu] kernel_insns_per_round")
        quick = a.quick
        self.runs = a.runs if a.runs else (2 if quick else 5)
        self.agg_runs = 2 if quick else 3
        self.alloc_rounds = a.alloc_rounds if a.alloc_rounds else (5000 if quick else 50000)
        self.results = {}
        self.notes = []

    def rounds_for_2s(self, arch):
        """expected.toml's [timing] rounds_for_2s of `arch`'s kernel, or None."""
        try:
            return int(read_toml(os.path.join(self.root, KERNELS[arch][1]))["timing"]["rounds_for_2s"])
        except (OSError, KeyError, TypeError, ValueError):
            return None

    def snapshot_binaries(self):
        """Copies the plugin, the aggregator and the kernels into the scratch dir and uses the
        copies: every measurement of this run then runs the same build, and a concurrent
        scripts/build.sh (its `cp -f` rewrites kern-profile.so in place) cannot pull the
        plugin from under a running QEMU (SIGBUS)."""
        bindir = os.path.join(self.data, "bin")
        os.makedirs(bindir, exist_ok=True)
        self.sources = {"kernels": {}}
        for attr in ("plugin", "kp"):
            self.sources[attr], copy = self.snapshot(getattr(self, attr), bindir)
            setattr(self, attr, copy)
        for arch in list(self.kernels):
            self.sources["kernels"][arch], self.kernels[arch] = self.snapshot(self.kernels[arch], bindir)
        self.kernel = self.kernels["i386"]
        self.sources["kernel"] = self.sources["kernels"]["i386"]
        self.kernel_sha = self.sources["kernel"]["sha256"]
        self.plugin_sha = self.sources["plugin"]["sha256"]

    @staticmethod
    def snapshot(src, bindir):
        """Copies `src` into `bindir` once it holds still; (its provenance, the copy's path)."""
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
        return {"path": src, "sha256": before,
                "mtime": datetime.datetime.fromtimestamp(
                    os.path.getmtime(src), datetime.timezone.utc).isoformat(timespec="seconds")}, dst

    # -- QEMU command line, from run-kernel.sh (the one place that knows how to boot it)
    def qemu_cmd(self, com1, memtrace, append, plugin_args=None, arch="i386"):
        args = ["--kernel", self.kernels[arch], "--com1", com1, "--memtrace", memtrace,
                "-append", append]
        if plugin_args is not None:
            args += ["--plugin", f"{self.plugin},{plugin_args}"]
        try:
            argv = qemu_command(arch, *args)
        except KernelCommandError as e:
            raise BenchError(str(e))
        if not argv or "-kernel" not in argv or shutil.which(argv[0]) is None:
            raise BenchError(f"unexpected QEMU command line from run-kernel.sh: {argv}")
        return argv

    def run_qemu(self, argv, tag, timeout_s, success=QEMU_SUCCESS):
        so = os.path.join(self.data, f"{tag}.stdout")
        se = os.path.join(self.data, f"{tag}.stderr")
        status, wall, user, sys_, rss = run_measured(argv, so, se, timeout_s, cwd=self.root)
        if status != success:
            com1 = [x for x in argv if x.startswith("file:")]
            com1_tail = tail(com1[0][5:]) if com1 else ""
            raise BenchError(
                f"QEMU run '{tag}' exited with status {status}, not {success} (kernel success)\n"
                f"  command: {shlex.join(argv)}\n  stderr:\n{tail(se)}\n  COM1:\n{com1_tail}")
        with open(se, encoding="utf-8", errors="replace") as f:
            err = f.read()
        return wall, user, sys_, rss, err

    def run_figures(self, argv, tag, success=QEMU_SUCCESS, summary=None):
        """A measured run (run_qemu, 600 s at most) as a result row, wall, user and sys
        seconds and peak RSS, and its stderr; with `summary` (the run's name in errors), the
        samples the plugin's summary says it wrote and dropped too."""
        wall, user, sys_, rss, err = self.run_qemu(argv, tag, 600, success)
        fig = {"wall_s": wall, "user_s": user, "sys_s": sys_, "rss_kb": rss}
        if summary is not None:
            fig["samples"], fig["dropped"] = self.parse_summary(err, summary)
        return fig, err

    @staticmethod
    def parse_summary(err, tag):
        m = SUMMARY_RE.search(err)
        if not m:
            raise BenchError(f"no 'N samples written' summary from the plugin in run '{tag}'; "
                             f"its stderr:\n{err.strip()[-2000:]}")
        return int(m.group(1)), int(m.group(2))

    # -- recorded inputs (fresh each run, reused with --keep when they match)
    def kept(self, path, meta, counted):
        """With --keep, the metadata of the recording at `path` when it was made with `meta`
        and is whole, said (its number of `counted`) and marked reused; None otherwise."""
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
        say(f"reusing {path} ({fmt_int(old[counted])} {counted}, --keep)")
        old["reused"] = True
        return old

    @staticmethod
    def made(path, info):
        """A fresh recording: its metadata `info` written beside it for --keep, and it is
        marked not reused."""
        with open(path + ".meta.json", "w") as f:
            json.dump(info, f, indent=1)
        info["reused"] = False
        return path, info
