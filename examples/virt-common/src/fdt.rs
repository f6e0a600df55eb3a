//! What the kernels read from the flattened device tree QEMU hands them: `/chosen/bootargs`
//! (QEMU's `-append`) and the number of `/cpus/cpu@N` nodes (`-smp N`). A minimal walker
//! over the structure block; anything malformed is a panic naming the offset.

pub struct Info {
    pub bootargs: &'static [u8],
    pub cpus: u32,
}

const MAGIC: u32 = 0xD00D_FEED;
const BEGIN_NODE: u32 = 1;
const END_NODE: u32 = 2;
const PROP: u32 = 3;
const NOP: u32 = 4;
const END: u32 = 9;

fn be32(p: usize) -> u32 {
    let b = p as *const u8;
    let mut v = 0u32;
    for i in 0..4 {
        v = (v << 8) | unsafe { b.add(i).read_volatile() } as u32;
    }
    v
}

/// The NUL-terminated string at `p` (bounded).
fn cstr(p: usize) -> &'static [u8] {
    let mut len = 0;
    while len < 256 && unsafe { (p as *const u8).add(len).read_volatile() } != 0 {
        len += 1;
    }
    unsafe { core::slice::from_raw_parts(p as *const u8, len) }
}

pub fn parse(base: usize) -> Info {
    if be32(base) != MAGIC {
        panic!("no device tree at {:#x} (magic {:#x})", base, be32(base));
    }
    let size = be32(base + 4) as usize;
    let structs = base + be32(base + 8) as usize;
    let strings = base + be32(base + 12) as usize;
    let mut info = Info { bootargs: &[], cpus: 0 };
    let (mut p, mut depth) = (structs, 0u32);
    let (mut in_chosen, mut in_cpus) = (false, false);
    loop {
        if p >= base + size {
            panic!("device tree: no END token before offset {:#x}", p - base);
        }
        let tok = be32(p);
        p += 4;
        match tok {
            BEGIN_NODE => {
                let name = cstr(p);
                p += (name.len() + 4) & !3;
                depth += 1;
                if depth == 2 {
                    in_chosen = name == b"chosen";
                    in_cpus = name == b"cpus";
                } else if depth == 3 && in_cpus && name.starts_with(b"cpu@") {
                    info.cpus += 1;
                }
            }
            END_NODE => depth = depth.saturating_sub(1),
            PROP => {
                let len = be32(p) as usize;
                let name = cstr(strings + be32(p + 4) as usize);
                let val = p + 8;
                p = val + ((len + 3) & !3);
                if depth == 2 && in_chosen && name == b"bootargs" {
                    let s = unsafe { core::slice::from_raw_parts(val as *const u8, len) };
                    info.bootargs = match s.iter().position(|&b| b == 0) {
                        Some(n) => &s[..n],
                        None => s,
                    };
                }
            }
            NOP => {}
            END => return info,
            _ => panic!("device tree: bad token {:#x} at offset {:#x}", tok, p - 4 - base),
        }
    }
}
