"""The measuring machinery of examples/common/measure-shares.py (all four example kernels):
QEMU's exec log streamed through a FIFO, PCs attributed by symbol table and DWARF inline
info, the linear model count(R) = fixed + per_round * R, the [cpu] TOML block.
"""
import bisect
import os
import re
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                                "guests"))
from kernel_command import qemu_command  # noqa: E402

# Both kernels' workloads: functions (short names) and their static call tree.
TREE = {
    "kmain": ["run_workload"],
    "run_workload": ["stage_outer"],
    "stage_outer": ["stage_middle", "cold_leaf", "recurse", "blend"],
    "stage_middle": ["hot_leaf"],
    "blend": ["mix_inlined"],
}
FUNCS = ["run_workload", "stage_outer", "stage_middle", "hot_leaf", "cold_leaf", "recurse",
         "blend", "mix_inlined"]
# Largest difference (instructions per function) the linearity check tolerates.
SLACK = 8


def default_rounds(name="DEFAULT_ROUNDS"):
    """The u32 constant `name` of the kernels' command line (kernel-common/src/config.rs)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernel-common", "src",
                        "config.rs")
    return int(re.search(name + r": u32 = ([0-9_]+);", open(path).read()).group(1).replace("_", ""))


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
    """(lo, hi) of the ELF's .text."""
    out = subprocess.run(["readelf", "-SW", elf], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\.text\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", out)
    lo = int(m.group(1), 16)
    return lo, lo + int(m.group(2), 16)


def code_ranges(elf):
    """[(lo, hi)] of the ELF's allocated executable sections."""
    out = subprocess.run(["readelf", "-SW", elf], check=True, capture_output=True, text=True).stdout
    ranges = []
    for m in re.finditer(r"\]\s+(\S+)\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+"
                         r"[0-9a-f]+\s+(\S*)", out):
        if "A" in m.group(4) and "X" in m.group(4):
            lo = int(m.group(2), 16)
            ranges.append((lo, lo + int(m.group(3), 16)))
    if not ranges:
        sys.exit(f"{elf}: no executable section")
    return ranges


def in_ranges(ranges, pc):
    return any(lo <= pc < hi for lo, hi in ranges)


def run_counted(arch, qemu, elf, rounds, append="", smp=1, qemu_args=(), success=33):
    """vCPU -> (PC -> executions) for one boot of `arch`'s kernel with rounds=R, via a FIFO
    log; QEMU must exit with `success`. `qemu_args` go after the console's `-serial` (and
    the PCs' exit device: scripts/guests/run-kernel.sh's command line)."""
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
    cmd = qemu_command(arch, "--kernel", elf, "--com1", os.path.join(tmp, "com1.txt"),
                       "--memtrace", "none", *qemu_args,
                       "-append", f"{append} rounds={rounds}".strip(),
                       "-accel", accel, "-d", "exec,nochain", "-D", fifo, qemu=qemu)
    if smp > 1:
        cmd += ["-smp", str(smp)]
    rc = subprocess.run(cmd).returncode
    t.join()
    com1 = open(os.path.join(tmp, "com1.txt"), errors="replace").read()
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    os.rmdir(tmp)
    if rc != success or not com1.rstrip().endswith("done"):
        sys.exit(f"rounds={rounds}: QEMU exited {rc} (want {success}); console:\n{com1}")
    return per_cpu


def merged(per_cpu):
    """PC -> executions of all vCPUs."""
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


def attribute(counts, elf, ranges):
    """(symbol -> count, DWARF innermost function -> count, count outside `ranges`)."""
    addrs, names = text_symbols(elf)
    by_sym, firmware = {}, 0
    kernel_pcs = [pc for pc in counts if in_ranges(ranges, pc)]
    inl = inline_names(elf, kernel_pcs)
    by_inline = {}
    for pc, n in counts.items():
        if not in_ranges(ranges, pc):
            firmware += n
            continue
        sym = names[bisect.bisect_right(addrs, pc) - 1]
        by_sym[sym] = by_sym.get(sym, 0) + n
        fn = inl.get(pc, "??")
        if fn == "??":
            fn = sym  # hand-written assembly has no DWARF
        by_inline[fn] = by_inline.get(fn, 0) + n
    return by_sym, by_inline, firmware


def linear(runs, r1, r2):
    """{name: (count at r1, per-round slope)} from {rounds: {name: count}}."""
    # Each round runs the same instructions: the per-round slope is an integer, and
    # rounding it removes the logging noise that extrapolation would multiply.
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


def write_block(path, tag, toml, append=True):
    """Replaces FILE's "# BEGIN measured-TAG" ... "# END measured-TAG" block with `toml`;
    without one, appends it (or fails, when not `append`)."""
    text = open(path).read()
    pat = rf"# BEGIN measured-{tag}.*?# END measured-{tag}\n"
    if re.search(pat, text, flags=re.S):
        new = re.sub(pat, lambda _: toml, text, flags=re.S)
    elif append:
        new = text.rstrip("\n") + "\n\n" + toml
    else:
        sys.exit(f"{path}: no '# BEGIN measured-{tag}' ... '# END measured-{tag}' block")
    open(path, "w").write(new)
    print(f"updated {path}", file=sys.stderr)


def add_common_args(ap):
    ap.add_argument("--rounds", type=int, nargs=2, default=[10, 30], metavar=("R1", "R2"))
    ap.add_argument("--check", type=int, default=20, metavar="R3",
                    help="a third run that the linear model must predict exactly (0: skip)")
    ap.add_argument("--target-rounds", type=int, default=None)
    ap.add_argument("--write", metavar="TOML")


def measure_cpu(args, run, ranges, workload, target, script, denominator, fixed_what, excluded,
                firmware_what):
    """The default run's [cpu] block: `run(rounds)` boots the kernel and gives PC ->
    executions, `ranges` are the kernel's code, `workload` the workload functions' prefix
    ("kernel::workload::"), `script` the command for the BEGIN line; `denominator` are the
    TOML's comment lines on what is counted, `fixed_what` what the fixed part holds,
    `excluded` a comment line on what is not counted (or None), `firmware_what` the comment
    of firmware_insns_approx."""
    def full(short):
        return short if short == "kmain" else workload + short

    runs = {}
    for r in args.rounds + ([args.check] if args.check else []):
        print(f"measuring rounds={r} ...", file=sys.stderr)
        runs[r] = attribute(run(r), args.elf, ranges)

    r1, r2 = args.rounds
    (s1, i1, fw1), (s2, i2, fw2) = runs[r1], runs[r2]

    def at(m, r):
        return {k: a + b * (r - r1) for k, (a, b) in m.items()}

    msym, minl = linear({r1: s1, r2: s2}, r1, r2), linear({r1: i1, r2: i2}, r1, r2)
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

    lines = [f"# BEGIN measured-cpu ({script} --write; do not edit by hand)",
             "[cpu]",
             f"rounds = {target}",
             *denominator,
             *([excluded] if excluded else []),
             "# Counts are linear in rounds: count(R) = fixed + per_round * R, exactly, so a test",
             "# may run fewer rounds and compute its own expected shares from these.",
             f"kernel_insns = {round(total)}",
             f"kernel_insns_per_round = {per_round}",
             f"kernel_insns_fixed = {round(fixed_total)}  # {fixed_what}",
             f"firmware_insns_approx = {round((fw1 + fw2) / 2)}  # {firmware_what}",
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
        write_block(args.write, "cpu", toml, append=False)
    else:
        print(toml)
