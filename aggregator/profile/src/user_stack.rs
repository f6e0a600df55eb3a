//! The user program's part of a stack, when user programs are given (`--user`): where it
//! begins (the sampled PC of a user-mode sample; past the kernel entry into the program for
//! a kernel-mode one) and where the program's first frame ends it.
//!
//! Classic kernels (V6 Unix, xv6) start a program with a fake return address (0xffffffff)
//! at the top of its stack and whatever frame pointer the trap frame held, so the first
//! frame's saved frame pointer is garbage that a walk (older plugins', or a kernel's other
//! conventions) may follow into kernel stacks or anywhere. So the user part ends at the
//! first return address that no given program's image holds, or at a boundary marker
//! (only a real entry leads from user to kernel, and none lies in a user stack); and its
//! addresses are named from the programs only, never with kernel symbols.

use crate::boundary;

/// Where the user part of `addrs` (innermost first, the sampled PC first) begins: 0 for a
/// user-mode sample; for a kernel-mode one, right after the innermost boundary marker that
/// `into_user(i, probe)` says leads into user space (`i` the marker's index, `probe` the
/// next address's: the interrupted user instruction after a kernel entry, a return address
/// on the user stack after a system-call stub's stack switch). `None`: no user part.
pub fn start(
    addrs: &[u64],
    user_mode: bool,
    mut into_user: impl FnMut(usize, u64) -> bool,
) -> Option<usize> {
    if user_mode {
        return (!addrs.is_empty()).then_some(0);
    }
    (1..addrs.len()).find(|&i| {
        boundary::is_marker(addrs[i - 1])
            && boundary::probe(addrs, i, true).is_some_and(|p| into_user(i - 1, p))
    })
}

/// Where the user part beginning at `from` ends (one past its last address): at the first
/// marker, or return address whose probe no program's image holds (`held`), after `from`
/// itself (the sampled or interrupted instruction, kept whatever it is).
pub fn end(addrs: &[u64], from: usize, held: impl Fn(u64) -> bool) -> usize {
    (from + 1..addrs.len())
        .find(|&i| boundary::probe(addrs, i, true).is_none_or(|p| !held(p)))
        .unwrap_or(addrs.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::frame_marker::{KERNEL_ENTRY as KE, STACK_SWITCH as SW};

    /// A kernel at 1 MiB..4 MiB, a program at 64 MiB..64 MiB + 64 KiB.
    fn kernel(p: u64) -> bool {
        (0x10_0000..0x40_0000).contains(&p)
    }
    fn program(p: u64) -> bool {
        (0x400_0000..0x401_0000).contains(&p)
    }
    fn not_kernel(_marker: usize, p: u64) -> bool {
        !kernel(p)
    }

    /// A system call of a program started the classic way, as an older plugin recorded it:
    /// the walk went on past `_start`'s fake return address into the kernel's stack.
    const CLASSIC: [u64; 10] = [
        0x10_2000,   // sys_work (the sampled PC)
        0x10_1000,   // syscall_dispatch
        KE,          // the entry from ring 3
        0x400_0123,  // the interrupted user instruction
        0x400_0500,  // round
        0x400_0600,  // _start
        0xffff_ffff, // the fake return address
        SW,          // the garbage frame pointer, below the user stack
        0x10_3000,   // the kernel's own frames
        0x10_4000,
    ];

    #[test]
    fn the_user_part_of_a_system_call_ends_at_the_first_frame() {
        let from = start(&CLASSIC, false, not_kernel).unwrap();
        assert_eq!(from, 3);
        assert_eq!(end(&CLASSIC, from, program), 6);
    }

    #[test]
    fn a_user_mode_sample_ends_at_the_first_frame_too() {
        let stack = &CLASSIC[3..];
        assert_eq!(start(stack, true, not_kernel), Some(0));
        assert_eq!(end(stack, 0, program), 3);
        // A marker ends it even between addresses a program holds.
        assert_eq!(end(&[0x400_0123, SW, 0x400_0500], 0, program), 1);
        // The sampled PC stays whatever it is (in a library no program given holds).
        assert_eq!(end(&[0x900_0000, 0x400_0500, 0xffff_ffff], 0, program), 2);
        assert_eq!(start(&[], true, not_kernel), None);
    }

    #[test]
    fn kernel_entries_of_kernel_code_are_no_user_part() {
        // An interrupt of kernel code: the interrupted instruction is the kernel's.
        let stack = [0x10_2000, KE, 0x10_3000, 0x10_4000];
        assert_eq!(start(&stack, false, not_kernel), None);
        // An interrupt of kernel code inside a system call: the user part is the outer one.
        let nested = [0x10_2000, KE, 0x10_3000, KE, 0x400_0123, 0x400_0500];
        assert_eq!(start(&nested, false, not_kernel), Some(4));
        assert_eq!(end(&nested, 4, program), 6);
        // A system-call stub's stack switch onto the user stack: a return address there.
        let switched = [0x10_2000, SW, 0x400_0501, 0x400_0601];
        assert_eq!(start(&switched, false, not_kernel), Some(2));
        assert_eq!(end(&switched, 2, program), 4);
        // Where the caller says a switch does not lead into user space, none does.
        assert_eq!(start(&switched, false, |i, p| i != 1 && !kernel(p)), None);
    }
}
