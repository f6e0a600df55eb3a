//! `elf=`: the kernel's unwind tables (ORC, DWARF CFI), read once at start from its ELF or
//! the vmlinux inside a Linux image, for the stack walks of a kernel without frame pointers;
//! and which kernel it is ([`KernelOs`]): Linux's layouts (encoded `pt_regs` frame pointers
//! and the like) are taken on Linux only, from its symbols or kallsyms. `user=`: user
//! programs' CFI, beside the kernel's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kern_profile_format::Arch;
use kern_profile_linux_image::{open, Options};
use kern_profile_symbols::kernel_os_of_image;
use kern_profile_unwind::tables::{kernel_tables_of_elf, TableStats, UserAdded};
use kern_profile_unwind::{KernelOs, UnwindTables};

use crate::config::TaskArgs;

/// What the stack walks learn from `elf=`: its tables, what their checks refused, and which
/// kernel it is.
#[derive(Debug, Default)]
pub struct Loaded {
    /// `None` when the kernel has none (or is a raw arm64/riscv64 Image, which has no
    /// sections), or every entry was refused.
    pub tables: Option<Arc<UnwindTables>>,
    /// [`TableStats::refusals`], for the exit line.
    pub refusals: Option<String>,
    /// Which kernel it is, by its symbols.
    pub os: KernelOs,
    /// `tasks=`: where its tasks are, when found.
    pub tasks: Option<kern_profile_sampler::task::TaskSpec>,
    /// `switches=`: where it switches tasks, when found.
    pub switches: Option<kern_profile_sampler::switch::SwitchSpec>,
    /// `flight_trigger=`: the functions that write the flight ring.
    pub flight_triggers: Vec<kern_profile_sampler::flight_trigger::Trigger>,
}

/// The kernel at `path` for an `arch` guest, read once, where its tasks are (`tasks`) and
/// its `flight_trigger=` functions (`triggers`). Errors name the file; an ELF marked i386 but
/// 64-bit is read as x86_64, and entries refused are counted, both said at start.
pub fn load(
    path: &Path,
    arch: Arch,
    args: TaskArgs<'_>,
    triggers: &[String],
) -> Result<Loaded, String> {
    let image = open(path, &Options::default()).map_err(|e| format!("elf={e}"))?;
    let os = kernel_os_of_image(&image);
    let tasks = crate::tasks::find(args, &image, os, arch, path)?;
    let switches = crate::switches::find(args, tasks.as_ref(), &image, os, arch, path)?;
    let flight_triggers = match triggers.is_empty() {
        true => Vec::new(),
        false => crate::flight::find(&image, triggers, path)?,
    };
    if !image.is_elf() {
        return Ok(Loaded {
            os,
            tasks,
            switches,
            flight_triggers,
            ..Loaded::default()
        });
    }
    let k = kernel_tables_of_elf(path, &image.bytes, arch).map_err(|e| format!("elf={e}"))?;
    if k.remarked {
        crate::stderr_line(&remarked_line("elf", path));
    }
    if let Some(line) = checked_line(path, &k.stats) {
        crate::stderr_line(&line);
    }
    Ok(Loaded {
        tables: k.tables.map(Arc::new),
        refusals: k.stats.refusals(),
        os,
        tasks,
        switches,
        flight_triggers,
    })
}

/// `loaded` with the CFI of the `user` programs (`user=`), each said at start: its rows, or
/// that it has none and is walked by frame pointers. Errors name the file.
pub fn add_user(mut loaded: Loaded, user: &[PathBuf], arch: Arch) -> Result<Loaded, String> {
    if user.is_empty() {
        return Ok(loaded);
    }
    let mut tables = match loaded.tables.take().map(Arc::try_unwrap) {
        Some(Ok(t)) => t,
        Some(Err(shared)) => (*shared).clone(),
        None => UnwindTables {
            arch,
            orc: None,
            cfi: None,
            stubs: Default::default(),
            user: Default::default(),
        },
    };
    for path in user {
        let elf = std::fs::read(path)
            .map_err(|e| format!("user={}: cannot read: {e}", path.display()))?;
        let name = path.display().to_string();
        let added = tables
            .user
            .add(&name, &elf, arch)
            .map_err(|e| format!("user={name}: {e}"))?;
        crate::stderr_line(&user_line(path, added));
    }
    loaded.tables = Some(Arc::new(tables));
    Ok(loaded)
}

/// The line the plugin prints at start for a `user=` program.
pub fn user_line(path: &Path, added: UserAdded) -> String {
    match added {
        UserAdded::Rows(n) => format!(
            "kern-profile: user={}: CFI {n} rows, for its stacks",
            path.display()
        ),
        UserAdded::NoCfi => format!(
            "kern-profile: user={}: no .eh_frame or .debug_frame: its stacks are walked by frame pointers",
            path.display()
        ),
    }
}

/// The line the plugin prints at start when the checks of `elf=`'s tables refused entries,
/// or read FreePascal's layout of `.debug_frame`.
pub fn checked_line(path: &Path, stats: &TableStats) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(r) = stats.refusals() {
        let used: u64 = [stats.orc, stats.cfi]
            .iter()
            .flatten()
            .map(|c| c.used)
            .sum();
        parts.push(match used {
            0 => format!("{r}; none is left: stacks are walked by frame pointers alone"),
            _ => format!("{r}; the rest are used"),
        });
    }
    if let Some(n) = stats.cfi.map(|c| c.wide_cie_pointers).filter(|&n| n > 0) {
        parts.push(format!(
            "{n} CFI entries have 8-byte CIE pointers in 32-bit DWARF (FreePascal's layout), read as such"
        ));
    }
    (!parts.is_empty())
        .then(|| format!("kern-profile: elf={}: {}", path.display(), parts.join("; ")))
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
        let err = load(&junk, Arch::X86_64, TaskArgs::default(), &[]).unwrap_err();
        assert!(
            err.starts_with(&format!("elf={}: ", junk.display())),
            "{err}"
        );
        let err = load(&dir.join("missing"), Arch::X86_64, TaskArgs::default(), &[]).unwrap_err();
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
        let t = load(&root, Arch::X86_64, TaskArgs::default(), &[]).unwrap();
        assert!(t.tables.unwrap().orc.is_some());
        // Debian's ORC entries are all in its text, none at one address twice.
        assert_eq!(t.refusals, None);
        assert_eq!(t.os, KernelOs::Linux);
        let off = TaskArgs {
            tasks: crate::config::AutoOnOff::Off,
            switches: crate::config::AutoOnOff::Off,
            ..TaskArgs::default()
        };
        let err = load(&root, Arch::Aarch64, off, &[]).unwrap_err();
        assert!(
            err.contains("a kernel for x86_64, and the guest is aarch64"),
            "{err}"
        );
    }

    /// `flight_trigger=panic,nmi` on Debian's kernels: their panic, oops and NMI entries, from kallsyms
    /// (a bzImage) or the symbol table (the i386 -dbg vmlinux).
    #[test]
    fn the_panic_preset_on_debian_kernels() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/linux");
        for (file, arch) in [
            ("x86_64/vmlinuz", Arch::X86_64),
            ("i386/vmlinux", Arch::I386),
        ] {
            let path = root.join(file);
            if !path.exists() {
                eprintln!("skipped: no {}", path.display());
                continue;
            }
            let off = TaskArgs {
                tasks: crate::config::AutoOnOff::Off,
                switches: crate::config::AutoOnOff::Off,
                ..TaskArgs::default()
            };
            let t = load(&path, arch, off, &["panic".to_string(), "nmi".to_string()]).unwrap();
            let names: Vec<&str> = t.flight_triggers.iter().map(|t| t.name.as_str()).collect();
            for want in ["panic", "oops_enter", "exc_nmi"] {
                assert!(names.contains(&want), "{file}: {names:?}");
            }
            let err = load(&path, arch, off, &["no_such_function".to_string()]).unwrap_err();
            assert!(err.contains("has no function no_such_function"), "{err}");
        }
    }
}
