#!/usr/bin/env python3
"""Measure a virt example kernel's exact per-function instruction counts and shares.

    examples/virt-common/measure-shares.py --arch riscv64|aarch64 [--mode cpu|smp|user]
        [--elf ELF] [--user-elf ELF] [--rounds 10 30] [--check 20] [--target-rounds N]
        [--smp 4] [--write examples/kernel-ARCH/expected.toml]

The i386 kernel's method (examples/kernel/measure-shares.py, machinery in
examples/common/shares.py) on QEMU's `virt` boards: every executed instruction's PC from
`-accel tcg,one-insn-per-tb=on -d exec,nochain` (streamed through a FIFO), attributed by the
symbol table (`nm`) and by DWARF inline info (`addr2line -i`); counts are exactly linear in
`rounds`, so runs at R1 and R2 give count(R) = fixed + per_round * R per function, a run at
R3 checks the model, and the shares are computed for --target-rounds (default: the kernel's
default for the mode, kernel-common/src/config.rs).

--mode cpu writes the [cpu] block (the default run), --mode smp the [smp] block (`smp=on`
under -smp N, single-threaded TCG so that the log's "Stopped execution" lines follow their
vCPU's block), --mode user the [user] block (`user=on`: PCs in the user program's .text, in
the kernel's .text, elsewhere). Denominator: instructions at PCs in the kernel's .text (and,
for --mode user, the user program's); what runs elsewhere (riscv64: QEMU's reset vector
at 0x1000) is reported apart. No memtrace file is written during a measurement.

--write FILE replaces the block between "# BEGIN measured-MODE" and "# END measured-MODE"
(appending it when missing) with the freshly measured TOML.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "examples", "common"))
import shares  # noqa: E402
from kernel_command import qemu_command  # noqa: E402 (put on the path by shares)
from shares import FUNCS, SLACK, TREE, attribute, check_linear, linear, write_block  # noqa: E402

ARCHES = ["aarch64", "riscv64"]
# The system-call entry (arch.rs), between the user program and syscall_dispatch.
SYSCALL_ENTRY = {"riscv64": "trap_vector", "aarch64": "svc_entry"}
WORKLOAD = "kernel::workload::"
SMP = "kernel::smp::"
SMP_FUNCS = [SMP + f for f in ["smp_run", "smp_round", "cpu_work_0", "cpu_work_1",
                               "cpu_work_2", "cpu_work_3", "smp_shared"]]
TOTAL = "(kernel .text)"


def default_rounds(name):
    src = open(os.path.join(HERE, "..", "kernel-common", "src", "config.rs")).read()
    return int(re.search(name + r": u32 = ([0-9_]+);", src).group(1).replace("_", ""))


def run_counted(args, rounds, append="", smp=1):
    """vCPU -> (PC -> executions) for one boot with rounds=R (exit status 0 required)."""
    tmp = tempfile.mkdtemp(prefix="kp-measure-")
    fifo = os.path.join(tmp, "exec.log")
    os.mkfifo(fifo)
    per_cpu = {}

    def reader():
        cpu, counts = 0, per_cpu.setdefault(0, {})
        with open(fifo, "rb", buffering=1 << 20) as f:
            for line in f:
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
    com1 = os.path.join(tmp, "com1.txt")
    cmd = qemu_command(args.arch, "--kernel", args.elf, "--com1", com1, "--memtrace", "none",
                       "-append", f"{append} rounds={rounds}".strip(),
                       "-accel", accel, "-d", "exec,nochain", "-D", fifo, qemu=args.qemu)
    if smp > 1:
        cmd += ["-smp", str(smp)]
    rc = subprocess.run(cmd).returncode
    t.join()
    text = open(com1, errors="replace").read()
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    os.rmdir(tmp)
    if rc != 0 or not text.rstrip().endswith("done"):
        sys.exit(f"rounds={rounds}: QEMU exited {rc} (want 0); UART:\n{text}")
    return per_cpu


def merged(per_cpu):
    total = {}
    for counts in per_cpu.values():
        for pc, n in counts.items():
            total[pc] = total.get(pc, 0) + n
    return total


def header(args, mode, rounds):
    return [f"# BEGIN measured-{mode} (examples/virt-common/measure-shares.py --arch {args.arch}"
            f" --mode {mode} --write; do not edit by hand)", f"[{mode}]", f"rounds = {rounds}"]


def emit(args, mode, lines):
    lines.append(f"# END measured-{mode}")
    toml = "\n".join(lines) + "\n"
    if args.write:
        write_block(args.write, mode, toml)
    else:
        print(toml)


def main_cpu(args):
    target = args.target_rounds or default_rounds("DEFAULT_ROUNDS")
    ranges = [shares.text_range(args.elf)]
    full = lambda short: short if short == "kmain" else WORKLOAD + short  # noqa: E731
    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring rounds={r} ...", file=sys.stderr)
        runs[r] = attribute(merged(run_counted(args, r)), args.elf, ranges)
    r1, r2 = args.rounds
    msym = linear({r: runs[r][0] for r in (r1, r2)}, r1, r2)
    minl = linear({r: runs[r][1] for r in (r1, r2)}, r1, r2)
    if args.check:
        names = [full(f) for f in FUNCS]
        check_linear(msym, r1, runs[args.check][0], args.check, names, SLACK, "symbol view")
        check_linear(minl, r1, runs[args.check][1], args.check, names, SLACK, "inline view")
        print(f"linear model checked at rounds={args.check}", file=sys.stderr)

    def at(m, k):
        a, b = m.get(k, (0, 0))
        return a + b * (target - r1), b, a - b * r1

    total = sum(at(msym, k)[0] for k in msym)
    per_round = sum(b for _, b in msym.values())
    fixed_total = total - per_round * target
    other = round((runs[r1][2] + runs[r2][2]) / 2)

    def incl(short):
        v = at(minl, full(short))[0]
        return v + sum(incl(c) for c in TREE.get(short, []))

    hot, cold = at(msym, full("hot_leaf"))[0], at(msym, full("cold_leaf"))[0]
    lines = header(args, "cpu", target) + [
        f"# Denominator of every share: instructions executed at PCs inside kernel-{args.arch}.elf's",
        "# .text during the whole run (boot, CPU phase, alloc phase at the default alloc_rounds, exit).",
        "# Counts are linear in rounds: count(R) = fixed + per_round * R, exactly, so a test",
        "# may run fewer rounds and compute its own expected shares from these.",
        f"kernel_insns = {total}",
        f"kernel_insns_per_round = {per_round}",
        f"kernel_insns_fixed = {fixed_total}  # boot + alloc phase + exit",
        f"firmware_insns_approx = {other}  # outside .text (riscv64: QEMU's reset vector)",
        f"hot_cold_ratio = {hot / cold:.4f}  # self instructions hot_leaf / cold_leaf (10x the iterations)",
        "# self_share: symbol-table attribution (inlined code counts in its caller);",
        "# self_share_inline: DWARF inline attribution (mix_inlined apart from blend);",
        "# total_share: self plus callees in the static call tree (inline view).",
        "# per_round / fixed: self instructions, symbol view; *_inline: inline view.",
        ""]
    for short in FUNCS:
        name = full(short)
        s, spr, sfx = at(msym, name)
        i, ipr, ifx = at(minl, name)
        lines += ["[[cpu.function]]", f'name = "{short}"', f'symbol = "{name}"',
                  f"self_share = {s / total:.5f}", f"self_share_inline = {i / total:.5f}",
                  f"total_share = {incl(short) / total:.5f}",
                  f"per_round = {spr}", f"fixed = {sfx}",
                  f"per_round_inline = {ipr}", f"fixed_inline = {ifx}", ""]
        print(f"{name:36s} self {s / total:.4f}  inline {i / total:.4f}  total "
              f"{incl(short) / total:.4f}  ({spr} per round; inline {ipr})")
    print(f"kernel instructions at rounds={target}: {total} ({per_round} per round, "
          f"{fixed_total} fixed); outside .text ~{other}; hot/cold {hot / cold:.4f}")
    emit(args, "cpu", lines)


def main_smp(args):
    target = args.target_rounds or default_rounds("DEFAULT_SMP_ROUNDS")
    ranges = [shares.text_range(args.elf)]
    r1, r2 = args.rounds
    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring smp=on rounds={r} under -smp {args.smp} ...", file=sys.stderr)
        per_cpu = run_counted(args, r, "smp=on", smp=args.smp)
        runs[r] = {}
        for cpu in range(args.smp):
            _, inl, other = attribute(per_cpu.get(cpu, {}), args.elf, ranges)
            inl[TOTAL] = sum(inl.values())
            inl["(other)"] = other
            runs[r][cpu] = inl
    models = {cpu: linear({r: runs[r][cpu] for r in (r1, r2)}, r1, r2) for cpu in range(args.smp)}
    if args.check:
        for cpu in range(args.smp):
            # The boot CPU's total holds its wait for the others (riscv64: wfi wake-ups;
            # aarch64: a wfe loop, wfe being a yield under TCG): checked loosely.
            slack_total = 200_000 if cpu == 0 else SLACK
            check_linear(models[cpu], r1, runs[args.check][cpu], args.check, SMP_FUNCS, SLACK,
                         f"cpu {cpu}")
            check_linear(models[cpu], r1, runs[args.check][cpu], args.check, [TOTAL],
                         slack_total, f"cpu {cpu} total")
        print(f"linear model checked at rounds={args.check}", file=sys.stderr)

    def at(m, k):
        a, b = m.get(k, (0, 0))
        return a + b * (target - r1), b, a - b * r1

    lines = header(args, "smp", target) + [
        f"vcpus = {args.smp}  # measured under -smp {args.smp} (CPU n = vCPU n)",
        f"# Per vCPU, the denominator of its shares: the instructions it executed at PCs in",
        f"# kernel-{args.arch}.elf's .text. Counts are linear in rounds (fixed + per_round * R);",
        "# vCPU 0's fixed part varies (its wait for the others).",
        "# Shares are DWARF inline-view self counts (the leaves have no inlined code).",
        ""]
    for cpu in range(args.smp):
        m = models[cpu]
        total, tpr, tfix = at(m, TOTAL)
        own = f"{SMP}cpu_work_{min(cpu, 3)}"
        o, opr, ofix = at(m, own)
        sh, spr, sfix = at(m, SMP + "smp_shared")
        oth = round((runs[r1][cpu]["(other)"] + runs[r2][cpu]["(other)"]) / 2)
        lines += ["[[smp.cpu]]", f"cpu = {cpu}", f'own = "{own}"',
                  f"kernel_insns = {total}", f"kernel_insns_per_round = {tpr}",
                  f"kernel_insns_fixed = {tfix}",
                  f"own_share = {o / total:.5f}", f"own_per_round = {opr}", f"own_fixed = {ofix}",
                  f"shared_share = {sh / total:.5f}", f"shared_per_round = {spr}",
                  f"shared_fixed = {sfix}",
                  f"other_insns_approx = {oth}  # outside .text (riscv64: QEMU's reset vector)", ""]
        print(f"cpu {cpu}: {own} {o / total:.4f}, smp_shared {sh / total:.4f}, "
              f"kernel instructions {total} ({tpr} per round)")
    emit(args, "smp", lines)


def main_user(args):
    target = args.target_rounds or default_rounds("DEFAULT_USER_ROUNDS")
    kranges = [shares.text_range(args.elf)]
    uranges = [shares.text_range(args.user_elf)]
    kbin, ubin = os.path.basename(args.elf), os.path.basename(args.user_elf)
    funcs = [(ubin, "user::user_hot"), (ubin, "user::user_cold"), (ubin, "user::round"),
             (ubin, "user::run"), (ubin, "user::syscall"), (ubin, "user_main"),
             (kbin, SYSCALL_ENTRY[args.arch]), (kbin, "kernel::user::syscall_dispatch"),
             (kbin, "kernel::user::sys_work")]
    r1, r2 = args.rounds
    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring user=on rounds={r} ...", file=sys.stderr)
        counts = merged(run_counted(args, r, "user=on"))
        _, kinl, outside = attribute(counts, args.elf, kranges)
        ucounts = {pc: n for pc, n in counts.items() if shares.in_ranges(uranges, pc)}
        _, uinl, _ = attribute(ucounts, args.user_elf, uranges)
        d = {(kbin, k): v for k, v in kinl.items()}
        d.update({(ubin, k): v for k, v in uinl.items()})
        d["user"] = sum(uinl.values())
        d["kernel"] = sum(kinl.values())
        d["firmware"] = outside - d["user"]
        runs[r] = d
    m = linear(runs, r1, r2)
    if args.check:
        check_linear(m, r1, runs[args.check], args.check, funcs + ["user", "kernel"], SLACK,
                     "user=on")
        print(f"linear model checked at rounds={args.check}", file=sys.stderr)

    def at(k):
        a, b = m.get(k, (0, 0))
        return a + b * (target - r1), b, a - b * r1

    user, upr, ufix = at("user")
    kern, kpr, kfix = at("kernel")
    fw = round((runs[r1]["firmware"] + runs[r2]["firmware"]) / 2)
    both = user + kern
    lines = header(args, "user", target) + [
        f"# Instructions of the whole `user=on` run (-smp 1) by where their PC lies: in",
        f"# {ubin}'s .text (the user-mode program), in {kbin}'s .text (boot, system",
        "# calls, alloc phase, exit), elsewhere (riscv64: QEMU's reset vector).",
        "# Counts are linear in rounds: count(R) = fixed + per_round * R.",
        f"user_insns = {user}", f"user_insns_per_round = {upr}", f"user_insns_fixed = {ufix}",
        f"kernel_insns = {kern}", f"kernel_insns_per_round = {kpr}",
        f"kernel_insns_fixed = {kfix}",
        f"firmware_insns_approx = {fw}",
        "# The kernel/user split by privilege: user / (user + kernel + outside).",
        f"user_share_all = {user / (both + fw):.5f}",
        "# The denominator of the shares below: user / (user + kernel).",
        f"user_share = {user / both:.5f}",
        "# self_share: self instructions / (user_insns + kernel_insns), DWARF inline view.",
        ""]
    for binary, name in funcs:
        n, pr, fx = at((binary, name))
        lines += ["[[user.function]]", f'symbol = "{name}"', f'binary = "{binary}"',
                  f"self_share = {n / both:.5f}", f"per_round = {pr}", f"fixed = {fx}", ""]
        print(f"{binary:20s} {name:32s} {n / both:.4f}  ({pr} per round, {fx} fixed)")
    print(f"user {user} kernel {kern} outside ~{fw}: user share {user / both:.4f}")
    emit(args, "user", lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=ARCHES, required=True)
    ap.add_argument("--mode", choices=["cpu", "smp", "user"], default="cpu")
    ap.add_argument("--elf")
    ap.add_argument("--user-elf")
    ap.add_argument("--qemu")
    ap.add_argument("--smp", type=int, default=4, help="vCPUs for --mode smp (default 4)")
    shares.add_common_args(ap)
    args = ap.parse_args()
    args.elf = args.elf or os.path.join(ROOT, f"target/examples/kernel-{args.arch}.elf")
    args.user_elf = args.user_elf or os.path.join(ROOT, f"target/examples/user-{args.arch}.elf")
    args.qemu = args.qemu or os.environ.get("QEMU", f"qemu-system-{args.arch}")
    {"cpu": main_cpu, "smp": main_smp, "user": main_user}[args.mode](args)


if __name__ == "__main__":
    main()
