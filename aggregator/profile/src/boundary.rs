//! Boundary markers in recorded stacks (common/format/FORMAT.md): where the walk crossed a kernel
//! entry or switched stacks. They become frames named by what the entry code was, judged from
//! the name of the function the walk came from inside it (`entry_SYSCALL_64`,
//! `asm_exc_page_fault`, `asm_common_interrupt`, the example kernels' `syscall_entry`, …).

use kern_profile_format::frame_marker;

/// A kernel entry whose kind the names did not tell.
pub const KERNEL_ENTRY_FRAME: &str = "[kernel entry]";
pub const SYSCALL_FRAME: &str = "[syscall]";
pub const INTERRUPT_FRAME: &str = "[interrupt]";
pub const EXCEPTION_FRAME: &str = "[exception]";
/// A switch of stacks whose reason the names did not tell.
pub const STACK_SWITCH_FRAME: &str = "[stack switch]";

/// Whether `a` is a marker rather than an address (in a file whose header says it may
/// hold markers: [`crate::stacks::KeyBuilder`] clears them from others).
pub fn is_marker(a: u64) -> bool {
    a == frame_marker::KERNEL_ENTRY || a == frame_marker::STACK_SWITCH
}

/// The address to look up for frame `i` of `addrs` (innermost first): the PC as is, a
/// return address at `addr - 1` (inside the call), the instruction after a kernel-entry
/// marker as is (it was interrupted, not called from); `None` for a marker.
pub fn probe(addrs: &[u64], i: usize, first_is_pc: bool) -> Option<u64> {
    let a = *addrs.get(i)?;
    if is_marker(a) {
        return None;
    }
    let exact = (i == 0 && first_is_pc) || (i > 0 && addrs[i - 1] == frame_marker::KERNEL_ENTRY);
    Some(if exact { a } else { a.wrapping_sub(1) })
}

/// Names in entry code that tell a system call: x86's entries, the example kernels'
/// `syscall_entry` and `syscall_dispatch`, riscv64 Linux's `do_trap_ecall_u`, arm64 Linux's
/// `el0_svc`.
const SYSCALL_WORDS: &[&str] = &[
    "syscall",
    "sysenter",
    "int80",
    "system_call",
    "ecall",
    "el0_svc",
];

fn has(names: &[impl AsRef<str>], words: &[&str]) -> bool {
    names.iter().any(|n| {
        let n = n.as_ref().to_ascii_lowercase();
        words.iter().any(|w| n.contains(w))
    })
}

/// The frame name of marker `marker`, given the names at the frame just inside it.
pub fn name(marker: u64, inner: &[impl AsRef<str>]) -> &'static str {
    if has(inner, SYSCALL_WORDS) {
        SYSCALL_FRAME
    } else if has(inner, &["exc_", "fault", "exception", "trap"]) {
        EXCEPTION_FRAME
    } else if has(inner, &["interrupt", "irq", "sysvec", "isr", "timer"]) {
        INTERRUPT_FRAME
    } else {
        unnamed(marker)
    }
}

/// What a marker is called when no name tells.
fn unnamed(marker: u64) -> &'static str {
    if marker == frame_marker::KERNEL_ENTRY {
        KERNEL_ENTRY_FRAME
    } else {
        STACK_SWITCH_FRAME
    }
}

/// The frame name of marker `marker`, given the names of the frames inside it up to the next
/// marker inwards, nearest first: a system call if any of them names one (a trap vector for
/// everything, as riscv64's, names the system call further in: the example kernel's
/// `trap_vector` calls `syscall_dispatch`, Linux's `handle_exception` `do_trap_ecall_u`),
/// else what the nearest frame that tells anything says.
pub fn name_entry<S: AsRef<str>>(marker: u64, inner: &[&[S]]) -> &'static str {
    if inner.iter().any(|f| has(f, SYSCALL_WORDS)) {
        return SYSCALL_FRAME;
    }
    inner
        .iter()
        .map(|f| name(marker, f))
        .find(|n| *n != unnamed(marker))
        .unwrap_or(unnamed(marker))
}

/// How many of `addrs` (innermost first) to keep: a stack switch that led nowhere known
/// (`known(i)` false for every frame beyond it) was garbage in a frame pointer, not a
/// switch, and is cut with what follows.
pub fn keep(addrs: &[u64], mut known: impl FnMut(usize) -> bool) -> usize {
    let Some(last_switch) = addrs.iter().rposition(|&a| a == frame_marker::STACK_SWITCH) else {
        return addrs.len();
    };
    if (last_switch + 1..addrs.len()).any(|i| !is_marker(addrs[i]) && known(i)) {
        addrs.len()
    } else {
        last_switch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frame_marker::{KERNEL_ENTRY as KE, STACK_SWITCH as SW};

    #[test]
    fn probes_skip_markers_and_take_interrupted_ips_as_is() {
        let a = [0x100, 0x200, KE, 0x300, 0x400];
        let p: Vec<_> = (0..a.len()).map(|i| probe(&a, i, true)).collect();
        assert_eq!(
            p,
            [Some(0x100), Some(0x1ff), None, Some(0x300), Some(0x3ff)]
        );
        assert_eq!(probe(&a, 0, false), Some(0xff));
    }

    #[test]
    fn names_follow_the_entry_code() {
        assert_eq!(name(KE, &["entry_SYSCALL_64_after_hwframe"]), SYSCALL_FRAME);
        assert_eq!(name(KE, &["asm_exc_page_fault"]), EXCEPTION_FRAME);
        assert_eq!(
            name(KE, &["asm_sysvec_apic_timer_interrupt"]),
            INTERRUPT_FRAME
        );
        assert_eq!(name(SW, &["kernel::user::syscall_entry"]), SYSCALL_FRAME);
        assert_eq!(name(KE, &["[unknown]"]), KERNEL_ENTRY_FRAME);
        assert_eq!(name(SW, &[] as &[&str]), STACK_SWITCH_FRAME);
    }

    #[test]
    fn a_trap_vector_for_everything_is_named_by_its_system_call_path() {
        let frames: [&[&str]; 3] = [
            &["trap_vector"],
            &["kernel::user::syscall_dispatch"],
            &["kernel::user::sys_work"],
        ];
        assert_eq!(name(KE, frames[0]), EXCEPTION_FRAME);
        assert_eq!(name_entry(KE, &frames), SYSCALL_FRAME);
        let fault: [&[&str]; 2] = [&["handle_exception"], &["do_page_fault"]];
        assert_eq!(name_entry(KE, &fault), EXCEPTION_FRAME);
        let irq: [&[&str]; 2] = [&["svc_entry"], &["handle_irq"]];
        assert_eq!(name_entry(KE, &irq), INTERRUPT_FRAME);
        assert_eq!(
            name_entry(KE, &[&["el0t_64_sync"][..], &["el0_svc"]]),
            SYSCALL_FRAME
        );
        assert_eq!(name_entry(KE, &[&["[unknown]"][..]]), KERNEL_ENTRY_FRAME);
        assert_eq!(name_entry::<&str>(SW, &[]), STACK_SWITCH_FRAME);
    }

    #[test]
    fn a_switch_into_nothing_known_is_cut() {
        let a = [0x100, 0x200, SW, 0x9999, 0x8888];
        assert_eq!(keep(&a, |i| i < 2), 2);
        assert_eq!(keep(&a, |i| i != 3), 5);
        assert_eq!(keep(&[0x100, 0x200], |_| false), 2);
    }
}
