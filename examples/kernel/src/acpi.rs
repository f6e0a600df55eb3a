//! The CPUs the firmware reports, from the ACPI MADT (SeaBIOS builds it for QEMU's `-smp`).
//! Paging is off: the tables are read at their physical addresses.

/// At most this many local APICs are remembered.
pub const MAX_LISTED: usize = 64;

/// Enabled local APIC IDs, in MADT order.
pub struct Cpus {
    pub ids: [u8; MAX_LISTED],
    pub n: usize,
}

unsafe fn rd8(a: usize) -> u8 {
    (a as *const u8).read_volatile()
}

unsafe fn rd32(a: usize) -> u32 {
    (a as *const u32).read_unaligned()
}

unsafe fn checksum_ok(a: usize, len: usize) -> bool {
    let mut sum = 0u8;
    let mut i = 0;
    while i < len {
        sum = sum.wrapping_add(rd8(a + i));
        i += 1;
    }
    sum == 0
}

unsafe fn signature(a: usize, sig: &[u8]) -> bool {
    let mut i = 0;
    while i < sig.len() {
        if rd8(a + i) != sig[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The RSDP: in the first KiB of the EBDA, or in the BIOS area 0xE0000..0xFFFFF, on a
/// 16-byte boundary, with a valid checksum.
unsafe fn find_rsdp() -> Option<usize> {
    let ebda = (((0x40E as *const u16).read_volatile()) as usize) << 4;
    let ranges = [(ebda, ebda + 1024), (0xE0000, 0x100000)];
    for (lo, hi) in ranges {
        if lo == 0 {
            continue;
        }
        let mut a = lo;
        while a + 20 <= hi {
            if signature(a, b"RSD PTR ") && checksum_ok(a, 20) {
                return Some(a);
            }
            a += 16;
        }
    }
    None
}

/// The enabled processors of the MADT, or `None` without ACPI tables.
pub fn cpus() -> Option<Cpus> {
    unsafe {
        let rsdp = find_rsdp()?;
        let rsdt = rd32(rsdp + 16) as usize;
        if rsdt == 0 || !signature(rsdt, b"RSDT") {
            return None;
        }
        let len = rd32(rsdt + 4) as usize;
        let mut madt = None;
        let mut e = rsdt + 36;
        while e + 4 <= rsdt + len {
            let t = rd32(e) as usize;
            if t != 0 && signature(t, b"APIC") {
                madt = Some(t);
                break;
            }
            e += 4;
        }
        let madt = madt?;
        let end = madt + rd32(madt + 4) as usize;
        let mut cpus = Cpus { ids: [0; MAX_LISTED], n: 0 };
        // Entries after the header (36 bytes), the local APIC address and the flags.
        let mut p = madt + 44;
        while p + 2 <= end {
            let (kind, elen) = (rd8(p), rd8(p + 1) as usize);
            if elen < 2 {
                break;
            }
            // Type 0: processor local APIC {ACPI id, APIC id, flags (bit 0: enabled)}.
            if kind == 0 && elen >= 8 && rd32(p + 4) & 1 != 0 && cpus.n < MAX_LISTED {
                cpus.ids[cpus.n] = rd8(p + 3);
                cpus.n += 1;
            }
            p += elen;
        }
        Some(cpus)
    }
}
