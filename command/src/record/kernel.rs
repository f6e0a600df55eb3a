//! Which kernel ELF and symbol map name a session's samples: `--kernel`, else QEMU's
//! `-kernel` when it is an ELF with symbols; `--symbols` besides. And `--window FUNCTION`
//! resolved to the function's address range in that ELF.

use std::ops::Range;
use std::path::{Path, PathBuf};

use kern_profile_format::{read_elf_input, ElfInput};

use super::RecordError;
use crate::filter::matches;
use crate::job::SymbolSources;
use crate::symbolize::ElfImage;

/// Resolves the symbol sources of a session, before QEMU starts.
pub fn symbol_sources(
    kernel_arg: Option<&Path>,
    symbols: &[PathBuf],
    qemu_kernel: Option<&Path>,
) -> Result<SymbolSources, RecordError> {
    for s in symbols {
        std::fs::metadata(s).map_err(|source| RecordError::Io {
            what: format!("--symbols {}", s.display()),
            source,
        })?;
    }
    let elf = match (kernel_arg, qemu_kernel) {
        (Some(k), _) => {
            usable_elf(k).map_err(|why| RecordError::KernelArg {
                path: k.to_path_buf(),
                why,
            })?;
            Some(k.to_path_buf())
        }
        (None, Some(k)) => match usable_elf(k) {
            Ok(()) => Some(k.to_path_buf()),
            Err(_) if !symbols.is_empty() => None,
            Err(why) => {
                return Err(RecordError::KernelUnusable {
                    path: k.to_path_buf(),
                    why,
                })
            }
        },
        (None, None) if !symbols.is_empty() => None,
        (None, None) => return Err(RecordError::NoKernel),
    };
    Ok(SymbolSources {
        elf: elf.map(|p| std::path::absolute(&p).unwrap_or(p)),
        symbols: symbols.to_vec(),
        user_binaries: Vec::new(),
    })
}

/// Why `path` cannot name samples: not there, not an ELF, or stripped.
fn usable_elf(path: &Path) -> Result<(), String> {
    let read = read_elf_input(path).map_err(|e| format!("cannot read it ({e})"))?;
    let data = match read {
        ElfInput::Elf(data) => data,
        ElfInput::NotElf(first) => {
            let what = if first.get(0x202..0x206) == Some(b"HdrS") {
                "a bzImage, "
            } else {
                ""
            };
            return Err(format!("{what}not an ELF (no \\x7fELF at offset 0)"));
        }
    };
    let elf = ElfImage::parse(&data, path).map_err(|e| e.to_string())?;
    if elf.is_stripped() {
        return Err("an ELF without symbols or DWARF (stripped)".into());
    }
    Ok(())
}

/// `--window`: `0xSTART-0xEND` as is, else a function of the kernel ELF by name (full,
/// or a tail after `::`, as `--focus` takes it).
pub fn window_range(spec: &str, elf: Option<&Path>) -> Result<Range<u64>, RecordError> {
    let err = |why: String| RecordError::Window {
        name: spec.to_string(),
        why,
    };
    if let Some(r) = parse_range(spec) {
        return r.map_err(err);
    }
    let elf = elf.ok_or_else(|| {
        err("naming a function needs the kernel's ELF (--kernel, or QEMU's -kernel); or give 0xSTART-0xEND".into())
    })?;
    let image = ElfImage::load(elf).map_err(|e| err(e.to_string()))?;
    let mut found: Vec<(Range<u64>, &str)> = image
        .symbols
        .symbols()
        .iter()
        .filter(|s| matches(&s.name, spec))
        .map(|s| (s.start..s.end, &*s.name))
        .collect();
    found.dedup_by(|a, b| a.0 == b.0);
    match found.as_slice() {
        [] => Err(err(format!(
            "no function of that name in {}",
            elf.display()
        ))),
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
        let e = symbol_sources(None, &[], None).unwrap_err().to_string();
        assert!(e.starts_with("the QEMU command has no -kernel"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("bzImage");
        std::fs::write(&img, b"MZ not an elf at all").unwrap();
        let e = symbol_sources(None, &[], Some(&img))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bzImage: not an ELF"), "{e}");
        assert!(e.contains("--kernel ELF"), "{e}");
        let e = symbol_sources(Some(&img), &[], None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--kernel "), "{e}");
        // A symbol map alone will do.
        let map = dir.path().join("System.map");
        std::fs::write(&map, "c0100000 T start\n").unwrap();
        let s = symbol_sources(None, std::slice::from_ref(&map), Some(&img)).unwrap();
        assert_eq!((s.elf, s.symbols), (None, vec![map]));
    }
}
