//! The running QEMU's version, read from its own image: QEMU prints `--version` from one
//! string literal, "QEMU emulator version X.Y.Z (...)", which sits in the executable's
//! read-only data, mapped in this very process.

use std::ffi::{c_int, c_void};

use kern_profile_format::qemu::parse_qemu_version;

const NEEDLE: &[u8] = b"QEMU emulator version ";

/// `X.Y.Z` from the main executable's read-only segments, or `None` (not QEMU, or a build
/// that words it otherwise).
pub fn from_own_image() -> Option<String> {
    let mut found: Option<String> = None;
    // SAFETY: dl_iterate_phdr calls `visit` with valid program headers of every loaded
    // object; `found` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut found as *mut _ as *mut c_void) };
    found
}

/// For the first object only (the main executable): searches its read-only loaded segments.
unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> c_int {
    // SAFETY: as dl_iterate_phdr promises; `data` is `from_own_image`'s `found`.
    let (info, found) = unsafe { (&*info, &mut *(data as *mut Option<String>)) };
    if info.dlpi_phdr.is_null() {
        return 1;
    }
    // SAFETY: the headers of a loaded object.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    for ph in phdrs {
        let read_only = ph.p_flags & (libc::PF_W | libc::PF_X) == 0;
        if ph.p_type != libc::PT_LOAD || !read_only || ph.p_filesz == 0 {
            continue;
        }
        // SAFETY: a loaded read-only segment is mapped and readable for its file size.
        let seg = unsafe {
            std::slice::from_raw_parts(
                (info.dlpi_addr + ph.p_vaddr) as *const u8,
                ph.p_filesz as usize,
            )
        };
        if let Some(at) = memchr::memmem::find(seg, NEEDLE) {
            let text = &seg[at..seg.len().min(at + NEEDLE.len() + 32)];
            *found = parse_qemu_version(&String::from_utf8_lossy(text)).map(String::from);
            if found.is_some() {
                break;
            }
        }
    }
    // The main executable comes first: stop after it.
    1
}
