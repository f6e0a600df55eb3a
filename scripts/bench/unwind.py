"""Workload 9, the cost of a stack walk by the kernel's unwind tables against a frame-pointer
walk of the same depth (issue 28: a CFI / ORC sample at most 2x a frame-pointer one), without
QEMU: common/unwind/examples/walk_cost walks stacks in memory, the unwinders' own cost, the reads of
guest memory a copy from a buffer. ORC: Debian's amd64 6.1 kernel (target/linux/x86_64,
scripts/setup.sh --with-linux); CFI: the x86_64 example kernel's .eh_frame (built with frame
pointers, so one stack of frame records serves both walks). Each run of walk_cost times the
walks in rounds, their order rotated each round; the ratio is each round's table walk
over that round's frame-pointer walk, min/median/max over every round of every run.

Two sizes of the stacks' working set: 64 stacks of 12 frames (768 return addresses: the
lookup cache holds them all, as it holds a profile's recurring stacks) and 4096 stacks
(49,152 addresses, beyond the cache: most lookups go through the block index).

A kernel entry crossed from its stub's instructions, against a walk of the same stacks that
crosses nothing (issue 38: a crossing adds at most 20%), one row per architecture side by
side: x86_64 (BARE_ELF's timer stub, the CPU's frame), riscv64 and aarch64 (RISC_ELFS: the
example kernels without frame pointers, whose timer stub saves a trap frame with neither a
frame record nor CFI; each row skipped, with the reason printed, without its kernel).

A third row, recorded stacks: the kernel stacks of a recording of the same amd64 6.1 guest,
RECORDING (not made here; skipped with the reason printed when it is absent), rebuilt for the
ORC walk and walked in the recording's sample order (walk_cost --recording), against frame
records of the same return addresses: the working set and repetition of a real profile. To
make it (after scripts/build.sh):
  bash scripts/guests/run-linux.sh --arch x86_64 --print0 | xargs -0 \
    target/release/kern-profile record --period 100000 -o target/linux/run-x86_64-record --
"""

import json
import os
import subprocess

from common import BenchError, fmt_spread, format_table, judge, median, say, spread

NAME = "unwind"
TARGET_RATIO = 2.0
TARGETS = {"unwind_table_walk_ratio_max": TARGET_RATIO,
           "unwind_entry_crossing_ratio_max": 1.2}
# Built by scripts/bench.sh (cargo build --release -p kern-profile-unwind --examples).
EXAMPLE = "target/release/examples/walk_cost"
VMLINUZ = "target/linux/x86_64/vmlinuz"
CFI_ELF = "target/examples/kernel64.elf"
RECORDING = "target/linux/run-x86_64-record/cpu.raw"
# The x86_64 example kernel without frame pointers: its timer stub has no frame record and no
# CFI (issue 38's crossing row: a walk across it against one of as many return addresses that
# crosses nothing).
BARE_ELF = "target/examples/nofp/kernel64.elf"
# riscv64's and aarch64's: their timer stub isr_timer saves a 272-byte trap frame (pc, sp,
# s0/x29, ra/x30, sstatus/SPSR), no frame record, no CFI (walk_cost --riscv64/--aarch64).
RISC_ELFS = {"riscv64": "target/examples/nofp/kernel-riscv64.elf",
             "aarch64": "target/examples/nofp/kernel-aarch64.elf"}
# The crossing rows: (architecture, suffix of walk_cost's case names); the target is each's.
CROSSINGS = [("x86_64", ""), ("riscv64", "_riscv64"), ("aarch64", "_aarch64")]
CROSSING_TARGET = 1.2
# (label, walk_cost's --stacks, rounds per run)
SIZES = [("64 stacks (in the cache)", 64, 15), ("4096 stacks (beyond it)", 4096, 9)]
DEPTH = 12
# Each round times this many walks of each kind.
WALKS = 10000


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def run_once(b, stacks, rounds, recording):
    cmd = [os.path.join(b.root, EXAMPLE), "--rounds", str(rounds), "--walks", str(WALKS),
           "--stacks", str(stacks), os.path.join(b.root, VMLINUZ), os.path.join(b.root, CFI_ELF),
           os.path.join(b.root, BARE_ELF)]
    for arch, path in RISC_ELFS.items():
        cmd += [f"--{arch}", os.path.join(b.root, path)]
    if recording:
        cmd += ["--recording", os.path.join(b.root, RECORDING)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=b.root)
    if r.returncode != 0:
        raise BenchError(f"walk_cost failed ({r.returncode}):\n{r.stderr.strip()[-2000:]}")
    for line in r.stdout.splitlines():
        if line.startswith("json: "):
            return json.loads(line[len("json: "):]), r.stdout
    raise BenchError(f"walk_cost printed no json line:\n{r.stdout[-2000:]}")


def measure(b):
    res = {"skipped": None}
    b.results[NAME] = res
    for p in (EXAMPLE, VMLINUZ, CFI_ELF, BARE_ELF):
        if not os.path.isfile(os.path.join(b.root, p)):
            res["skipped"] = f"no {p}" + (" (scripts/setup.sh --with-linux)" if p == VMLINUZ
                                          else "")
            say(f"unwind: skipped: {res['skipped']}")
            return
    runs = 2 if b.a.quick else max(3, b.runs)
    res["uptime_start"] = uptime()
    res["runs"] = runs
    res["sizes"] = {}
    recording = os.path.isfile(os.path.join(b.root, RECORDING))
    res["recorded"] = None
    if not recording:
        res["recorded_skipped"] = f"no {RECORDING} (see scripts/bench/unwind.py)"
        say(f"unwind: recorded stacks skipped: {res['recorded_skipped']}")
    # The riscv64 and aarch64 crossing rows, where their kernels are.
    res["crossing_skipped"] = {a: f"no {p}" for a, p in RISC_ELFS.items()
                               if not os.path.isfile(os.path.join(b.root, p))}
    for a, why in res["crossing_skipped"].items():
        say(f"unwind: {a} entry crossing skipped: {why}")
    crossings = [(a, sfx) for a, sfx in CROSSINGS if a not in res["crossing_skipped"]]
    for n, (label, stacks, rounds) in enumerate(SIZES):
        rounds = 3 if b.a.quick else rounds
        # The recorded stacks do not depend on --stacks: timed with the first size only.
        with_rec = recording and n == 0
        say(f"unwind: {label}{' and recorded stacks' if with_rec else ''}: {runs} runs of "
            f"walk_cost, {rounds} rounds of {WALKS} walks each")
        per = {"orc": [], "fp_orc": [], "cfi": [], "fp_cfi": []}
        for _, sfx in crossings:
            per[f"crossing{sfx}"], per[f"no_crossing{sfx}"] = [], []
        rec = {"orc_rec": [], "fp_rec": []}
        for r in range(runs):
            fig, out = run_once(b, stacks, rounds, with_rec)
            for k in per:
                per[k] += fig[k]
            if with_rec:
                for k in ("orc_rec", "fp_rec"):
                    rec[k] += fig[k]
                rec["stats"] = fig["recorded"]
            say(f"  unwind {label} run {r + 1}/{runs}: " + ", ".join(
                f"{k} {median(fig[k]):.0f} ns" for k in (*per, *rec) if k in fig))
        if with_rec:
            st = rec.pop("stats")
            res["recorded"] = {
                "rounds_per_run": rounds, "ns_per_walk": rec, "stats": st,
                "depth": st["kept_frames"] / st["walked"],
                "ratio": spread([a / f for a, f in zip(rec["orc_rec"], rec["fp_rec"])]),
            }
        res["sizes"][label] = {
            "stacks": stacks, "rounds_per_run": rounds, "ns_per_walk": per,
            "orc_ratio": spread([a / f for a, f in zip(per["orc"], per["fp_orc"])]),
            "cfi_ratio": spread([a / f for a, f in zip(per["cfi"], per["fp_cfi"])]),
            # By architecture: each round's crossing over that round's walk crossing nothing.
            "crossing_ratio": {a: spread([c / f for c, f in zip(per[f"crossing{sfx}"],
                                                                per[f"no_crossing{sfx}"])])
                               for a, sfx in crossings},
        }
    res["uptime_end"] = uptime()
    # walk_cost's first three lines: the image unpacked, the tables read.
    res["tables"] = out.splitlines()[:3]


def table(b):
    res = b.results[NAME]
    if res["skipped"]:
        return f"unwind: skipped ({res['skipped']})", []
    groups, checks = [], []
    for label, s in res["sizes"].items():
        rows = []
        p = s["ns_per_walk"]
        for kind, fp, ratio, what in (
                ("orc", "fp_orc", "orc_ratio", "ORC, Debian amd64 6.1"),
                ("cfi", "fp_cfi", "cfi_ratio", "CFI, x86_64 example kernel")):
            fails = ["ratio"] if s[ratio]["median"] > TARGET_RATIO else []
            result = judge([f"≤{TARGET_RATIO:g}x"], fails)
            checks.append((f"unwind {kind} {label}", result))
            extra = (median(p[kind]) - median(p[fp])) / DEPTH
            rows.append((what, f"{median(p[fp]):.0f} ns", f"{median(p[kind]):.0f} ns",
                         fmt_spread(s[ratio], "x", 2), f"{extra:+.1f} ns",
                         f"≤{TARGET_RATIO:g}x", result))
        # The crossings: against a walk of as many return addresses that crosses nothing;
        # 'per frame' is the crossing's own cost (the difference of the walks).
        for arch, sfx in CROSSINGS:
            ratio = s["crossing_ratio"].get(arch)
            if ratio is None:
                continue
            fails = ["ratio"] if ratio["median"] > CROSSING_TARGET else []
            result = judge([f"≤{CROSSING_TARGET:g}x"], fails)
            # x86_64's check keeps its name.
            checks.append((f"unwind entry crossing {label}"
                           + ("" if arch == "x86_64" else f" {arch}"), result))
            cross, plain = p[f"crossing{sfx}"], p[f"no_crossing{sfx}"]
            extra = median(cross) - median(plain)
            rows.append((f"entry crossed ({arch} bare timer stub) vs none crossed",
                         f"{median(plain):.0f} ns", f"{median(cross):.0f} ns",
                         fmt_spread(ratio, "x", 2), f"{extra:+.1f} ns a crossing",
                         f"≤{CROSSING_TARGET:g}x", result))
        groups.append((f"{label}: {res['runs']} runs x {s['rounds_per_run']} rounds", rows))
    rec = res.get("recorded")
    if rec:
        p, st = rec["ns_per_walk"], rec["stats"]
        fails = ["ratio"] if rec["ratio"]["median"] > TARGET_RATIO else []
        result = judge([f"≤{TARGET_RATIO:g}x"], fails)
        checks.append(("unwind orc recorded stacks", result))
        extra = (median(p["orc_rec"]) - median(p["fp_rec"])) / rec["depth"]
        groups.append((
            f"recorded stacks ({st['walked']} kernel samples in order, {st['distinct']} "
            f"distinct, {rec['depth']:.2f} frames a walk): {res['runs']} runs x "
            f"{rec['rounds_per_run']} rounds",
            [("ORC, Debian amd64 6.1", f"{median(p['fp_rec']):.0f} ns",
              f"{median(p['orc_rec']):.0f} ns", fmt_spread(rec["ratio"], "x", 2),
              f"{extra:+.1f} ns", f"≤{TARGET_RATIO:g}x", result)]))
    skipped = res.get("recorded_skipped")
    crossing_skipped = "".join(f"\n  {a} entry crossing skipped: {why}"
                               for a, why in res.get("crossing_skipped", {}).items())
    head = ("table walk", "frame pointers", "table", "ratio min/med/max", "per frame",
            "target", "result")
    return (f"unwind: a {DEPTH}-frame walk by the tables against frame pointers, ns a walk "
            f"(median), walk_cost without QEMU\n  load at start: {res['uptime_start']}\n"
            f"  load at end:   {res['uptime_end']}\n"
            + format_table(head, groups, {1, 2, 3, 4})
            + (f"\n  recorded stacks skipped: {skipped}" if skipped else "")
            + crossing_skipped, checks)


def notes(b):
    res = b.results[NAME]
    if res["skipped"]:
        return [f"unwind skipped: {res['skipped']}"]
    rec = res.get("recorded")
    recorded = ""
    if rec:
        st = rec["stats"]
        recorded = (f"; recorded stacks: {RECORDING}'s {st['walked']} of {st['kernel']} kernel "
                    f"samples rebuilt for the ORC walk, {st['kept_frames']} of "
                    f"{st['recorded_frames']} kernel return addresses placed")
    return ["unwind: walks of stacks in memory by common/unwind/examples/walk_cost (no QEMU: the "
            "unwinders' own cost; a sample adds QEMU's register and memory reads, the same "
            "for both walks); ratio = each round's table walk / that round's frame-pointer "
            "walk of the same depth, min/median/max over all rounds; 'per frame' = (table - "
            "frame pointers) / depth, medians; " + "; ".join(res.get("tables", []))
            + recorded]
