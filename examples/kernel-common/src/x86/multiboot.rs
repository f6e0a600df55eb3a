//! The multiboot v1 information the loader passes in EAX/EBX: the command line (`-append`)
//! and the memory size. On x86_64 it lies in low physical memory, which the boot page tables
//! keep identity-mapped.

use crate::cmdline;

const MULTIBOOT_MAGIC: u32 = 0x2BAD_B002;
const FLAG_MEM: u32 = 1 << 0;
const FLAG_CMDLINE: u32 = 1 << 2;

pub struct Info {
    pub cmdline: &'static [u8],
    /// Upper memory end (bytes), when the loader said.
    pub mem_end: Option<usize>,
}

#[inline]
pub fn read(magic: u32, info: u32) -> Info {
    if magic != MULTIBOOT_MAGIC {
        panic!("not booted by a multiboot v1 loader (EAX = {:#x})", magic);
    }
    let info = info as usize as *const u32;
    let flags = unsafe { info.read_volatile() };
    // mem_upper: KiB above 1 MiB.
    let mem_end = (flags & FLAG_MEM != 0).then(|| 0x10_0000 + unsafe { info.add(2).read_volatile() } as usize * 1024);
    let cmdline: &'static [u8] = if flags & FLAG_CMDLINE != 0 {
        cmdline::read(unsafe { info.add(4).read_volatile() } as usize as *const u8)
    } else {
        &[]
    };
    Info { cmdline, mem_end }
}
