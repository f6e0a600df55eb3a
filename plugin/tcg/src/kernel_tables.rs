//! `elf=`: the kernel's unwind tables (ORC, DWARF CFI), read once at start from its ELF or
//! the vmlinux inside a Linux image, for the stack walks of a kernel without frame pointers.

use std::path::Path;
use std::sync::Arc;

use kern_profile_format::Arch;
use kern_profile_unwind::tables::load_kernel_tables;
use kern_profile_unwind::UnwindTables;

/// The tables of the kernel at `path` for an `arch` guest; `None` when it has none (or is a
/// raw arm64/riscv64 Image, which has no sections). Errors name the file; an ELF marked
/// i386 but 64-bit is read as x86_64 and said so at start.
pub fn load(path: &Path, arch: Arch) -> Result<Option<Arc<UnwindTables>>, String> {
    let k = load_kernel_tables(path, arch).map_err(|e| format!("elf={e}"))?;
    if k.remarked {
        crate::stderr_line(&remarked_line("elf", path));
    }
    Ok(k.tables.map(Arc::new))
}

/// The line the plugin prints at start for an ELF marked i386 but 64-bit, given as `arg=`.
pub fn remarked_line(arg: &str, path: &Path) -> String {
    format!(
        "kern-profile: note: {arg}={}: {}",
        path.display(),
        kern_profile_arch::REMARKED_NOTE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file() {
        let dir = std::env::temp_dir().join(format!("kp-kernel-tables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk");
        std::fs::write(&junk, b"not a kernel at all").unwrap();
        let err = load(&junk, Arch::X86_64).unwrap_err();
        assert!(
            err.starts_with(&format!("elf={}: ", junk.display())),
            "{err}"
        );
        let err = load(&dir.join("missing"), Arch::X86_64).unwrap_err();
        assert!(err.contains("missing: cannot read"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_debian_bzimage_gives_its_orc_table() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/linux/x86_64/vmlinuz");
        if !root.exists() {
            eprintln!("skipped: no {}", root.display());
            return;
        }
        let t = load(&root, Arch::X86_64).unwrap().unwrap();
        assert!(t.orc.is_some());
        let err = load(&root, Arch::Aarch64).unwrap_err();
        assert!(
            err.contains("a kernel for x86_64, and the guest is aarch64"),
            "{err}"
        );
    }
}
