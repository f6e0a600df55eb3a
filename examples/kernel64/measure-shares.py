#!/usr/bin/env python3
"""Measure the x86_64 example kernel's exact per-function instruction counts and shares.

    examples/kernel64/measure-shares.py [--elf target/examples/kernel64.elf] [--rounds 10 30]
                                        [--check 20] [--target-rounds N] [--write expected.toml]

The i386 kernel's examples/kernel/measure-shares.py with the x86_64 QEMU, the `kernel64::`
prefix, the `.boot` and `.text` ranges and no COM2; the machinery is examples/common/shares.py.

How: QEMU logs every executed instruction with its PC when each translation block holds one
instruction and blocks are not chained (`-accel tcg,one-insn-per-tb=on -d exec,nochain`).
The log streams through a FIFO (it is large: millions of lines of firmware alone) and every
PC is attributed twice:
  - by the ELF symbol table (`nm`): inlined code counts in the function it was inlined
    into, as a symbol-based profiler sees it ("self_share");
  - by DWARF inline info (`addr2line -i`, innermost frame): `mix_inlined`'s instructions
    count for it and not for `blend` ("self_share_inline").
Counts are exactly linear in `rounds` (the workload is deterministic), so two small runs
give count(R) = a + b*R per function, a third run checks the model (to within a few
instructions of QEMU logging noise), and the shares are computed for --target-rounds
(default: the kernel's DEFAULT_ROUNDS). Not linear: COM1 echoes the command line, so kmain's
count grows by a few dozen instructions per digit of `rounds` (and with the ELF path's
length): a few hundred instructions in 1e9, ignored.

Denominator: instructions executed at PCs inside the kernel image's executable sections:
`.boot` (the 32-bit bootstrap at 1 MiB) and `.text` (the higher half), from boot32 to the
isa-debug-exit write. Firmware instructions (SeaBIOS, QEMU's multiboot option ROM) are
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

# The workload's functions (demangled, without hash): shares.FUNCS, shares.TREE.
WORKLOAD = "kernel64::workload::"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elf", default=os.path.join(ROOT, "target/examples/kernel64.elf"))
    ap.add_argument("--qemu", default=os.environ.get("QEMU", "qemu-system-x86_64"))
    shares.add_common_args(ap)
    args = ap.parse_args()
    shares.measure_cpu(
        args,
        lambda r: shares.run_counted("x86_64", args.qemu, args.elf, r),
        shares.code_ranges(args.elf),
        WORKLOAD,
        args.target_rounds or shares.default_rounds(HERE),
        "examples/kernel64/measure-shares.py",
        ["# Denominator of every share: instructions executed at PCs inside kernel64.elf's",
         "# executable sections (.boot: 32-bit bootstrap; .text: higher half) during the whole",
         "# run (boot, CPU phase, alloc phase at the default alloc_rounds, exit)."],
        "boot + alloc phase + exit",
    )


if __name__ == "__main__":
    main()
