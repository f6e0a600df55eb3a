//! Which kernel and symbol maps name a session's samples: `--kernel`, else QEMU's
//! `-kernel` when it is an ELF with symbols or a Linux image (named from its kallsyms);
//! `--symbols` besides. And `--window FUNCTION`
//! resolved to the function's address range in that ELF.

use std::ops::Range;
use std::path::{Path, PathBuf};

use kern_profile_symbols::{KernelFile, SymbolError};

use super::RecordError;
use crate::filter::matches;
use crate::job::SymbolSources;

/// The kernel a session names its samples with, checked before QEMU starts.
pub struct KernelChoice {
    pub sources: SymbolSources,
    /// The kernel, loaded (for `--window`); `None` with symbol maps alone.
    pub loaded: Option<KernelFile>,
}

impl KernelChoice {
    /// True when the kernel is Linux (named from its kallsyms, or an ELF with
    /// `start_kernel`): `record` then boots it with `nokaslr`.
    pub fn is_linux(&self) -> bool {
        self.loaded.as_ref().is_some_and(KernelFile::is_linux)
    }
}

/// Resolves the symbol sources of a session, before QEMU starts: `--kernel`, else QEMU's
/// `-kernel` when it can name functions (an ELF with symbols, or a Linux image with its
/// kallsyms).
pub fn symbol_sources(
    kernel_arg: Option<&Path>,
    symbols: &[PathBuf],
    qemu_kernel: Option<&Path>,
) -> Result<KernelChoice, RecordError> {
    for s in symbols {
        std::fs::metadata(s).map_err(|source| RecordError::Io {
            what: format!("--symbols {}", s.display()),
            source,
        })?;
    }
    let (path, loaded) = match (kernel_arg, qemu_kernel) {
        (Some(k), _) => {
            let loaded = usable(k).map_err(|why| RecordError::KernelArg {
                path: k.to_path_buf(),
                why,
            })?;
            (Some(k.to_path_buf()), Some(loaded))
        }
        (None, Some(k)) => match usable(k) {
            Ok(loaded) => (Some(k.to_path_buf()), Some(loaded)),
            Err(_) if !symbols.is_empty() => (None, None),
            Err(why) => {
                return Err(RecordError::KernelUnusable {
                    path: k.to_path_buf(),
                    why,
                })
            }
        },
        (None, None) if !symbols.is_empty() => (None, None),
        (None, None) => return Err(RecordError::NoKernel),
    };
    Ok(KernelChoice {
        sources: SymbolSources {
            elf: path.map(|p| std::path::absolute(&p).unwrap_or(p)),
            symbols: symbols.to_vec(),
            user_binaries: Vec::new(),
        },
        loaded,
    })
}

/// The kernel at `path` loaded, or why it cannot name samples: not there, not a kernel,
/// stripped without kallsyms. The message leaves out the path, which the caller gives.
fn usable(path: &Path) -> Result<KernelFile, String> {
    let why = |e: SymbolError| {
        match &e {
            SymbolError::NotElf { reason, .. } => {
                return format!("not an ELF, nor a Linux kernel image ({reason})")
            }
            SymbolError::Open { source, .. } => return format!("cannot read it ({source})"),
            _ => {}
        }
        let e = e.to_string();
        let p = path.display().to_string();
        match e.strip_prefix(&p) {
            Some(rest) => rest.trim_start_matches([':', ' ']).to_string(),
            None => e,
        }
    };
    let kernel = KernelFile::load(path).map_err(why)?;
    if kernel.elf.as_ref().is_some_and(|e| e.is_stripped()) && kernel.kallsyms.is_none() {
        return Err(why(SymbolError::Stripped {
            path: path.to_path_buf(),
        }));
    }
    Ok(kernel)
}

/// `--window`: `0xSTART-0xEND` as is, else a function of the kernel by name (full, or a
/// tail after `::`, as `--focus` takes it).
pub fn window_range(spec: &str, kernel: Option<&KernelFile>) -> Result<Range<u64>, RecordError> {
    let err = |why: String| RecordError::Window {
        name: spec.to_string(),
        why,
    };
    if let Some(r) = parse_range(spec) {
        return r.map_err(err);
    }
    let symbols = kernel.and_then(KernelFile::symbols).ok_or_else(|| {
        err("naming a function needs the kernel (--kernel, or QEMU's -kernel); or give 0xSTART-0xEND".into())
    })?;
    let mut found: Vec<(Range<u64>, &str)> = symbols
        .symbols()
        .iter()
        .filter(|s| matches(&s.name, spec))
        .map(|s| (s.start..s.end, &*s.name))
        .collect();
    found.dedup_by(|a, b| a.0 == b.0);
    match found.as_slice() {
        [] => Err(err("no function of that name in the kernel".to_string())),
        [(r, _)] => Ok(r.clone()),
        many => Err(err(format!(
            "{} functions match: {}; give a longer name",
            many.len(),
            many.iter().map(|m| m.1).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// `0xSTART-0xEND`: `None` when `spec` is not of that shape.
fn parse_range(spec: &str) -> Option<Result<Range<u64>, String>> {
    let (a, b) = spec.split_once('-')?;
    let hex = |s: &str| {
        let d = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
        u64::from_str_radix(d, 16).ok()
    };
    let (a, b) = (hex(a)?, hex(b)?);
    Some(if a < b {
        Ok(a..b)
    } else {
        Err("the range is empty: START must be below END".into())
    })
}

/// The plugin argument for a window.
pub fn window_arg(r: &Range<u64>) -> String {
    format!("window={:#x}-{:#x}", r.start, r.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_names_need_an_elf() {
        assert_eq!(window_range("0x1000-0x1080", None).unwrap(), 0x1000..0x1080);
        let e = window_range("0x2000-0x1000", None).unwrap_err().to_string();
        assert!(e.contains("START must be below END"), "{e}");
        let e = window_range("hot_leaf", None).unwrap_err().to_string();
        assert!(
            e.starts_with("--window hot_leaf: naming a function needs"),
            "{e}"
        );
        assert_eq!(window_arg(&(0x10..0x20)), "window=0x10-0x20");
    }

    #[test]
    fn missing_and_non_elf_kernels_are_named() {
        let e = symbol_sources(None, &[], None).err().unwrap().to_string();
        assert!(e.starts_with("the QEMU command has no -kernel"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("bzImage");
        std::fs::write(&img, b"MZ not an elf at all").unwrap();
        let e = symbol_sources(None, &[], Some(&img))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("bzImage: not an ELF, nor a Linux kernel image"),
            "{e}"
        );
        assert!(!e.contains("bzImage: /"), "the path once: {e}");
        assert!(e.contains("--kernel ELF"), "{e}");
        let e = symbol_sources(Some(&img), &[], None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("--kernel "), "{e}");
        // A symbol map alone will do.
        let map = dir.path().join("System.map");
        std::fs::write(&map, "c0100000 T start\n").unwrap();
        let s = symbol_sources(None, std::slice::from_ref(&map), Some(&img))
            .unwrap()
            .sources;
        assert_eq!((s.elf, s.symbols), (None, vec![map]));
    }
}
