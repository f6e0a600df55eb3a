#!/usr/bin/env python3
"""Measure an example kernel's exact per-function instruction counts and shares.

    examples/common/measure-shares.py [--arch i386|x86_64|riscv64|aarch64] [--mode cpu|smp|user]
        [--elf ELF] [--user-elf ELF] [--rounds 10 30] [--check 20] [--target-rounds N]
        [--smp 4] [--write examples/KERNEL/expected.toml]

One script for the four kernels (i386: examples/kernel, x86_64: examples/kernel64,
riscv64 and aarch64: examples/kernel-ARCH); the machinery is shares.py beside it.

--mode cpu (the default) measures the default run into the [cpu] block; --mode smp runs
`smp=on` under -smp N (single-threaded TCG, so that the exec log's "Stopped execution"
lines, which name no vCPU, follow their vCPU's block) and writes per-vCPU counts into
[smp]; --mode user runs `user=on` and splits PCs between the user program's .text, the
kernel's .text and the rest (firmware) into [user]. x86_64 has the cpu and user modes.

How: QEMU logs every executed instruction with its PC when each translation block holds one
instruction and blocks are not chained (`-accel tcg,one-insn-per-tb=on -d exec,nochain`).
The log streams through a FIFO (it is large: ~6.5 M lines of the PC firmware alone) and
every PC is attributed twice:
  - by the ELF symbol table (`nm`): inlined code counts in the function it was inlined
    into, as a symbol-based profiler sees it ("self_share");
  - by DWARF inline info (`addr2line -i`, innermost frame): `mix_inlined`'s instructions
    count for it and not for `blend` ("self_share_inline").
Counts are exactly linear in `rounds` (the workload is deterministic), so two small runs
give count(R) = a + b*R per function, a third run checks the model (to within a few
instructions of QEMU logging noise), and the shares are computed for --target-rounds
(default: the kernels' default for the mode, examples/kernel-common/src/config.rs). The
allocation phase runs at the default alloc_rounds in every run. Not linear: the console
echoes the command line, so kmain's count grows by a few dozen instructions per digit of
`rounds` (and with the ELF path's length): a few hundred instructions in 1e9, ignored.

Denominator: instructions executed at PCs inside the kernel image's code (i386, riscv64,
aarch64: .text; x86_64: .boot, the 32-bit bootstrap, and .text, the higher half). What
runs elsewhere (the PCs' firmware: SeaBIOS, QEMU's multiboot option ROM; riscv64: QEMU's
reset vector) is excluded and reported apart; the firmware's count varies a little from run
to run. No memtrace is written during a measurement.

--write FILE replaces the block between "# BEGIN measured-MODE" and "# END measured-MODE"
in FILE with the freshly measured TOML (the cpu block must be there; the others are
appended when missing).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import shares  # noqa: E402
from shares import SLACK, attribute, check_linear, linear, write_block  # noqa: E402

SMP = "kernel::smp::"
SMP_FUNCS = [SMP + f for f in ["smp_run", "smp_round", "cpu_work_0", "cpu_work_1",
                               "cpu_work_2", "cpu_work_3", "smp_shared"]]
TOTAL = "(kernel .text)"


class Kernel:
    """What differs between the kernels for the measurement."""

    def __init__(self, arch, elf, user_elf, workload, success, qemu_args=(), code="text",
                 syscall_entry=None, smp_slack=0, outside="", cpu_ids="", pc=True):
        self.arch, self.elf, self.user_elf, self.workload = arch, elf, user_elf, workload
        # QEMU's exit status for a run that went well.
        self.success = success
        self.qemu_args = list(qemu_args)
        # "text": .text alone; "exec": every executable section (x86_64's .boot too).
        self.code = code
        # The system-call entry, between the user program and syscall_dispatch.
        self.syscall_entry = syscall_entry
        # The boot CPU's total holds its wait for the others: checked this loosely.
        self.smp_slack = smp_slack
        # What runs outside the kernel's code, for the TOML's comments.
        self.outside = outside
        self.cpu_ids = cpu_ids
        # A PC (firmware, multiboot loader) rather than a virt board.
        self.pc = pc

    def ranges(self, elf):
        if self.code == "exec":
            return shares.code_ranges(elf)
        return [shares.text_range(elf)]


KERNELS = {
    # COM2 (the memtrace) goes nowhere.
    "i386": Kernel("i386", "kernel.elf", "user.elf", "kernel::workload::", 33,
                   qemu_args=["-serial", "null"], syscall_entry="syscall_entry",
                   smp_slack=20_000, cpu_ids="CPU n = APIC ID n = vCPU n"),
    "x86_64": Kernel("x86_64", "kernel64.elf", "user-x86_64.elf", "kernel64::workload::", 33,
                     code="exec", syscall_entry="syscall_entry"),
    # The boot CPU's wait: riscv64 wfi wake-ups; aarch64 a wfe loop, wfe being a yield under
    # TCG.
    "riscv64": Kernel("riscv64", "kernel-riscv64.elf", "user-riscv64.elf", "kernel::workload::", 0,
                      syscall_entry="trap_vector", smp_slack=200_000,
                      outside="riscv64: QEMU's reset vector", cpu_ids="CPU n = vCPU n", pc=False),
    "aarch64": Kernel("aarch64", "kernel-aarch64.elf", "user-aarch64.elf", "kernel::workload::", 0,
                      syscall_entry="svc_entry", smp_slack=200_000,
                      outside="riscv64: QEMU's reset vector", cpu_ids="CPU n = vCPU n", pc=False),
}


def script(k, mode):
    """The command that writes a block, for its BEGIN line."""
    arch = "" if k.arch == "i386" else f" --arch {k.arch}"
    m = "" if mode == "cpu" else f" --mode {mode}"
    return f"examples/common/measure-shares.py{arch}{m}"


def run(args, k, rounds, append="", smp=1):
    return shares.run_counted(k.arch, args.qemu, args.elf, rounds, append, smp, k.qemu_args, k.success)


def main_cpu(args, k):
    name = os.path.basename(args.elf)
    run_what = "run (boot, CPU phase, alloc phase at the default alloc_rounds, exit)."
    if k.code == "exec":
        denominator = [f"# Denominator of every share: instructions executed at PCs inside {name}'s",
                       "# executable sections (.boot: 32-bit bootstrap; .text: higher half) during the whole",
                       f"# {run_what}"]
    elif k.pc:
        denominator = [f"# Denominator of every share: instructions executed at PCs inside {name}'s .text",
                       f"# during the whole {run_what}"]
    else:
        denominator = [f"# Denominator of every share: instructions executed at PCs inside {name}'s",
                       f"# .text during the whole {run_what}"]
    shares.measure_cpu(
        args,
        lambda r: shares.merged(run(args, k, r)),
        k.ranges(args.elf),
        k.workload,
        args.target_rounds or shares.default_rounds("DEFAULT_ROUNDS"),
        script(k, "cpu"),
        denominator,
        "boot + alloc phase + exit",
        ("# Firmware (SeaBIOS, multiboot option ROM) is excluded: see firmware_insns_approx."
         if k.pc else None),
        "varies a little run to run" if k.pc else f"outside .text ({k.outside})",
    )


def main_smp(args, k):
    """`smp=on` under -smp N: per vCPU, the instructions at PCs in the kernel's .text and
    the self counts of the workload's functions (DWARF inline view)."""
    target = args.target_rounds or shares.default_rounds("DEFAULT_SMP_ROUNDS")
    ranges = k.ranges(args.elf)
    name = os.path.basename(args.elf)
    r1, r2 = args.rounds
    runs = {}  # rounds -> cpu -> name -> count
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring smp=on rounds={r} under -smp {args.smp} ...", file=sys.stderr)
        per_cpu = run(args, k, r, "smp=on", smp=args.smp)
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
            slack_total = k.smp_slack if cpu == 0 else SLACK
            check_linear(models[cpu], r1, runs[args.check][cpu], args.check, SMP_FUNCS, SLACK,
                         f"cpu {cpu}")
            check_linear(models[cpu], r1, runs[args.check][cpu], args.check, [TOTAL],
                         slack_total, f"cpu {cpu} total")
        print(f"linear model checked at rounds={args.check}", file=sys.stderr)

    def at(m, key):
        a, b = m.get(key, (0, 0))
        return a + b * (target - r1), b, a - b * r1

    if k.pc:
        denominator = ["# Per vCPU, the denominator of its shares: the instructions it executed at PCs in",
                       f"# {name}'s .text (the AP trampoline below 1 MiB and the firmware excluded).",
                       "# Counts are linear in rounds (count(R) = fixed + per_round * R); vCPU 0's fixed part",
                       "# varies a little (its wait for the others: a few instructions a wake-up)."]
        other_what = f"outside {name}'s .text: firmware, trampoline"
    else:
        denominator = ["# Per vCPU, the denominator of its shares: the instructions it executed at PCs in",
                       f"# {name}'s .text. Counts are linear in rounds (fixed + per_round * R);",
                       "# vCPU 0's fixed part varies (its wait for the others)."]
        other_what = f"outside .text ({k.outside})"
    lines = [f"# BEGIN measured-smp ({script(k, 'smp')} --write; do not edit by hand)",
             "[smp]",
             f"rounds = {target}",
             f"vcpus = {args.smp}  # measured under -smp {args.smp} ({k.cpu_ids})",
             *denominator,
             "# Shares are DWARF inline-view self counts (the leaves have no inlined code).",
             ""]
    for cpu in range(args.smp):
        m = models[cpu]
        total, tpr, tfix = at(m, TOTAL)
        own = f"{SMP}cpu_work_{min(cpu, 3)}"
        o, opr, ofix = at(m, own)
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
                  f"  # {other_what}",
                  ""]
        print(f"cpu {cpu}: {own} {o / total:.4f}, smp_shared {sh / total:.4f}, "
              f"kernel instructions {total} ({tpr} per round)")
    emit(args, "smp", lines)


def main_user(args, k):
    """`user=on`: instructions in the user program (its .text), in the kernel (its .text)
    and elsewhere (firmware), and the functions' self counts."""
    target = args.target_rounds or shares.default_rounds("DEFAULT_USER_ROUNDS")
    kranges = k.ranges(args.elf)
    uranges = [shares.text_range(args.user_elf)]
    kbin, ubin = os.path.basename(args.elf), os.path.basename(args.user_elf)
    # The kernel's crate: `kernel` (i386, virt) or `kernel64`.
    kcrate = k.workload.split("::")[0]
    funcs = [(ubin, "user::user_hot"), (ubin, "user::user_cold"), (ubin, "user::round"),
             (ubin, "user::run"), (ubin, "user::syscall"), (ubin, "user_main"),
             (kbin, k.syscall_entry), (kbin, f"{kcrate}::user::syscall_dispatch"),
             (kbin, f"{kcrate}::user::sys_work")]
    r1, r2 = args.rounds
    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring user=on rounds={r} ...", file=sys.stderr)
        counts = shares.merged(run(args, k, r, "user=on"))
        _, kinl, outside = attribute(counts, args.elf, kranges)
        ucounts = {pc: n for pc, n in counts.items() if shares.in_ranges(uranges, pc)}
        _, uinl, _ = attribute(ucounts, args.user_elf, uranges)
        d = {(kbin, name): v for name, v in kinl.items()}
        d.update({(ubin, name): v for name, v in uinl.items()})
        d["user"] = sum(uinl.values())
        d["kernel"] = sum(kinl.values())
        d["firmware"] = outside - d["user"]
        runs[r] = d
    m = linear(runs, r1, r2)
    if args.check:
        check_linear(m, r1, runs[args.check], args.check, funcs + ["user", "kernel"], SLACK,
                     "user=on")
        print(f"linear model checked at rounds={args.check}", file=sys.stderr)

    def at(key):
        a, b = m.get(key, (0, 0))
        return a + b * (target - r1), b, a - b * r1

    user, upr, ufix = at("user")
    kern, kpr, kfix = at("kernel")
    fw = round((runs[r1]["firmware"] + runs[r2]["firmware"]) / 2)
    both = user + kern
    if k.pc:
        where = ["# Instructions of the whole `user=on` run (-smp 1) by where their PC lies: in",
                 f"# {ubin}'s .text (the ring-3 program), in {kbin}'s .text (boot, system calls,",
                 "# alloc phase, exit), elsewhere (firmware: SeaBIOS, the multiboot option ROM)."]
        split = ["# The kernel/user split of samples (the text report's header): firmware runs in",
                 "# ring 0, so it counts as kernel time: user / (user + kernel + firmware).",
                 f"user_share_all = {user / (both + fw):.5f}",
                 "# Without the firmware, the denominator of the shares below: user / (user + kernel)."]
        fw_note = "  # varies a little run to run"
    else:
        where = ["# Instructions of the whole `user=on` run (-smp 1) by where their PC lies: in",
                 f"# {ubin}'s .text (the user-mode program), in {kbin}'s .text (boot, system",
                 f"# calls, alloc phase, exit), elsewhere ({k.outside})."]
        split = ["# The kernel/user split by privilege: user / (user + kernel + outside).",
                 f"user_share_all = {user / (both + fw):.5f}",
                 "# The denominator of the shares below: user / (user + kernel)."]
        fw_note = ""
    lines = [f"# BEGIN measured-user ({script(k, 'user')} --write; do not edit by hand)",
             "[user]",
             f"rounds = {target}",
             *where,
             "# Counts are linear in rounds: count(R) = fixed + per_round * R.",
             f"user_insns = {user}", f"user_insns_per_round = {upr}", f"user_insns_fixed = {ufix}",
             f"kernel_insns = {kern}", f"kernel_insns_per_round = {kpr}",
             f"kernel_insns_fixed = {kfix}",
             f"firmware_insns_approx = {fw}{fw_note}",
             *split,
             f"user_share = {user / both:.5f}",
             "# self_share: self instructions / (user_insns + kernel_insns), DWARF inline view.",
             ""]
    for binary, name in funcs:
        n, pr, fx = at((binary, name))
        lines += ["[[user.function]]", f'symbol = "{name}"', f'binary = "{binary}"',
                  f"self_share = {n / both:.5f}", f"per_round = {pr}", f"fixed = {fx}", ""]
        print(f"{binary:20s} {name:32s} {n / both:.4f}  ({pr} per round, {fx} fixed)")
    print(f"user {user} kernel {kern} outside ~{fw}: user share {user / both:.4f}"
          + (f" ({user / (both + fw):.4f} with firmware)" if k.pc else ""))
    emit(args, "user", lines)


def emit(args, mode, lines):
    lines.append(f"# END measured-{mode}")
    toml = "\n".join(lines) + "\n"
    if args.write:
        write_block(args.write, mode, toml)
    else:
        print(toml)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=list(KERNELS), default="i386")
    ap.add_argument("--mode", choices=["cpu", "smp", "user"], default="cpu",
                    help="cpu: the default run ([cpu]); smp: `smp=on` under -smp --smp "
                         "([smp]); user: `user=on` ([user])")
    ap.add_argument("--elf")
    ap.add_argument("--user-elf")
    ap.add_argument("--qemu")
    ap.add_argument("--smp", type=int, default=4, help="vCPUs for --mode smp (default 4)")
    shares.add_common_args(ap)
    args = ap.parse_args()
    k = KERNELS[args.arch]
    if args.mode != "cpu" and not k.user_elf or args.mode == "smp" and args.arch == "x86_64":
        ap.error(f"--arch {args.arch} has no {args.mode} mode")
    args.elf = args.elf or os.path.join(ROOT, "target/examples", k.elf)
    args.user_elf = args.user_elf or (k.user_elf and os.path.join(ROOT, "target/examples", k.user_elf))
    args.qemu = args.qemu or os.environ.get("QEMU", f"qemu-system-{args.arch}")
    {"cpu": main_cpu, "smp": main_smp, "user": main_user}[args.mode](args, k)


if __name__ == "__main__":
    main()
