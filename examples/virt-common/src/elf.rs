//! Loads the embedded user program: an ELF64 of the kernel's own architecture whose PT_LOAD
//! segments must lie in `[lo, hi)`. Copies them (zeroing the `.bss` part) and returns the
//! entry point. A malformed image is a panic naming the field.

const PT_LOAD: u32 = 1;

fn u16_at(b: &[u8], off: usize) -> usize {
    u16::from_le_bytes([b[off], b[off + 1]]) as usize
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn u64_at(b: &[u8], off: usize) -> usize {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(v) as usize
}

pub fn load(image: &[u8], machine: u16, lo: usize, hi: usize) -> usize {
    if image.len() < 64 || &image[..4] != b"\x7fELF" || image[4] != 2 || image[5] != 1 {
        panic!("user program: not a little-endian ELF64");
    }
    if u16_at(image, 18) != machine as usize {
        panic!("user program: e_machine {} is not this kernel's {}", u16_at(image, 18), machine);
    }
    let (phoff, phentsize, phnum) = (u64_at(image, 32), u16_at(image, 54), u16_at(image, 56));
    if phentsize < 56 || phoff + phnum * phentsize > image.len() {
        panic!("user program: program headers out of the image");
    }
    for k in 0..phnum {
        let ph = phoff + k * phentsize;
        if u32_at(image, ph) != PT_LOAD {
            continue;
        }
        let (off, vaddr) = (u64_at(image, ph + 8), u64_at(image, ph + 16));
        let (filesz, memsz) = (u64_at(image, ph + 32), u64_at(image, ph + 40));
        if vaddr < lo || memsz > hi - vaddr || filesz > memsz || off + filesz > image.len() {
            panic!("user program: segment at {:#x} ({} bytes) outside {:#x}..{:#x}", vaddr, memsz, lo, hi);
        }
        unsafe {
            kernel_common::mem::memcpy(vaddr as *mut u8, image.as_ptr().add(off), filesz);
            kernel_common::mem::memset((vaddr + filesz) as *mut u8, 0, memsz - filesz);
        }
    }
    u64_at(image, 24)
}
