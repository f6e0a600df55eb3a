//! From a [`Spec`] and the kernel's symbols to the hooks: each function's entry address and
//! where each of its arguments is at that entry. Every problem names the SPEC line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kern_profile_format::memtrace::Op;
use kern_profile_format::{read_elf_input, AllocTable, Arch, ElfInput, HookedFunction};

use super::args::{convention_arg, Location};
use super::dwarf::{entry_parameters, Param};
use super::error::HookError;
use super::spec::{ArgSpec, FunctionSpec, Role, Spec, Where};
use super::symbols::{Lookup, SymbolIndex};

/// Where the kernel's symbols come from (`elf=` or `symbols=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SymbolSource {
    /// The kernel's ELF: symbol table and DWARF.
    Elf(PathBuf),
    /// A text symbol map: names and addresses only, so arguments by `argN`.
    Map(PathBuf),
}

impl SymbolSource {
    fn describe(&self) -> String {
        match self {
            SymbolSource::Elf(p) => format!("elf={}", p.display()),
            SymbolSource::Map(p) => format!("symbols={}", p.display()),
        }
    }
}

/// One hooked function: where it starts and where its arguments are there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub entry: u64,
    /// Its index in the table (and in [`HookSet::hooks`]).
    pub id: u16,
    pub allocator: u16,
    pub op: Op,
    pub size: Option<Location>,
    pub count: Option<Location>,
    pub order: Option<Location>,
    pub ptr: Option<Location>,
    /// A bulk call's array of object pointers (`count` of them).
    pub array: Option<Location>,
}

/// The functions to hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSet {
    pub arch: Arch,
    /// By id.
    pub hooks: Vec<Hook>,
    /// What the raw file's allocator table records.
    pub table: AllocTable,
    /// Optional functions (`?NAME`) the kernel lacks.
    pub skipped: Vec<String>,
    by_entry: HashMap<u64, u16>,
}

impl HookSet {
    /// Loads the symbols and resolves `spec` against them for a guest of `arch`.
    pub fn load(spec: &Spec, source: &SymbolSource, arch: Arch) -> Result<HookSet, HookError> {
        match source {
            SymbolSource::Map(path) => {
                let text = std::fs::read(path).map_err(|e| file_err("symbols", path, e))?;
                let index = SymbolIndex::from_map(&String::from_utf8_lossy(&text));
                if index.is_empty() {
                    return Err(HookError::SymbolFile {
                        arg: "symbols",
                        path: path.clone(),
                        what: "no code symbol (lines `ADDRESS t|T NAME`, as in System.map, nm output or /proc/kallsyms)".into(),
                    });
                }
                resolve(spec, &index, &|_| None, arch, &source.describe())
            }
            SymbolSource::Elf(path) => load_elf(spec, path, arch, &source.describe()),
        }
    }

    /// The hook whose function starts at `addr`.
    pub fn at(&self, addr: u64) -> Option<&Hook> {
        self.by_entry.get(&addr).map(|&i| &self.hooks[i as usize])
    }

    /// Every register an argument is read from, for the plugin to find QEMU's handles.
    pub fn registers(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self
            .hooks
            .iter()
            .flat_map(|h| [h.size, h.count, h.order, h.ptr])
            .filter_map(|l| match l {
                Some(Location::Register(r)) => Some(r),
                _ => None,
            })
            .collect();
        v.push(super::args::return_register(self.arch));
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn file_err(arg: &'static str, path: &Path, e: std::io::Error) -> HookError {
    HookError::SymbolFile {
        arg,
        path: path.to_path_buf(),
        what: format!("cannot read: {e}"),
    }
}

fn load_elf(spec: &Spec, path: &Path, arch: Arch, source: &str) -> Result<HookSet, HookError> {
    let bad = |what: String| HookError::SymbolFile {
        arg: "elf",
        path: path.to_path_buf(),
        what,
    };
    // The magic first: a large file that is no ELF is refused before it is read.
    let wrong_arch = |what: &str, found: Option<Arch>| {
        bad(format!(
            "{what} for {}, but the guest is {}: give the kernel that runs",
            found.map_or("another architecture", |a| a.name()),
            arch.name()
        ))
    };
    // A Linux image, or a vmlinux without symbols: names from its kallsyms, arguments by
    // the calling convention (as with symbols=).
    let from_image = || {
        let (index, found) = SymbolIndex::from_kernel_image(path)
            .map_err(|e| bad(format!("not an ELF with symbols, nor a Linux image ({e})")))?;
        if found != Some(arch) {
            return Err(wrong_arch("a Linux image", found));
        }
        resolve(spec, &index, &|_| None, arch, source)
    };
    let data = match read_elf_input(path).map_err(|e| file_err("elf", path, e))? {
        ElfInput::Elf(data) => data,
        ElfInput::NotElf(_) => return from_image(),
    };
    let file = object::File::parse(&*data).map_err(|e| bad(format!("not an ELF: {e}")))?;
    // One marked i386 but 64-bit is x86_64's; the plugin says so when it reads elf='s tables.
    let elf_arch = kern_profile_arch::elf_guest(
        object::Object::architecture(&file),
        object::Object::is_64(&file),
    )
    .map(|g| g.arch);
    if elf_arch != Some(arch) {
        return Err(wrong_arch("an ELF", elf_arch));
    }
    let index = SymbolIndex::from_elf(&file);
    if index.is_empty() {
        drop(file);
        return from_image();
    }
    // DWARF only for the functions hooked, read once.
    let mut entries: Vec<u64> = spec
        .functions
        .iter()
        .filter_map(|f| match index.lookup(&f.function) {
            Lookup::Found(s) => Some(s.addr),
            _ => None,
        })
        .collect();
    entries.sort_unstable();
    entries.dedup();
    let params = entry_parameters(&file, data.len(), arch, &entries)
        .map_err(|e| bad(format!("unreadable DWARF: {e}")))?;
    resolve(
        spec,
        &index,
        &|addr| params.get(&addr).cloned(),
        arch,
        source,
    )
}

/// Resolves every line of `spec`: the function's address from `index`, its arguments from
/// `params` (DWARF parameters of the function at an address, `None` without DWARF) or the
/// calling convention. `source` names the symbols in messages.
pub fn resolve(
    spec: &Spec,
    index: &SymbolIndex,
    params: &dyn Fn(u64) -> Option<Vec<Param>>,
    arch: Arch,
    source: &str,
) -> Result<HookSet, HookError> {
    let mut set = HookSet {
        arch,
        hooks: Vec::new(),
        table: AllocTable::default(),
        skipped: Vec::new(),
        by_entry: HashMap::new(),
    };
    let mut lines: HashMap<u64, usize> = HashMap::new();
    for f in &spec.functions {
        let err = |what: String| HookError::Line {
            spec: spec.name.clone(),
            line: f.line,
            text: f.text.clone(),
            what,
        };
        let sym = match index.lookup(&f.function) {
            Lookup::Found(s) => s,
            Lookup::Missing { .. } if f.optional => {
                set.skipped.push(f.function.clone());
                continue;
            }
            Lookup::Missing { similar } => {
                let hint = match similar.is_empty() {
                    true => "no similar name".to_string(),
                    false => format!("similar: {}", similar.join(", ")),
                };
                return Err(err(format!(
                    "`{}` is not a function of {source} ({hint})",
                    f.function
                )));
            }
            Lookup::Ambiguous(v) => {
                let list: Vec<String> = v
                    .iter()
                    .map(|s| format!("{} at {:#x}", s.name, s.addr))
                    .collect();
                return Err(err(format!(
                    "`{}` names {} functions of {source}: {}; write more of its path",
                    f.function,
                    v.len(),
                    list.join(", ")
                )));
            }
        };
        if let Some(other) = lines.insert(sym.addr, f.line) {
            return Err(err(format!(
                "`{}` ({:#x}) is hooked already, by line {other}",
                sym.name, sym.addr
            )));
        }
        let fn_params = params(sym.addr);
        let locate = |role: Role| -> Result<Option<Location>, String> {
            f.arg(role)
                .map(|a| locate_arg(a, &sym.name, fn_params.as_deref(), arch, spec, source))
                .transpose()
        };
        let id = u16::try_from(set.hooks.len())
            .map_err(|_| err("more than 65535 functions to hook".into()))?;
        let allocator = allocator_id(&mut set.table, &f.allocator).map_err(err)?;
        let hook = Hook {
            entry: sym.addr,
            id,
            allocator,
            op: f.op,
            size: locate(Role::Size).map_err(err)?,
            count: locate(Role::Count).map_err(err)?,
            order: locate(Role::Order).map_err(err)?,
            ptr: locate(Role::Ptr).map_err(err)?,
            array: locate(Role::Array).map_err(err)?,
        };
        set.table.functions.push(HookedFunction {
            entry: sym.addr,
            allocator,
            op: f.op,
            name: sym.name.clone(),
        });
        set.by_entry.insert(sym.addr, id);
        set.hooks.push(hook);
    }
    if set.hooks.is_empty() {
        return Err(HookError::Spec {
            spec: spec.name.clone(),
            what: format!(
                "none of its functions is in {source} (looked for: {})",
                names(&spec.functions)
            ),
        });
    }
    Ok(set)
}

fn names(functions: &[FunctionSpec]) -> String {
    let v: Vec<&str> = functions.iter().map(|f| f.function.as_str()).collect();
    v.join(", ")
}

fn allocator_id(table: &mut AllocTable, name: &str) -> Result<u16, String> {
    if let Some(i) = table.allocators.iter().position(|a| a == name) {
        return Ok(i as u16);
    }
    let id = u16::try_from(table.allocators.len())
        .map_err(|_| "more than 65535 allocators".to_string())?;
    table.allocators.push(name.to_string());
    Ok(id)
}

/// The first of an argument's choices that resolves; otherwise why none did.
fn locate_arg(
    arg: &ArgSpec,
    function: &str,
    params: Option<&[Param]>,
    arch: Arch,
    spec: &Spec,
    source: &str,
) -> Result<Location, String> {
    let mut why = Vec::new();
    for choice in &arg.choices {
        match choice {
            Where::Arg(n) => return Ok(convention_arg(arch, spec.convention, *n)),
            Where::Param(name) => match params {
                None => why.push(format!(
                    "`{name}`: {source} has no DWARF for `{function}`; give argN"
                )),
                Some(ps) => match ps.iter().find(|p| &p.name == name) {
                    Some(p) => match &p.location {
                        Ok(loc) => return Ok(*loc),
                        Err(e) => {
                            why.push(format!("parameter `{name}` of `{function}` {e}; give argN"))
                        }
                    },
                    None => {
                        let have: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
                        why.push(format!(
                            "`{function}` has no parameter `{name}` (its parameters: {})",
                            if have.is_empty() {
                                "none".to_string()
                            } else {
                                have.join(", ")
                            }
                        ));
                    }
                },
            },
        }
    }
    Err(format!("{}={}", arg.role.name(), why.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc_hooks::symbols::Symbol;

    fn index() -> SymbolIndex {
        SymbolIndex::new(
            [
                ("kernel::kalloc::kmalloc", 0x1000),
                ("kernel::kalloc::krealloc", 0x1100),
                ("kernel::kalloc::kfree", 0x1200),
                ("kernel::kalloc::pages_alloc", 0x1300),
                ("other::kfree", 0x1400),
            ]
            .into_iter()
            .map(|(n, a)| Symbol {
                name: n.into(),
                addr: a,
            })
            .collect(),
        )
    }

    /// DWARF as rustc gives it for the example kernel: kmalloc's size in ecx, krealloc's
    /// pointer in ecx and size in edx; pages_alloc's parameter optimised out at entry.
    fn params(addr: u64) -> Option<Vec<Param>> {
        let p = |n: &str, l: Result<Location, String>| Param {
            name: n.into(),
            location: l,
        };
        match addr {
            0x1000 => Some(vec![p("size", Ok(Location::Register("ecx")))]),
            0x1100 => Some(vec![
                p("ptr", Ok(Location::Register("ecx"))),
                p("size", Ok(Location::Register("edx"))),
            ]),
            0x1200 => Some(vec![p("ptr", Ok(Location::Register("ecx")))]),
            0x1300 => Some(vec![p("n", Err("has no location (optimised out)".into()))]),
            _ => None,
        }
    }

    fn run(text: &str) -> Result<HookSet, HookError> {
        let spec = Spec::parse("t.spec", text)?;
        resolve(&spec, &index(), &params, Arch::I386, "elf=k.elf")
    }

    fn err(text: &str) -> String {
        run(text).unwrap_err().to_string()
    }

    #[test]
    fn resolves_names_dwarf_parameters_and_conventions() {
        let set = run("convention regparm3\n\
                 kmalloc alloc kmalloc size=size\n\
                 kmalloc realloc kernel::kalloc::krealloc ptr=ptr size=size\n\
                 kmalloc free kalloc::kfree ptr=ptr\n\
                 pages alloc pages_alloc size=n|arg0\n\
                 pages free ?pages_free ptr=arg0\n")
        .unwrap();
        assert_eq!(set.hooks.len(), 4);
        assert_eq!(set.skipped, ["pages_free"]);
        let h = set.at(0x1100).unwrap();
        assert_eq!((h.id, h.allocator, h.op), (1, 0, Op::Realloc));
        assert_eq!(h.ptr, Some(Location::Register("ecx")));
        assert_eq!(h.size, Some(Location::Register("edx")));
        // pages_alloc's `n` has no location: the convention (regparm3: eax) takes over.
        let p = set.at(0x1300).unwrap();
        assert_eq!((p.allocator, p.size), (1, Some(Location::Register("eax"))));
        assert_eq!(set.table.allocators, ["kmalloc", "pages"]);
        assert_eq!(set.table.functions[2].name, "kernel::kalloc::kfree");
        assert_eq!(set.registers(), ["eax", "ecx", "edx"]);
        assert!(set.at(0x1400).is_none());
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        assert_eq!(
            err("a alloc kmalloc size=size\na alloc kmallok size=arg0"),
            "alloc=t.spec, line 2 (`a alloc kmallok size=arg0`): `kmallok` is not a function of elf=k.elf (no similar name)"
        );
        assert!(err("a alloc alloc::kmalloc size=arg0")
            .contains("is not a function of elf=k.elf (similar: kernel::kalloc::kmalloc)"));
        assert!(err("a free kfree ptr=arg0").contains(
            "`kfree` names 2 functions of elf=k.elf: kernel::kalloc::kfree at 0x1200, other::kfree at 0x1400; write more of its path"
        ));
        assert!(err("a alloc kmalloc size=bytes").contains(
            "size=`kernel::kalloc::kmalloc` has no parameter `bytes` (its parameters: size)"
        ));
        assert!(err("a alloc pages_alloc size=n")
            .contains("parameter `n` of `kernel::kalloc::pages_alloc` has no location (optimised out); give argN"));
        assert!(err("a free other::kfree ptr=p")
            .contains("`p`: elf=k.elf has no DWARF for `other::kfree`; give argN"));
        assert!(err("a alloc kmalloc\nb alloc kernel::kalloc::kmalloc")
            .contains("line 2 (`b alloc kernel::kalloc::kmalloc`): `kernel::kalloc::kmalloc` (0x1000) is hooked already, by line 1"));
        assert_eq!(
            err("a alloc ?nothing\na free ?gone ptr=arg0"),
            "alloc=t.spec: none of its functions is in elf=k.elf (looked for: nothing, gone)"
        );
    }
}
