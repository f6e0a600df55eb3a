//! The user part of a stack (`--user`) ends at the program's first frame and carries no
//! kernel names, and is rooted at the program its address space ran: walks of a program
//! started the classic way (a fake return address 0xffffffff at the top of its stack, a
//! garbage frame pointer below it) as older plugins recorded them, past a kernel entry and
//! in user mode, and a system call whose only user address is no program's code (i386
//! Linux's SYSENTER path reads a register as a return address).
//!
//! The program is tests/data/tiny.elf; the kernel the symbol map of tests/user.rs.

mod common;

use common::tiny::*;
use kern_profile::{Options, OutputFormat};
use kern_profile_format::frame_marker::{KERNEL_ENTRY as KE, STACK_SWITCH as SW};
use kern_profile_format::{
    encode_sample_v2, encode_stats, CodeBytes, CpuMode, Privilege, SampleExtras, VERSION_2,
};
use object::{Object, ObjectSection};

/// Return addresses on the kernel's own stack, where a garbage frame pointer led.
const RET_KMAIN: u64 = 0x0010_0110;
const FAKE: u64 = 0xffff_ffff;
const SPACE: u64 = 0x0010_f000;

fn folded(stacks: &[(bool, Vec<u64>)]) -> Vec<String> {
    let dir = common::temp_dir("user-stacks");
    let mut header = common::header(1, false);
    header.markers = true;
    let mut out = Vec::new();
    header.encode_version(VERSION_2, &mut out);
    let elf = std::fs::read(common::tiny_elf()).unwrap();
    let file = object::File::parse(&elf[..]).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let at = (LEAF_SQUARE - text.address()) as usize;
    // The program's code where it was sampled: the address space is tiny.elf's.
    CodeBytes {
        vcpu: 0,
        page_table_base: SPACE,
        vaddr: LEAF_SQUARE,
        bytes: &text.data().unwrap()[at..at + 16],
    }
    .encode(&mut out, 4);
    for (i, (user, addrs)) in stacks.iter().enumerate() {
        let mut s = common::sample(0, 1000 * (i as u64 + 1), addrs[0], &addrs[1..]);
        s.user = *user;
        let x = SampleExtras {
            mode: CpuMode::Paging,
            privilege: if *user {
                Privilege::User
            } else {
                Privilege::Kernel
            },
            return_register: None,
            page_table_base: Some(SPACE),
        };
        encode_sample_v2(&mut out, 4, &s, &x);
    }
    let n = stacks.len() as u64;
    encode_stats(&mut out, n, 0, &[n, 0, 0, 0, 0, 0], &[n * 1000]);
    let raw = common::write(&dir, "raw", &out);
    let map = common::write(&dir, "kernel.map", common::KERNEL_MAP.as_bytes());
    let opts = Options {
        format: OutputFormat::Folded,
        symbols: vec![map],
        user_binaries: vec![common::tiny_elf()],
        progress: false,
        ..Options::default()
    };
    let (text, report) = common::runs::cpu(&raw, None, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    common::sorted_lines(&text)
}

#[test]
fn classic_starts_end_at_the_programs_first_frame() {
    // The same walk sampled in user mode and in a system call: the program's frames, then
    // the fake return address, a switch to the kernel's stack and its frames.
    let beyond = [
        RET_MIDDLE,
        RET_WORK,
        RET_START,
        FAKE,
        SW,
        RET_KMAIN,
        common::RET_KSTART,
    ];
    let user: Vec<u64> = [LEAF_SQUARE].iter().chain(&beyond).copied().collect();
    let syscall: Vec<u64> = [
        common::SYS_WORK_PC,
        common::RET_SYSCALL_ENTRY,
        KE,
        LEAF_SQUARE,
    ]
    .iter()
    .chain(&beyond)
    .copied()
    .collect();
    assert_eq!(
        folded(&[(true, user), (false, syscall)]),
        [
            "[user] tiny.elf;_start;kernel::work;middle;leaf;square_[i] 1",
            "[user] tiny.elf;_start;kernel::work;middle;leaf;square_[i];[syscall];\
             syscall_entry;sys_work 1",
        ]
    );
}

#[test]
fn a_system_call_is_rooted_at_its_address_spaces_program() {
    // The walk's only user address is a register read as a return address: no program's
    // code, but the address space is tiny.elf's.
    let syscall = vec![
        common::SYS_WORK_PC,
        common::RET_SYSCALL_ENTRY,
        SW,
        0x0001_0000,
        SW,
    ];
    let user = vec![LEAF_SQUARE, RET_MIDDLE];
    assert_eq!(
        folded(&[(false, syscall), (true, user)]),
        [
            "[user] tiny.elf;[user 0x10000];[syscall];syscall_entry;sys_work 1",
            "[user] tiny.elf;middle;leaf;square_[i] 1",
        ]
    );
}
