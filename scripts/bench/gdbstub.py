"""Workload 11, sampling through QEMU's gdbstub (issue 29): each example kernel's CPU workload
run bare and with `kern-profile record --attach` sampling it through its gdbstub at the
default rate (100 looks a second) and at 1,000, round-robin. QEMU's own wall and CPU time
(measure.py, wait4) against the same round's bare run; the sampler's own CPU beside it; and
what `record` says of each run: looks a second, the median time the guest was stopped a look,
the share of the run it was stopped.

A second part measures where the stops land on a guest that makes many system calls: the
i386 kernel's `user=on` run sampled by `record --attach` at 1,000 looks a second and by the
plugin's `delay=100`, each function's self share beside its share of the executed
instructions (examples/kernel/expected.toml, from exact counts). Under TCG QEMU takes a stop
at a kernel entry far more often than elsewhere (docs/gdbstub.md, "Accuracy").

The sampler attaches once the stub listens (QEMU started with `-gdb unix:SOCK,server=on,
wait=off`), so the run's wall time holds the attach (connecting stops the guest while the
target is read) and every look, as a user who runs `record --gdb` would see them.
"""

import os
import re
import socket
import statistics
import threading
import time
import tomllib

from common import (KERNELS, BenchError, compare, fmt_spread, format_table, judge,
                    leaf_counts, qemu_command, round_robin, run_measured, say, spread, tail)
from overhead import cpu_rounds, unavailable

NAME = "gdbstub"
ARCHES = ["i386", "x86_64", "riscv64", "aarch64"]
DEFAULT_RATE = 100
CONFIGS = [("bare", None), (f"gdb rate={DEFAULT_RATE}", DEFAULT_RATE), ("gdb rate=1000", 1000)]
TARGET_RATIO = 1.05
TARGET_STOP_US = 100
TARGETS = {"gdbstub_wall_ratio_max": TARGET_RATIO, "gdbstub_median_stop_us_max": TARGET_STOP_US}
SUMMARY_RE = re.compile(
    r"(\d+) looks of (\d+) vCPU\(s\) in ([\d.]+) s \((\d+) a second.*?stopped (\d+) µs per look "
    r"\(median\), ([\d.]+)% of the time")


def wait_for_socket(sock, result):
    """Waits up to 60 s for QEMU's stub to listen on `sock`; False (and result["error"]) if
    it never does."""
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            result["error"] = f"{sock} never appeared"
            return False
        time.sleep(0.005)
    return True


def qemu_argv(b, arch, kernel, append, tag, stub):
    """The example kernel's QEMU command (run-kernel.sh), with a gdbstub on a fresh socket
    when `stub`; and the socket's path."""
    sock = os.path.join(b.data, f"{tag}.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    args = ["--kernel", kernel, "--com1", os.path.join(b.data, f"{tag}-com1.txt"),
            "--memtrace", "none", "-append", append]
    if stub:
        args += ["-gdb", f"unix:{sock},server=on,wait=off"]
    return qemu_command(arch, *args), sock


def attach_and_record(b, sock, rate, kernel, tag, result):
    """Waits for the stub's socket, then samples it with `record --attach` until QEMU exits;
    `result` gets the sampler's times and summary."""
    if not wait_for_socket(sock, result):
        return
    out = os.path.join(b.data, f"{tag}-out")
    se = os.path.join(b.data, f"{tag}-attach.stderr")
    cmd = [b.kp, "record", "--attach", f"unix:{sock}", "--rate", str(rate), "-o", out,
           "--kernel", kernel]
    status, wall, user, sys_, _ = run_measured(cmd, os.devnull, se, 600, cwd=b.root)
    err = open(se, encoding="utf-8", errors="replace").read()
    m = SUMMARY_RE.search(err)
    if status != 0 or not m:
        result["error"] = f"record --attach exited {status}:\n{tail(se)}"
        return
    result.update({"sampler_cpu_s": user + sys_, "looks": int(m.group(1)),
                   "looks_per_s": int(m.group(4)), "median_stop_us": int(m.group(5)),
                   "stopped_pct": float(m.group(6))})


def packet(body):
    return b"$" + body + b"#" + b"%02x" % (sum(body) & 0xff)


def stop_floor(sock, looks, rate, result):
    """QEMU's own cost of a stop, for comparison: a bare client that only stops the guest
    (0x03) and resumes it (`c`, until its acknowledgement) at `rate`, no registers or memory
    read; the median and p90 in µs."""
    if not wait_for_socket(sock, result):
        return
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    buf = bytearray()

    def reply():
        nonlocal buf
        while True:
            while buf[:1] == b"+":
                del buf[:1]
            end = buf.find(b"#")
            if buf[:1] == b"$" and end >= 0 and len(buf) >= end + 3:
                body = bytes(buf[1:end])
                del buf[:end + 3]
                s.sendall(b"+")
                return body
            chunk = s.recv(65536)
            if not chunk:
                raise OSError("QEMU closed the stub")
            buf += chunk

    def ack():
        nonlocal buf
        while b"+" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise OSError("QEMU closed the stub")
            buf += chunk
        del buf[:buf.index(b"+") + 1]

    times = []
    try:
        s.sendall(packet(b"qSupported:multiprocess+"))
        reply()
        s.sendall(packet(b"c"))
        ack()
        for _ in range(looks):
            time.sleep(1 / rate)
            t0 = time.perf_counter()
            s.sendall(b"\x03")
            reply()
            s.sendall(packet(b"c"))
            ack()
            times.append(time.perf_counter() - t0)
    except OSError:
        pass  # QEMU exited: the stops so far count
    finally:
        s.close()
    if not times:
        result["error"] = "no stop"
        return
    times.sort()
    result.update({"floor_median_us": statistics.median(times) * 1e6,
                   "floor_p90_us": times[int(len(times) * 0.9)] * 1e6, "floor_stops": len(times)})


def measure_arch(b, arch, rounds, how):
    append = f"rounds={rounds} {KERNELS[arch][2]}".strip()
    kernel = b.kernels[arch]
    say(f"gdbstub, {arch}: {len(CONFIGS)} configurations x {b.runs} runs, round-robin ({append})")

    def run_one(i):
        name, rate = CONFIGS[i]
        tag = f"gdbstub-{arch}-{i}"
        argv, sock = qemu_argv(b, arch, kernel, append, tag, rate is not None)
        sampler = {}
        t = None
        if rate is not None:
            t = threading.Thread(target=attach_and_record,
                                 args=(b, sock, rate, kernel, tag, sampler))
            t.start()
        fig, _ = b.run_figures(argv, tag, KERNELS[arch][3])
        if t is not None:
            t.join()
            if "error" in sampler:
                raise BenchError(f"gdbstub {arch} {name}: {sampler['error']}")
        fig.update(sampler)
        return fig

    per, orders = round_robin(CONFIGS, b.runs, run_one, f"gdbstub {arch}")
    # QEMU's own stop and resume, for comparison: one run at the default rate.
    tag = f"gdbstub-{arch}-floor"
    argv, sock = qemu_argv(b, arch, kernel, append, tag, True)
    floor = {}
    t = threading.Thread(target=stop_floor, args=(sock, 100000, DEFAULT_RATE, floor))
    t.start()
    b.run_qemu(argv, tag, 600, KERNELS[arch][3])
    t.join()
    if "error" in floor:
        raise BenchError(f"gdbstub {arch}, the bare stops: {floor['error']}")
    say(f"  gdbstub {arch}: QEMU's own stop and resume, {floor['floor_stops']} at "
        f"{DEFAULT_RATE}/s: median {floor['floor_median_us']:.0f} µs")
    return {"kernel": kernel, "append": append, "rounds": rounds, "rounds_from": how,
            "orders": orders, "configs": compare(per, CONFIGS), "runs": per, "floor": floor}


# Where the stops land: the system-call entry's first instruction and the work it calls.
SKEW_FUNCTIONS = ["syscall_entry", "kernel::user::sys_work", "user::user_hot"]
SKEW_RATE = 1000


def self_shares(b, raw, kernel, user_elf):
    """Self share of each of SKEW_FUNCTIONS in `raw`, and its samples."""
    counts = leaf_counts(b, raw, kernel, "--user", user_elf)
    total = sum(counts.values())
    return {f: counts.get(f, 0) / max(total, 1) for f in SKEW_FUNCTIONS}, total


def measure_skew(b):
    """The i386 kernel's `user=on` run through the stub and under the plugin, once each."""
    arch = "i386"
    kernel = b.kernels[arch]
    user_elf = os.path.join(b.root, "target/examples/user.elf")
    expected = tomllib.load(open(os.path.join(b.root, KERNELS[arch][1]), "rb"))
    exact = {f["symbol"]: f["self_share"] for f in expected["user"]["function"]}
    append = "user=on rounds=50000 alloc_rounds=0"
    tag = "gdbstub-skew-gdb"
    argv, sock = qemu_argv(b, arch, kernel, append, tag, True)
    sampler = {}
    t = threading.Thread(target=attach_and_record, args=(b, sock, SKEW_RATE, kernel, tag, sampler))
    t.start()
    b.run_qemu(argv, tag, 600, KERNELS[arch][3])
    t.join()
    if "error" in sampler:
        raise BenchError(f"gdbstub skew: {sampler['error']}")
    gdb, gdb_n = self_shares(b, os.path.join(b.data, f"{tag}-out", "cpu.raw"), kernel, user_elf)
    tag = "gdbstub-skew-plugin"
    raw = os.path.join(b.data, f"{tag}.raw")
    argv = qemu_command(arch, "--kernel", kernel, "--com1",
                        os.path.join(b.data, f"{tag}-com1.txt"), "--memtrace", "none",
                        "-append", append, "--plugin", f"{b.plugin},out={raw},delay=100")
    b.run_qemu(argv, tag, 600, KERNELS[arch][3])
    plugin, plugin_n = self_shares(b, raw, kernel, user_elf)
    return {"append": append, "rate": SKEW_RATE, "gdb": gdb, "gdb_samples": gdb_n,
            "plugin": plugin, "plugin_samples": plugin_n,
            "exact": {f: exact.get(f) for f in SKEW_FUNCTIONS}}


def measure(b):
    res = {"archs": {}, "skipped": {}}
    b.results[NAME] = res
    if unavailable(b, "i386") is None:
        res["skew"] = measure_skew(b)
        say("  gdbstub skew, i386 user=on: " + ", ".join(
            f"{f} {100 * res['skew']['gdb'][f]:.1f}% through the stub, "
            f"{100 * res['skew']['plugin'][f]:.1f}% by the plugin" for f in SKEW_FUNCTIONS))
    for arch in ARCHES:
        why = unavailable(b, arch)
        if why is not None:
            say(f"gdbstub, {arch}: skipped: {why}")
            res["skipped"][arch] = why
            continue
        res["archs"][arch] = measure_arch(b, arch, *cpu_rounds(b, arch))


def table(b):
    res = b.results[NAME]
    groups, checks = [], []
    for arch, a in res["archs"].items():
        rows = []
        for name, rate in CONFIGS:
            r = a["configs"][name]
            d = a["runs"][name]
            targets, fails = [], []
            if rate == DEFAULT_RATE:
                targets += [f"≤{TARGET_RATIO:g}x wall", f"≤{TARGET_STOP_US} µs stop"]
                if r["wall_ratio"]["median"] > TARGET_RATIO:
                    fails.append("ratio")
            stop = spread(d["median_stop_us"]) if rate else None
            if rate == DEFAULT_RATE and stop["median"] > TARGET_STOP_US:
                fails.append("stop")
            result = judge(targets, fails)
            if targets:
                checks.append((f"gdbstub {arch} {name}", result))
            rows.append((name, fmt_spread(r["wall_ratio"]), fmt_spread(r["cpu_ratio"]),
                         fmt_spread(spread(d["sampler_cpu_s"]), " s", 2) if rate else "-",
                         f"{spread(d['looks_per_s'])['median']:.0f}" if rate else "-",
                         fmt_spread(stop, " µs", 0) if rate else "-",
                         f"{spread(d['stopped_pct'])['median']:.1f}%" if rate else "-",
                         ", ".join(targets) or "-", result))
        f = a["floor"]
        rows.append((f"QEMU's own stop (0x03, c) at {DEFAULT_RATE}/s", "-", "-", "-",
                     "-",
                     f"{f['floor_median_us']:.0f} µs (p90 {f['floor_p90_us']:.0f})", "-", "-",
                     "-"))
        groups.append((f"{arch}: {os.path.basename(a['kernel'])}, {a['append']}, "
                       f"{b.runs} run(s) of each", rows))
    if not groups:
        return "gdbstub: no architecture could be measured (see the notes)", checks
    head = ("configuration", "QEMU wall ratio min/med/max", "QEMU CPU ratio min/med/max",
            "sampler CPU", "looks/s", "median stop min/med/max", "stopped", "target", "result")
    text = format_table(head, groups, {1, 2, 3, 4, 5, 6})
    sk = res.get("skew")
    if sk:
        pct = lambda v: "-" if v is None else f"{100 * v:.2f}%"  # noqa: E731
        rows = [(f, pct(sk["gdb"][f]), pct(sk["plugin"][f]), pct(sk["exact"][f]))
                for f in SKEW_FUNCTIONS]
        text += ("\nWhere the stops land, i386 " + sk["append"] + ": self shares through the "
                 f"stub ({sk['rate']} looks/s, {sk['gdb_samples']} samples), by the plugin "
                 f"(delay=100, {sk['plugin_samples']}), and of the executed instructions:\n"
                 + format_table(("function", "gdbstub", "plugin delay=", "instructions"),
                                [("", rows)], {1, 2, 3}))
    return ("Sampling through QEMU's gdbstub (record --attach), example kernels, one vCPU, TCG:\n"
            + text, checks)


def notes(b):
    res = b.results[NAME]
    n = ["gdbstub: per architecture, bare QEMU and QEMU sampled by `record --attach` "
         "through its gdbstub at each rate, round-robin; QEMU wall and CPU (user+sys, all "
         "its threads) / that round's bare run, min/median/max; sampler CPU = record's "
         "user+sys, its drawing after QEMU exits included; looks/s, the median stop and the "
         "stopped share as record prints them (median over the runs; the median stop "
         "min/med/max over the runs); QEMU's own stop: a bare client that only sends 0x03 "
         "and `c` (until its acknowledgement) at the default rate through one run, no "
         "registers or memory: the floor under any gdbstub sampler"]
    for arch, a in res["archs"].items():
        n.append(f"  {arch}: rounds={a['rounds']} ({a['rounds_from']}); bare wall "
                 f"{fmt_spread(a['configs']['bare']['wall_s'], ' s', 2)}")
    for arch, why in res["skipped"].items():
        n.append(f"  {arch} skipped: {why}")
    return n
