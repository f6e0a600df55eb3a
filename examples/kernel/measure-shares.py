#!/usr/bin/env python3
"""Measure the example kernel's exact per-function instruction counts and shares.

    examples/kernel/measure-shares.py [--elf target/examples/kernel.elf] [--rounds 10 30]
                                      [--check 20] [--target-rounds N] [--write expected.toml]
                                      [--mode cpu|smp|user] [--smp 4] [--user-elf ELF]

--mode cpu (the default) measures the default run into the [cpu] block; --mode smp runs
`smp=on` under -smp N (single-threaded TCG, so that the exec log's "Stopped execution"
lines, which name no vCPU, follow their vCPU's block) and writes per-vCPU counts into
[smp]; --mode user runs `user=on` and splits PCs between user.elf's .text, kernel.elf's
.text and the firmware into [user]. What follows describes --mode cpu; the others work alike.

How: QEMU logs every executed instruction with its PC when each translation block holds one
instruction and blocks are not chained (`-accel tcg,one-insn-per-tb=on -d exec,nochain`).
The log streams through a FIFO (it is large: ~6.5 M lines of firmware alone) and every PC
is attributed twice:
  - by the ELF symbol table (`nm`): inlined code counts in the function it was inlined
    into, as a symbol-based profiler sees it ("self_share");
  - by DWARF inline info (`addr2line -i`, innermost frame): `mix_inlined`'s instructions
    count for it and not for `blend` ("self_share_inline").
Counts are exactly linear in `rounds` (the workload is deterministic), so two small runs
give count(R) = a + b*R per function, a third run checks the model (to within a few instructions of QEMU logging noise), and the shares
are computed for --target-rounds (default: the kernel's DEFAULT_ROUNDS). The allocation
phase runs at the kernel's default alloc_rounds in every run. Not linear: COM1 echoes the
command line, so kmain's count grows by ~25 instructions per digit of `rounds` (and with
the ELF path's length): a few hundred instructions in 1e9, ignored.

Denominator: instructions executed at PCs inside the kernel image (from _start to the
isa-debug-exit write). Firmware instructions (SeaBIOS, QEMU's multiboot option ROM) are
excluded and reported separately; their count varies a little from run to run.

--write FILE replaces the block between "# BEGIN measured-cpu" and "# END measured-cpu"
in FILE with the freshly measured TOML.
"""
import argparse
import bisect
import os
import re
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The workload's functions (demangled, without hash) and their static call tree.
WORKLOAD = "kernel::workload::"
TREE = {
    "kmain": ["run_workload"],
    "run_workload": ["stage_outer"],
    "stage_outer": ["stage_middle", "cold_leaf", "recurse", "blend"],
    "stage_middle": ["hot_leaf"],
    "blend": ["mix_inlined"],
}
# Largest difference (instructions per function) the linearity check tolerates.
SLACK = 8
FUNCS = ["run_workload", "stage_outer", "stage_middle", "hot_leaf", "cold_leaf", "recurse",
         "blend", "mix_inlined"]


def full(short):
    return short if short == "kmain" else WORKLOAD + short


def default_rounds(name="DEFAULT_ROUNDS"):
    src = open(os.path.join(HERE, "src", "multiboot.rs")).read()
    return int(re.search(name + r": u32 = ([0-9_]+);", src).group(1).replace("_", ""))


def text_symbols(elf):
    out = subprocess.run(["nm", "-n", "-C", "--defined-only", elf], check=True,
                         capture_output=True, text=True).stdout
    addrs, names = [], []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            addrs.append(int(parts[0], 16))
            names.append(re.sub(r"::h[0-9a-f]{16}$", "", parts[2]))
    return addrs, names


def text_range(elf):
    out = subprocess.run(["readelf", "-SW", elf], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\.text\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", out)
    lo = int(m.group(1), 16)
    return lo, lo + int(m.group(2), 16)


def run_counted(qemu, elf, rounds, append="", smp=1):
    """PC -> executions for one boot with rounds=R, via a FIFO log; with smp > 1, a dict
    vCPU -> (PC -> executions)."""
    tmp = tempfile.mkdtemp(prefix="kp-measure-")
    fifo = os.path.join(tmp, "exec.log")
    os.mkfifo(fifo)
    per_cpu = {}

    def reader():
        cpu, counts = 0, per_cpu.setdefault(0, {})
        with open(fifo, "rb", buffering=1 << 20) as f:
            for line in f:
                # "Trace 0: 0x7f.. [cs_base/pc/flags/cflags] ..." is logged before a block
                # runs (the number is the vCPU); "Stopped execution of TB chain before 0x7f..
                # [pc]" when the block then left at its entry check (an exit request) without
                # executing: undo those, on the vCPU that logged the block (single-threaded
                # TCG runs one vCPU at a time, so that is the previous "Trace" line's).
                if line.startswith(b"Trace "):
                    c = int(line[6:line.index(b":")])
                    if c != cpu:
                        cpu, counts = c, per_cpu.setdefault(c, {})
                    pc = int(line.split(b"/", 2)[1], 16)
                    counts[pc] = counts.get(pc, 0) + 1
                elif line.startswith(b"Stopped execution"):
                    pc = int(line[line.index(b"[") + 1:line.index(b"]")], 16)
                    counts[pc] = counts.get(pc, 0) - 1

    t = threading.Thread(target=reader)
    t.start()
    accel = "tcg,one-insn-per-tb=on" if smp == 1 else "tcg,thread=single,one-insn-per-tb=on"
    cmd = [qemu, "-kernel", elf, "-display", "none", "-no-reboot", "-monitor", "none",
           "-serial", "file:" + os.path.join(tmp, "com1.txt"), "-serial", "null",
           "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
           "-append", f"{append} rounds={rounds}".strip(),
           "-accel", accel, "-d", "exec,nochain", "-D", fifo]
    if smp > 1:
        cmd += ["-smp", str(smp)]
    rc = subprocess.run(cmd).returncode
    t.join()
    com1 = open(os.path.join(tmp, "com1.txt"), errors="replace").read()
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    os.rmdir(tmp)
    if rc != 33 or "done" not in com1:
        sys.exit(f"rounds={rounds}: QEMU exited {rc} (want 33); COM1:\n{com1}")
    if smp > 1:
        return per_cpu
    total = {}
    for counts in per_cpu.values():
        for pc, n in counts.items():
            total[pc] = total.get(pc, 0) + n
    return total


def inline_names(elf, pcs):
    """PC -> innermost function per DWARF (addr2line -i), for the given PCs."""
    res = {}
    if not pcs:
        return res
    out = subprocess.run(["addr2line", "-a", "-f", "-i", "-C", "-e", elf],
                         input="\n".join(f"{p:#x}" for p in pcs), check=True,
                         capture_output=True, text=True).stdout.splitlines()
    # Output per address: "0x<addr>", then (function, file:line) pairs innermost first.
    cur, first = None, False
    for line in out:
        if re.fullmatch(r"0x[0-9a-f]+", line):
            cur, first = int(line, 16), True
        elif first:
            res[cur] = re.sub(r"::h[0-9a-f]{16}$", "", line)
            first = False
    return res


def attribute(counts, elf, lo, hi):
    addrs, names = text_symbols(elf)
    by_sym, firmware = {}, 0
    kernel_pcs = [pc for pc in counts if lo <= pc < hi]
    inl = inline_names(elf, kernel_pcs)
    by_inline = {}
    for pc, n in counts.items():
        if not (lo <= pc < hi):
            firmware += n
            continue
        sym = names[bisect.bisect_right(addrs, pc) - 1]
        by_sym[sym] = by_sym.get(sym, 0) + n
        fn = inl.get(pc, "??")
        if fn == "??":
            fn = sym  # hand-written assembly has no DWARF
        by_inline[fn] = by_inline.get(fn, 0) + n
    return by_sym, by_inline, firmware


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elf", default=os.path.join(ROOT, "target/examples/kernel.elf"))
    ap.add_argument("--qemu", default=os.environ.get("QEMU", "qemu-system-i386"))
    ap.add_argument("--rounds", type=int, nargs=2, default=[10, 30], metavar=("R1", "R2"))
    ap.add_argument("--check", type=int, default=20, metavar="R3",
                    help="a third run that the linear model must predict exactly (0: skip)")
    ap.add_argument("--target-rounds", type=int, default=None)
    ap.add_argument("--write", metavar="TOML")
    ap.add_argument("--mode", choices=["cpu", "smp", "user"], default="cpu",
                    help="cpu: the default run ([cpu]); smp: `smp=on` under -smp --smp "
                         "([smp]); user: `user=on` ([user])")
    ap.add_argument("--smp", type=int, default=4, help="vCPUs for --mode smp (default 4)")
    ap.add_argument("--user-elf", default=os.path.join(ROOT, "target/examples/user.elf"))
    args = ap.parse_args()
    if args.mode == "smp":
        return main_smp(args)
    if args.mode == "user":
        return main_user(args)
    target = args.target_rounds or default_rounds()
    lo, hi = text_range(args.elf)

    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring rounds={r} ...", file=sys.stderr)
        runs[r] = attribute(run_counted(args.qemu, args.elf, r), args.elf, lo, hi)

    r1, r2 = args.rounds
    (s1, i1, fw1), (s2, i2, fw2) = runs[r1], runs[r2]

    def model(d1, d2):
        # Each round runs the same instructions: the per-round slope is an integer, and
        # rounding it removes the logging noise that extrapolation would multiply.
        keys = set(d1) | set(d2)
        return {k: (d1.get(k, 0), round((d2.get(k, 0) - d1.get(k, 0)) / (r2 - r1)))
                for k in keys}

    def at(m, r):
        return {k: a + b * (r - r1) for k, (a, b) in m.items()}

    msym, minl = model(s1, s2), model(i1, i2)
    if args.check:
        s3, i3, _ = runs[args.check]
        for name, m, d in (("symbol", msym, s3), ("inline", minl, i3)):
            pred = at(m, args.check)
            # Not exactly exact: the final `hlt` may be logged once or twice, and the noise
            # of interrupted blocks, if any is left, is a few instructions per run.
            # (COM1 echoes the command line, so give R1, R2, R3 as many digits each.)
            bad = {k: (pred.get(k, 0), d.get(k, 0)) for k in set(pred) | set(d)
                   if abs(pred.get(k, 0) - d.get(k, 0)) > SLACK}
            if bad:
                sys.exit(f"{name} counts are not linear in rounds: {bad}")
        print(f"linear model checked exactly at rounds={args.check}", file=sys.stderr)

    sym_t, inl_t = at(msym, target), at(minl, target)
    total = sum(sym_t.values())
    assert abs(total - sum(inl_t.values())) < 1e-6
    per_round = sum(b for _, b in msym.values())

    def incl(short, table):
        v = table.get(full(short), 0)
        for c in TREE.get(short, []):
            v += incl(c, table)
        return v

    hot, cold = sym_t[full("hot_leaf")], sym_t[full("cold_leaf")]
    fixed_total = sum(a - b * r1 for a, b in msym.values())

    def fixed(m, name):
        a, b = m.get(name, (0, 0))
        return round(a - b * r1)

    lines = ["# BEGIN measured-cpu (examples/kernel/measure-shares.py --write; do not edit by hand)",
             "[cpu]",
             f"rounds = {target}",
             "# Denominator of every share: instructions executed at PCs inside kernel.elf's .text",
             "# during the whole run (boot, CPU phase, alloc phase at the default alloc_rounds, exit).",
             "# Firmware (SeaBIOS, multiboot option ROM) is excluded: see firmware_insns_approx.",
             "# Counts are linear in rounds: count(R) = fixed + per_round * R, exactly, so a test",
             "# may run fewer rounds and compute its own expected shares from these.",
             f"kernel_insns = {round(total)}",
             f"kernel_insns_per_round = {per_round}",
             f"kernel_insns_fixed = {round(fixed_total)}  # boot + alloc phase + exit",
             f"firmware_insns_approx = {round((fw1 + fw2) / 2)}  # varies a little run to run",
             f"hot_cold_ratio = {hot / cold:.4f}  # self instructions hot_leaf / cold_leaf (10x the iterations)",
             "# self_share: symbol-table attribution (inlined code counts in its caller);",
             "# self_share_inline: DWARF inline attribution (mix_inlined apart from blend);",
             "# total_share: self plus callees in the static call tree (inline view).",
             "# per_round / fixed: self instructions, symbol view; *_inline: inline view.",
             ""]
    table = [("function", "symbol", "self", "self (inline)", "total")]
    for short in FUNCS:
        name = full(short)
        ss = sym_t.get(name, 0) / total
        si = inl_t.get(name, 0) / total
        ti = incl(short, inl_t) / total
        lines += ["[[cpu.function]]",
                  f'name = "{short}"',
                  f'symbol = "{name}"',
                  f"self_share = {ss:.5f}",
                  f"self_share_inline = {si:.5f}",
                  f"total_share = {ti:.5f}",
                  f"per_round = {msym.get(name, (0, 0))[1]}",
                  f"fixed = {fixed(msym, name)}",
                  f"per_round_inline = {minl.get(name, (0, 0))[1]}",
                  f"fixed_inline = {fixed(minl, name)}",
                  ""]
        table.append((short, name, f"{ss:.4f}", f"{si:.4f}", f"{ti:.4f}"))
    lines.append("# END measured-cpu")
    toml = "\n".join(lines) + "\n"

    w = [max(len(r[i]) for r in table) for i in range(5)]
    for row in table:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(row)))
    other = [(v / total, k) for k, v in sym_t.items() if v / total >= 0.0005
             and k not in {full(f) for f in FUNCS}]
    for share, k in sorted(other, reverse=True):
        print(f"(other) {k}: {share:.4f}")
    print(f"total kernel instructions at rounds={target}: {total:.0f} "
          f"({per_round:g} per round); firmware ~{(fw1 + fw2) / 2:.0f}; "
          f"hot/cold = {hot / cold:.4f}")

    if args.write:
        text = open(args.write).read()
        new, n = re.subn(r"# BEGIN measured-cpu.*?# END measured-cpu\n", lambda _: toml, text,
                         flags=re.S)
        if n != 1:
            sys.exit(f"{args.write}: no '# BEGIN measured-cpu' ... '# END measured-cpu' block")
        open(args.write, "w").write(new)
        print(f"updated {args.write}", file=sys.stderr)
    else:
        print(toml)


def linear(runs, r1, r2):
    """{name: (count at r1, per-round slope)} from {rounds: {name: count}}."""
    d1, d2 = runs[r1], runs[r2]
    return {k: (d1.get(k, 0), round((d2.get(k, 0) - d1.get(k, 0)) / (r2 - r1)))
            for k in set(d1) | set(d2)}


def check_linear(m, r1, actual, r3, names, slack, what):
    bad = {}
    for k in names:
        a, b = m.get(k, (0, 0))
        pred, got = a + b * (r3 - r1), actual.get(k, 0)
        if abs(pred - got) > slack:
            bad[k] = (pred, got)
    if bad:
        sys.exit(f"{what}: counts are not linear in rounds: {bad}")


def write_block(path, tag, toml):
    text = open(path).read()
    pat = rf"# BEGIN measured-{tag}.*?# END measured-{tag}\n"
    if re.search(pat, text, flags=re.S):
        new = re.sub(pat, lambda _: toml, text, flags=re.S)
    else:
        new = text.rstrip("\n") + "\n\n" + toml
    open(path, "w").write(new)
    print(f"updated {path}", file=sys.stderr)


SMP = "kernel::smp::"
SMP_FUNCS = [SMP + f for f in ["smp_run", "smp_round", "cpu_work_0", "cpu_work_1",
                               "cpu_work_2", "cpu_work_3", "smp_shared"]]
TOTAL = "(kernel .text)"


def main_smp(args):
    """`smp=on` under -smp N: per vCPU, the instructions at PCs in kernel.elf's .text and
    the self counts of the workload's functions (DWARF inline view)."""
    target = args.target_rounds or default_rounds("DEFAULT_SMP_ROUNDS")
    lo, hi = text_range(args.elf)
    r1, r2 = args.rounds
    runs = {}  # rounds -> cpu -> name -> count
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring smp=on rounds={r} under -smp {args.smp} ...", file=sys.stderr)
        per_cpu = run_counted(args.qemu, args.elf, r, "smp=on", smp=args.smp)
        runs[r] = {}
        for cpu in range(args.smp):
            _, inl, other = attribute(per_cpu.get(cpu, {}), args.elf, lo, hi)
            inl[TOTAL] = sum(inl.values())
            inl["(other)"] = other
            runs[r][cpu] = inl
    models = {cpu: linear({r: runs[r][cpu] for r in (r1, r2)}, r1, r2) for cpu in range(args.smp)}
    if args.check:
        for cpu in range(args.smp):
            # The boot CPU's total also holds its wait for the others (a few instructions per
            # wake-up, as many wake-ups as the run's timing gives): checked loosely.
            slack_total = 20_000 if cpu == 0 else SLACK
            check_linear(models[cpu], r1, runs[args.check][cpu], args.check, SMP_FUNCS, SLACK,
                         f"cpu {cpu}")
            check_linear(models[cpu], r1, runs[args.check][cpu], args.check, [TOTAL],
                         slack_total, f"cpu {cpu} total")
        print(f"linear model checked at rounds={args.check}", file=sys.stderr)

    def at(m, k):
        a, b = m.get(k, (0, 0))
        return a + b * (target - r1), b, a - b * r1

    lines = ["# BEGIN measured-smp (examples/kernel/measure-shares.py --mode smp --write; do not edit by hand)",
             "[smp]",
             f"rounds = {target}",
             f"vcpus = {args.smp}  # measured under -smp {args.smp} (CPU n = APIC ID n = vCPU n)",
             "# Per vCPU, the denominator of its shares: the instructions it executed at PCs in",
             "# kernel.elf's .text (the AP trampoline below 1 MiB and the firmware excluded).",
             "# Counts are linear in rounds (count(R) = fixed + per_round * R); vCPU 0's fixed part",
             "# varies a little (its wait for the others: a few instructions a wake-up).",
             "# Shares are DWARF inline-view self counts (the leaves have no inlined code).",
             ""]
    table = []
    for cpu in range(args.smp):
        m = models[cpu]
        total, tpr, tfix = at(m, TOTAL)
        own = f"{SMP}cpu_work_{cpu}" if cpu < 4 else None
        o, opr, ofix = at(m, own) if own else (0, 0, 0)
        sh, spr, sfix = at(m, SMP + "smp_shared")
        lines += ["[[smp.cpu]]",
                  f"cpu = {cpu}",
                  f'own = "{own}"',
                  f"kernel_insns = {total}",
                  f"kernel_insns_per_round = {tpr}",
                  f"kernel_insns_fixed = {tfix}",
                  f"own_share = {o / total:.5f}",
                  f"own_per_round = {opr}",
                  f"own_fixed = {ofix}",
                  f"shared_share = {sh / total:.5f}",
                  f"shared_per_round = {spr}",
                  f"shared_fixed = {sfix}",
                  f"other_insns_approx = {round((runs[r1][cpu]['(other)'] + runs[r2][cpu]['(other)']) / 2)}"
                  "  # outside kernel.elf's .text: firmware, trampoline",
                  ""]
        table.append((cpu, own, o / total, sh / total, total))
    lines.append("# END measured-smp")
    toml = "\n".join(lines) + "\n"
    for cpu, own, os_, ss, total in table:
        print(f"cpu {cpu}: {own} {os_:.4f}, smp_shared {ss:.4f}, kernel instructions {total}")
    if args.write:
        write_block(args.write, "smp", toml)
    else:
        print(toml)


USER_FUNCS = [("user.elf", "user::user_hot"), ("user.elf", "user::user_cold"),
              ("user.elf", "user::round"), ("user.elf", "user::run"),
              ("user.elf", "user::syscall"), ("user.elf", "user_main"),
              ("kernel.elf", "syscall_entry"), ("kernel.elf", "kernel::user::syscall_dispatch"),
              ("kernel.elf", "kernel::user::sys_work")]


def main_user(args):
    """`user=on`: instructions in the user program (user.elf's .text), in the kernel
    (kernel.elf's .text) and elsewhere (firmware), and the functions' self counts."""
    target = args.target_rounds or default_rounds("DEFAULT_USER_ROUNDS")
    klo, khi = text_range(args.elf)
    ulo, uhi = text_range(args.user_elf)
    r1, r2 = args.rounds
    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring user=on rounds={r} ...", file=sys.stderr)
        counts = run_counted(args.qemu, args.elf, r, "user=on")
        _, kinl, outside = attribute(counts, args.elf, klo, khi)
        ucounts = {pc: n for pc, n in counts.items() if ulo <= pc < uhi}
        _, uinl, _ = attribute(ucounts, args.user_elf, ulo, uhi)
        d = {("kernel.elf", k): v for k, v in kinl.items()}
        d.update({("user.elf", k): v for k, v in uinl.items()})
        d["user"] = sum(uinl.values())
        d["kernel"] = sum(kinl.values())
        d["firmware"] = outside - d["user"]
        runs[r] = d
    m = linear(runs, r1, r2)
    if args.check:
        check_linear(m, r1, runs[args.check], args.check,
                     USER_FUNCS + ["user", "kernel"], SLACK, "user=on")
        print(f"linear model checked at rounds={args.check}", file=sys.stderr)

    def at(k):
        a, b = m.get(k, (0, 0))
        return a + b * (target - r1), b, a - b * r1

    user, upr, ufix = at("user")
    kern, kpr, kfix = at("kernel")
    fw = round((runs[r1]["firmware"] + runs[r2]["firmware"]) / 2)
    both = user + kern
    lines = ["# BEGIN measured-user (examples/kernel/measure-shares.py --mode user --write; do not edit by hand)",
             "[user]",
             f"rounds = {target}",
             "# Instructions of the whole `user=on` run (-smp 1) by where their PC lies: in",
             "# user.elf's .text (the ring-3 program), in kernel.elf's .text (boot, system calls,",
             "# alloc phase, exit), elsewhere (firmware: SeaBIOS, the multiboot option ROM).",
             "# Counts are linear in rounds: count(R) = fixed + per_round * R.",
             f"user_insns = {user}",
             f"user_insns_per_round = {upr}",
             f"user_insns_fixed = {ufix}",
             f"kernel_insns = {kern}",
             f"kernel_insns_per_round = {kpr}",
             f"kernel_insns_fixed = {kfix}",
             f"firmware_insns_approx = {fw}  # varies a little run to run",
             "# The kernel/user split of samples (the text report's header): firmware runs in",
             "# ring 0, so it counts as kernel time: user / (user + kernel + firmware).",
             f"user_share_all = {user / (both + fw):.5f}",
             "# Without the firmware, the denominator of the shares below: user / (user + kernel).",
             f"user_share = {user / both:.5f}",
             "# self_share: self instructions / (user_insns + kernel_insns), DWARF inline view.",
             ""]
    for binary, name in USER_FUNCS:
        n, pr, fx = at((binary, name))
        lines += ["[[user.function]]",
                  f'symbol = "{name}"',
                  f'binary = "{binary}"',
                  f"self_share = {n / both:.5f}",
                  f"per_round = {pr}",
                  f"fixed = {fx}",
                  ""]
        print(f"{binary:10s} {name:32s} {n / both:.4f}  ({pr} per round, {fx} fixed)")
    lines.append("# END measured-user")
    toml = "\n".join(lines) + "\n"
    print(f"user {user} kernel {kern} firmware ~{fw}: user share {user / both:.4f} "
          f"({user / (both + fw):.4f} with firmware)")
    if args.write:
        write_block(args.write, "user", toml)
    else:
        print(toml)


if __name__ == "__main__":
    main()
