//! Where arm64 Linux keeps the task its entry from user mode runs as: the per-CPU
//! `__entry_task`. In user mode `sp_el0` is the program's stack pointer, and `current` is that
//! slot. Its link address is a data symbol, which kallsyms lists only with
//! `CONFIG_KALLSYMS_ALL` (Debian's arm64 kernels list text symbols alone), so it is also read
//! from the entry code that uses it, `kernel_entry 0`'s
//!
//! ```text
//! adrp x28, __entry_task            // ldr_this_cpu tsk, __entry_task, x20
//! add  x28, x28, :lo12:__entry_task
//! mrs  x20, tpidr_el1               // (tpidr_el2 under VHE, patched at boot)
//! ldr  x28, [x28, x20]
//! msr  sp_el0, x28
//! ```
//!
//! in the handlers of an exception from EL0 (`el0t_64_sync` from 5.15, `el0_sync` before).

/// Handlers of an exception from EL0 whose first instructions are `kernel_entry 0`.
const HANDLERS: [&str; 4] = ["el0t_64_sync", "el0t_64_irq", "el0_sync", "el0_irq"];

/// Instructions read from a handler's start: `kernel_entry` saves the registers first (some
/// 40 instructions, more with its alternatives).
const MAX_INSNS: usize = 256;

/// The link address of `__entry_task`: kallsyms' symbol, else the one the entry code loads
/// `sp_el0` from. `address_of` gives a symbol's address; `code(address, len)` the image's
/// bytes there (fewer at its end).
pub fn entry_task<'a>(
    address_of: impl Fn(&str) -> Option<u64>,
    code: impl Fn(u64, usize) -> Option<&'a [u8]>,
) -> Option<u64> {
    if let Some(a) = address_of("__entry_task") {
        return Some(a);
    }
    HANDLERS.iter().find_map(|h| {
        let at = address_of(h)?;
        let bytes = code(at, 4 * MAX_INSNS)?;
        loaded_into_sp_el0(at, bytes)
    })
}

/// The per-CPU symbol whose slot `bytes` (code at `pc`) loads into `sp_el0`, following the
/// `adrp`/`add` of its address and the `mrs` of the per-CPU offset into an `ldr`.
fn loaded_into_sp_el0(pc: u64, bytes: &[u8]) -> Option<u64> {
    // Per register: an address built by adrp (and add), a per-CPU offset, a slot's value.
    #[derive(Clone, Copy)]
    enum Held {
        Nothing,
        Address(u64),
        PerCpuOffset,
        Slot(u64),
    }
    let mut regs = [Held::Nothing; 32];
    for (i, word) in bytes.chunks_exact(4).enumerate() {
        let insn = u32::from_le_bytes(word.try_into().ok()?);
        let at = pc.wrapping_add(4 * i as u64);
        let rd = (insn & 31) as usize;
        let rn = ((insn >> 5) & 31) as usize;
        let rm = ((insn >> 16) & 31) as usize;
        if insn & 0x9f00_0000 == 0x9000_0000 {
            // adrp: a 21-bit signed page offset from this instruction's page.
            let imm = (((insn >> 5) & 0x7_ffff) << 2 | (insn >> 29) & 3) as u64;
            let offset = ((imm << 43) as i64 >> 31) as u64;
            regs[rd] = Held::Address((at & !0xfff).wrapping_add(offset));
        } else if insn & 0xffc0_0000 == 0x9100_0000 {
            // add xd, xn, #imm12 (64-bit, unshifted).
            regs[rd] = match regs[rn] {
                Held::Address(a) => Held::Address(a.wrapping_add(u64::from((insn >> 10) & 0xfff))),
                _ => Held::Nothing,
            };
        } else if insn & !31 == 0xd538_d080 || insn & !31 == 0xd53c_d040 {
            // mrs xt, tpidr_el1 / tpidr_el2.
            regs[rd] = Held::PerCpuOffset;
        } else if insn & 0xffe0_fc00 == 0xf860_6800 {
            // ldr xt, [xn, xm]
            regs[rd] = match (regs[rn], regs[rm]) {
                (Held::Address(a), Held::PerCpuOffset) | (Held::PerCpuOffset, Held::Address(a)) => {
                    Held::Slot(a)
                }
                _ => Held::Nothing,
            };
        } else if insn & !31 == 0xd518_4100 {
            // msr sp_el0, xt
            return match regs[rd] {
                Held::Slot(a) => Some(a),
                _ => None,
            };
        } else if rd < 31 && writes_rd(insn) {
            regs[rd] = Held::Nothing;
        }
    }
    None
}

/// Whether `insn` may write its Rd field's register: anything but stores, branches and
/// system instructions other than `mrs` (a guess on the safe side: a register forgotten
/// only ends the match).
fn writes_rd(insn: u32) -> bool {
    let op0 = (insn >> 25) & 0xf;
    let store = op0 & 0b0101 == 0b0100 && (insn >> 22) & 1 == 0;
    let mrs = insn & 0xfff0_0000 == 0xd530_0000;
    let branch_or_system = op0 & 0b1110 == 0b1010;
    !store && (mrs || !branch_or_system)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PC: u64 = 0xffff_8000_0801_1800;

    fn code(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// `adrp x28, PAGE; add x28, x28, #LO` for a target `page + lo` from `PC`.
    fn adr_l(target: u64) -> [u32; 2] {
        let pages = ((target & !0xfff).wrapping_sub(PC & !0xfff) as i64) >> 12;
        let imm = (pages as u32) & 0x1f_ffff;
        let adrp = 0x9000_0000 | (imm & 3) << 29 | (imm >> 2) << 5 | 28;
        let add = 0x9100_0000 | ((target & 0xfff) as u32) << 10 | 28 << 5 | 28;
        [adrp, add]
    }

    /// Debian 6.1's `kernel_entry 0` tail: `mrs x21, sp_el0`, the per-CPU load, `msr`.
    fn entry(target: u64) -> Vec<u32> {
        let [adrp, add] = adr_l(target);
        vec![
            0xd538_4115, // mrs x21, sp_el0
            adrp,
            add,
            0xd538_d094,                           // mrs x20, tpidr_el1
            0xf860_6800 | 20 << 16 | 28 << 5 | 28, // ldr x28, [x28, x20]
            0xd518_4100 | 28,                      // msr sp_el0, x28
        ]
    }

    #[test]
    fn the_slot_loaded_into_sp_el0_is_found_below_and_above_the_code() {
        for target in [0xffff_8000_0a2d_7b48, PC - 0x10_0000 + 0x18, PC + 0x44_3210] {
            let mut words = vec![0xa900_07e0, 0xaa1f_03e0]; // stp x0, x1, [sp]; mov x0, xzr
            words.extend(entry(target));
            assert_eq!(loaded_into_sp_el0(PC, &code(&words)), Some(target));
        }
    }

    #[test]
    fn a_broken_chain_finds_nothing() {
        let target = 0xffff_8000_0a2d_7b48;
        let mut words = entry(target);
        // x28 overwritten (mov x28, x0) between the add and the load.
        words.insert(3, 0xaa00_03fc);
        assert_eq!(loaded_into_sp_el0(PC, &code(&words)), None);
        // No per-CPU offset: ldr from x21 instead of x20.
        let mut words = entry(target);
        words[4] = 0xf860_6800 | 21 << 16 | 28 << 5 | 28;
        assert_eq!(loaded_into_sp_el0(PC, &code(&words)), None);
        // Short or empty code.
        assert_eq!(loaded_into_sp_el0(PC, &[0xd5, 0x18]), None);
        assert_eq!(loaded_into_sp_el0(PC, &[]), None);
    }

    #[test]
    fn kallsyms_symbol_first_then_the_handlers_code() {
        let target = 0xffff_8000_0a2d_7b48;
        let bytes = code(&entry(target));
        let symbols = |name: &str| match name {
            "el0t_64_sync" => Some(PC),
            _ => None,
        };
        let at_pc = |a: u64, n: usize| (a == PC).then(|| &bytes[..n.min(bytes.len())]);
        assert_eq!(entry_task(symbols, at_pc), Some(target));
        let listed = |name: &str| (name == "__entry_task").then_some(0x1234);
        assert_eq!(entry_task(listed, at_pc), Some(0x1234));
        assert_eq!(entry_task(|_| None, at_pc), None);
    }
}
