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
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "examples", "common"))
import shares  # noqa: E402
from shares import SLACK, attribute, check_linear, linear, run_counted, write_block  # noqa: E402

# The workload's functions (demangled, without hash): shares.FUNCS, shares.TREE.
WORKLOAD = "kernel::workload::"


def text_ranges(elf):
    """The code the shares' denominators count: the ELF's .text."""
    return [shares.text_range(elf)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elf", default=os.path.join(ROOT, "target/examples/kernel.elf"))
    ap.add_argument("--qemu", default=os.environ.get("QEMU", "qemu-system-i386"))
    shares.add_common_args(ap)
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
    shares.measure_cpu(
        args,
        lambda r: run_counted("i386", args.qemu, args.elf, r, qemu_args=COM2_NULL),
        text_ranges(args.elf),
        WORKLOAD,
        args.target_rounds or shares.default_rounds(HERE),
        "examples/kernel/measure-shares.py",
        ["# Denominator of every share: instructions executed at PCs inside kernel.elf's .text",
         "# during the whole run (boot, CPU phase, alloc phase at the default alloc_rounds, exit)."],
        "boot + alloc phase + exit",
    )


# COM2 (the memtrace) goes nowhere.
COM2_NULL = ["-serial", "null"]


SMP = "kernel::smp::"
SMP_FUNCS = [SMP + f for f in ["smp_run", "smp_round", "cpu_work_0", "cpu_work_1",
                               "cpu_work_2", "cpu_work_3", "smp_shared"]]
TOTAL = "(kernel .text)"


def main_smp(args):
    """`smp=on` under -smp N: per vCPU, the instructions at PCs in kernel.elf's .text and
    the self counts of the workload's functions (DWARF inline view)."""
    target = args.target_rounds or shares.default_rounds(HERE, "DEFAULT_SMP_ROUNDS")
    ranges = text_ranges(args.elf)
    r1, r2 = args.rounds
    runs = {}  # rounds -> cpu -> name -> count
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring smp=on rounds={r} under -smp {args.smp} ...", file=sys.stderr)
        per_cpu = run_counted("i386", args.qemu, args.elf, r, "smp=on", smp=args.smp, qemu_args=COM2_NULL)
        runs[r] = {}
        for cpu in range(args.smp):
            _, inl, other = attribute(per_cpu.get(cpu, {}), args.elf, ranges)
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
    target = args.target_rounds or shares.default_rounds(HERE, "DEFAULT_USER_ROUNDS")
    kranges = text_ranges(args.elf)
    uranges = text_ranges(args.user_elf)
    r1, r2 = args.rounds
    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring user=on rounds={r} ...", file=sys.stderr)
        counts = run_counted("i386", args.qemu, args.elf, r, "user=on", qemu_args=COM2_NULL)
        _, kinl, outside = attribute(counts, args.elf, kranges)
        ucounts = {pc: n for pc, n in counts.items() if shares.in_ranges(uranges, pc)}
        _, uinl, _ = attribute(ucounts, args.user_elf, uranges)
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
