//! kern-profile's symbols: addresses to names and names to addresses, for the reports and
//! for the plugin's `alloc=` hooks alike ([`by_name`]), with the same demangling (Rust
//! without hash, C++, FreePascal) and the same bound on decompressed sections ([`Budget`]).
//!
//! Address → function frames, from DWARF (with inlined functions), the ELF symbol table,
//! or a text symbol map; each distinct address resolved once and cached.
//!
//! Resolution order for one address:
//! 1. DWARF (`addr2line`): the chain of inlined functions at the address, innermost first,
//!    each with its file and line. The outermost (real) function takes its name from the
//!    symbol table when a symbol covers the address (the linker name is the full path, where
//!    DWARF may only hold the last path segment), else from DWARF. A linkage name in no
//!    scheme the demangler knows gives way to the DWARF name with its scope.
//! 2. The ELF symbol table.
//! 3. The `--symbols` sources, in the order given: text maps, and the symbol tables of
//!    further ELFs (e.g. Linux's decompressor, `arch/x86/boot/compressed/vmlinux`).
//!
//! Callers pass *probe* addresses: the sampled PC as is, a return address minus one (so
//! that the call instruction, not the one after it, is looked up).
//!
//! riscv64 and aarch64 samples whose walk misses the sampled function's caller take it from
//! the recorded return-address register ([`Symbolizer::caller_in_register`], from the ELF's
//! call-frame information or prologue analysis); x86 samples of older recordings from the word
//! at `[SP]` ([`Symbolizer::caller_skipped`]).
//!
//! User programs (`--user`): each binary gets a symbolizer of its own, the same resolution
//! order over its ELF; an address belongs to the first binary whose loadable segments
//! (PT_LOAD) hold it ([`Symbolizer::user_binary_of`]).

pub mod budget;
pub mod by_name;
pub mod cfi;
mod demangle;
mod dwarf_name;
pub mod elf;
mod kernel_file;
mod return_register;
pub mod symbol_map;
pub mod table;
mod warning;

use std::path::{Path, PathBuf};
use std::rc::Rc;

use kern_profile_arch::x86::insn as x86;
use kern_profile_format::Arch;
use rustc_hash::{FxHashMap, FxHashSet};

pub use budget::Budget;
pub use demangle::{demangle, sanitize};
pub use elf::ElfImage;
pub use kernel_file::{kernel_os_of_image, KallsymsNames, KernelFile, LINUX_SYMBOLS};
pub use return_register::{Corrections, Source};
pub use table::{Symbol, SymbolTable};
pub use warning::SymbolWarning;

/// What can go wrong when loading symbols.
#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    #[error("cannot read {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not an ELF file: {reason}", path.display())]
    NotElf { path: PathBuf, reason: String },
    #[error(
        "{} is {what} for {elf}, but the samples come from a guest of {samples}; \
         pass the kernel that ran",
        path.display()
    )]
    ArchMismatch {
        path: PathBuf,
        /// `an ELF`, `a Linux image`.
        what: &'static str,
        elf: String,
        samples: &'static str,
    },
    #[error(
        "{} has no symbols and no debug information (stripped?): nothing can be named. \
         Build the kernel with `-C force-frame-pointers=yes` and debug info (`-g`, or \
         `debug = true` in its Cargo profile), don't strip it, or pass a symbol map with \
         `--symbols System.map`",
        path.display()
    )]
    Stripped { path: PathBuf },
    #[error("{}:{line}: {what}", path.display())]
    BadSymbolMap {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error(
        "{} holds no code symbols (expected `nm`, System.map or /proc/kallsyms lines like \
         `c0100000 T name`)",
        path.display()
    )]
    EmptySymbolMap { path: PathBuf },
    #[error(
        "{}: every address is 0 (/proc/kallsyms read without privileges: read it as root, or \
         set kernel.kptr_restrict=0)",
        path.display()
    )]
    ZeroAddresses { path: PathBuf },
    #[error(
        "{} is an ELF without code symbols (stripped?): as a --symbols source it names nothing",
        path.display()
    )]
    NoElfSymbols { path: PathBuf },
    #[error("{source}")]
    Image {
        path: PathBuf,
        source: kern_profile_linux_image::ImageError,
    },
    #[error(
        "{source}; a Linux {container} names its functions from these tables, so nothing can \
         be named: pass the kernel's vmlinux with symbols (its debug package) as the kernel, \
         or its System.map with --symbols"
    )]
    NoKallsyms {
        container: String,
        source: kern_profile_linux_image::ImageError,
    },
    #[error("no symbol source: give the kernel ELF, or a symbol map with --symbols")]
    NoSource,
}

/// One function frame at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Demangled function name (without hash), safe for the folded format.
    pub function: Rc<str>,
    /// Inlined into the frame after it (its caller).
    pub inlined: bool,
    pub file: Option<Rc<str>>,
    pub line: Option<u32>,
}

/// Resolves addresses to frames, caching each probe address.
pub struct Symbolizer {
    elf: Option<ElfImage>,
    /// The `--symbols` sources' tables, looked up after the ELF's in this order.
    maps: Vec<SymbolTable>,
    /// The ELFs among the `--symbols` sources, for [`Symbolizer::check_arch`].
    extra_elfs: Vec<ElfMachine>,
    /// Probe address → frames, innermost first.
    cache: FxHashMap<u64, Rc<[Frame]>>,
    /// Function start addresses (from every symbol source).
    starts: FxHashSet<u64>,
    /// PC → where it stands in its function's frame set-up.
    skip_memo: FxHashMap<u64, FrameSetup>,
    names: FxHashMap<Box<str>, Rc<str>>,
    /// A DWARF unit (by offset) → what names its functions, for symbols whose linkage name
    /// is in no known scheme (`None`: its tree cannot be read).
    dwarf_units: FxHashMap<u64, Option<dwarf_name::UnitNames>>,
    /// User programs (`--user`), in the order given.
    users: Vec<UserBinary>,
    /// The lowest function start: where a kernel named by a symbol map begins.
    lowest_start: Option<u64>,
    /// riscv64 and aarch64: the leaf and prologue correction's caches and counts.
    ra_fix: return_register::ReturnRegisterFix,
    /// Kernel stacks cut at a return address that is no code ([`Symbolizer::no_code`]).
    no_code_cuts: u64,
}

/// A symbol source whose architecture is checked: an ELF given with `--symbols` (only its
/// symbol table is used), or a Linux image named from its kallsyms.
#[derive(Debug, Clone)]
struct ElfMachine {
    path: PathBuf,
    /// `an ELF`, `a Linux image`.
    what: &'static str,
    arch: Option<Arch>,
    machine: String,
}

impl ElfMachine {
    fn names_kernel(&self) -> bool {
        self.what == "a Linux image"
    }
}

/// One symbol source besides the kernel ELF, loaded.
struct SymbolSource {
    table: SymbolTable,
    /// `Some` for an ELF or an image: its architecture is checked.
    elf: Option<ElfMachine>,
    /// Names the kernel itself (a text map, kallsyms), rather than another image such as a
    /// decompressor at low addresses: its lowest function bounds the kernel's range.
    names_kernel: bool,
}

impl SymbolSource {
    /// A text map (nm, System.map, /proc/kallsyms) or an ELF's symbol table, told by the
    /// file's first bytes (`\x7fELF`).
    fn load(path: &Path) -> Result<Self, SymbolError> {
        if !starts_as_elf(path)? {
            return Ok(SymbolSource {
                table: symbol_map::load(path)?,
                elf: None,
                names_kernel: true,
            });
        }
        let image = ElfImage::load(path)?;
        if image.symbols.is_empty() {
            return Err(SymbolError::NoElfSymbols {
                path: path.to_path_buf(),
            });
        }
        Ok(SymbolSource {
            elf: Some(ElfMachine {
                path: path.to_path_buf(),
                what: "an ELF",
                arch: image.arch,
                machine: image.machine,
            }),
            table: image.symbols,
            names_kernel: false,
        })
    }

    /// The kallsyms names of the kernel image at `path`.
    fn kallsyms(names: KallsymsNames, path: &Path) -> Self {
        SymbolSource {
            elf: Some(ElfMachine {
                path: path.to_path_buf(),
                what: "a Linux image",
                arch: names.arch,
                machine: names
                    .arch
                    .map_or("another architecture", |a| a.name())
                    .into(),
            }),
            table: names.table,
            names_kernel: true,
        }
    }
}

/// Whether the file at `path` begins with the ELF magic.
fn starts_as_elf(path: &Path) -> Result<bool, SymbolError> {
    use std::io::Read;
    let open_err = |source| SymbolError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = kern_profile_format::open_input(path).map_err(open_err)?;
    let mut magic = Vec::with_capacity(4);
    file.take(4).read_to_end(&mut magic).map_err(open_err)?;
    Ok(magic == kern_profile_format::ELF_MAGIC)
}

/// A user program's ELF and its own symbolizer.
struct UserBinary {
    /// The name its stacks are shown under (the file name).
    name: Rc<str>,
    sym: Symbolizer,
}

impl Symbolizer {
    /// A symbolizer over an ELF and/or symbol maps (looked up after the ELF, in order).
    /// Fails when nothing can name anything.
    pub fn new(elf: Option<ElfImage>, maps: Vec<SymbolTable>) -> Result<Self, SymbolError> {
        let sources = maps
            .into_iter()
            .map(|table| SymbolSource {
                table,
                elf: None,
                names_kernel: true,
            })
            .collect();
        Self::with_sources(elf, sources)
    }

    fn with_sources(
        elf: Option<ElfImage>,
        sources: Vec<SymbolSource>,
    ) -> Result<Self, SymbolError> {
        match &elf {
            None if sources.is_empty() => return Err(SymbolError::NoSource),
            Some(e) if sources.is_empty() && e.is_stripped() => {
                return Err(SymbolError::Stripped {
                    path: e.path.clone(),
                })
            }
            _ => {}
        }
        Ok(Self::build(elf, sources))
    }

    /// A symbolizer over whatever `elf` and `sources` hold, even nothing.
    fn build(elf: Option<ElfImage>, sources: Vec<SymbolSource>) -> Self {
        let mut starts = FxHashSet::default();
        if let Some(e) = &elf {
            starts.extend(e.symbols.starts());
        }
        for s in &sources {
            starts.extend(s.table.starts());
        }
        // The kernel's range without its ELF: from its text maps (an ELF among the sources is
        // another image, e.g. a decompressor at low addresses).
        let lowest_start = sources
            .iter()
            .filter(|s| s.names_kernel)
            .flat_map(|s| s.table.starts())
            .filter(|&a| a != 0)
            .min();
        let mut maps = Vec::with_capacity(sources.len());
        let mut extra_elfs = Vec::new();
        for s in sources {
            maps.push(s.table);
            extra_elfs.extend(s.elf);
        }
        Symbolizer {
            elf,
            maps,
            extra_elfs,
            lowest_start,
            cache: FxHashMap::default(),
            starts,
            skip_memo: FxHashMap::default(),
            names: FxHashMap::default(),
            dwarf_units: FxHashMap::default(),
            users: Vec::new(),
            ra_fix: Default::default(),
            no_code_cuts: 0,
        }
    }

    /// Adds a user program: user-mode addresses in its loadable segments are named from it.
    /// Its name (the file name, or the path when two binaries share a file name) roots its
    /// stacks as `[user] NAME`. A stripped program is taken too: it names no function, but
    /// its segments and code still tell its samples apart and root them at its name (a
    /// distribution's static busybox).
    pub fn add_user_binary(&mut self, path: &Path) -> Result<(), SymbolError> {
        let elf = ElfImage::load(path)?;
        if elf.segments().is_empty() {
            return Err(SymbolError::NotElf {
                path: path.to_path_buf(),
                reason: "no loadable segment (PT_LOAD): not an executable for --user".into(),
            });
        }
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let name = if self.users.iter().any(|u| *u.name == *file) {
            path.display().to_string()
        } else {
            file
        };
        let sym = Symbolizer::build(Some(elf), Vec::new());
        self.users.push(UserBinary {
            name: Rc::from(sanitize(&name).into_owned()),
            sym,
        });
        Ok(())
    }

    /// True when user programs were given (`--user`).
    pub fn has_user_binaries(&self) -> bool {
        !self.users.is_empty()
    }

    /// The user program whose loadable segments hold `addr` (the first given, if several).
    pub fn user_binary_of(&self, addr: u64) -> Option<usize> {
        self.users
            .iter()
            .position(|u| u.sym.elf.as_ref().is_some_and(|e| e.loads(addr)))
    }

    /// The number of user programs.
    pub fn user_binary_count(&self) -> usize {
        self.users.len()
    }

    /// The ELF of user program `i`.
    pub fn user_elf(&self, i: usize) -> Option<&ElfImage> {
        self.users.get(i).and_then(|u| u.sym.elf.as_ref())
    }

    /// The user programs whose loadable segments hold `addr`, in the order given.
    pub fn user_binaries_holding(&self, addr: u64) -> impl Iterator<Item = usize> + '_ {
        (0..self.users.len()).filter(move |&i| self.user_elf(i).is_some_and(|e| e.loads(addr)))
    }

    /// The name of user program `i`.
    pub fn user_binary_name(&self, i: usize) -> Rc<str> {
        self.users[i].name.clone()
    }

    /// The symbolizer of user program `i`.
    pub fn user_symbolizer(&mut self, i: usize) -> &mut Symbolizer {
        &mut self.users[i].sym
    }

    /// True when the kernel ELF's loadable segments hold `addr`.
    pub fn kernel_loads(&self, addr: u64) -> bool {
        self.elf.as_ref().is_some_and(|e| e.loads(addr))
    }

    /// True when `probe` (a return address less one, or an interrupted PC) lies in the
    /// kernel ELF's loadable segments but in none of its executable sections: a return
    /// address that is no code (data, a stack, `.bss`), garbage a walk read as a frame.
    pub fn no_code(&self, probe: u64) -> bool {
        self.elf
            .as_ref()
            .is_some_and(|e| e.loads(probe) && e.code_at(probe, 1).is_none())
    }

    /// Counts a stack cut at a return address that is no code.
    pub fn count_no_code_cut(&mut self) {
        self.count_no_code_cuts(1);
    }

    /// [`Symbolizer::count_no_code_cut`] for `n` stacks.
    pub fn count_no_code_cuts(&mut self, n: u64) {
        self.no_code_cuts = self.no_code_cuts.saturating_add(n);
    }

    /// Stacks cut so far at a return address that is no code.
    pub fn no_code_cuts(&self) -> u64 {
        self.no_code_cuts
    }

    /// True when `addr` lies in the kernel: its ELF's loadable segments, or with symbol
    /// maps alone, at or above their lowest function.
    pub fn kernel_holds(&self, addr: u64) -> bool {
        match &self.elf {
            Some(e) => e.loads(addr),
            None => self.lowest_start.is_some_and(|low| addr >= low),
        }
    }

    /// True when `addr` lies below all the kernel's code (its ELF's lowest executable
    /// section, or with symbol maps alone, its lowest function): where user programs and a
    /// decompressor run on every kernel we know. Not its lowest segment: x86_64 Linux links
    /// its per-CPU data at 0.
    pub fn below_kernel(&self, addr: u64) -> bool {
        let low = match &self.elf {
            Some(e) => e.lowest_code(),
            None => self.lowest_start,
        };
        low.is_some_and(|low| addr < low)
    }

    /// True when `addr` is the kernel's rather than a user program's: in the kernel's range
    /// ([`Symbolizer::kernel_holds`]) and, where a user program holds it too, named by a
    /// kernel symbol (a kernel named by symbol maps alone holds everything above its lowest
    /// function, user programs linked there included).
    pub fn kernel_address(&self, addr: u64) -> bool {
        self.kernel_holds(addr)
            && (self.user_binary_of(addr).is_none() || self.symbol_name(addr).is_some())
    }

    /// Loads `elf` and/or the `--symbols` sources `symbols`: each a text map (nm,
    /// System.map, /proc/kallsyms) or an ELF, whose symbol table is used, told by its magic.
    pub fn load(elf: Option<&Path>, symbols: &[PathBuf]) -> Result<Self, SymbolError> {
        let kernel = elf
            .map(|p| KernelFile::load(p).map(|k| (k, p)))
            .transpose()?;
        Self::with_kernel(kernel, symbols)
    }

    /// As [`Symbolizer::load`], over a kernel already loaded from `path` (a caller that reads
    /// its unwind tables too loads it once).
    pub fn with_kernel(
        kernel: Option<(KernelFile, &Path)>,
        symbols: &[PathBuf],
    ) -> Result<Self, SymbolError> {
        let mut sources = Vec::new();
        let elf = match kernel {
            Some((kernel, path)) => {
                sources.extend(kernel.kallsyms.map(|k| SymbolSource::kallsyms(k, path)));
                kernel.elf
            }
            None => None,
        };
        for p in symbols {
            sources.push(SymbolSource::load(p)?);
        }
        Self::with_sources(elf, sources)
    }

    pub fn elf(&self) -> Option<&ElfImage> {
        self.elf.as_ref()
    }

    /// The kernel's symbols, in lookup order: the ELF's symbol table, then the other sources'
    /// (a Linux image's kallsyms, `--symbols` maps).
    pub fn kernel_symbols(&self) -> impl Iterator<Item = &Symbol> + '_ {
        let elf = self.elf.iter().flat_map(|e| e.symbols.symbols());
        elf.chain(self.maps.iter().flat_map(|m| m.symbols()))
    }

    /// Warnings from loading (e.g. unreadable DWARF), the user programs' included.
    pub fn warnings(&self) -> Vec<SymbolWarning> {
        let mut w = self.elf.as_ref().map_or(Vec::new(), |e| e.warnings.clone());
        for u in &self.users {
            w.extend(u.sym.warnings());
        }
        w
    }

    /// Checks that the ELFs (if any; user programs too) are of the samples' architecture.
    pub fn check_arch(&self, samples: Arch) -> Result<(), SymbolError> {
        for u in &self.users {
            u.sym.check_arch(samples)?;
        }
        let mismatch = |path: &Path, what, arch: Option<Arch>, machine: &str| {
            (arch != Some(samples)).then(|| SymbolError::ArchMismatch {
                path: path.to_path_buf(),
                what,
                elf: machine.to_string(),
                samples: samples.name(),
            })
        };
        // A Linux image first: its vmlinux (`self.elf`) has its path and arch.
        let (images, others): (Vec<&ElfMachine>, Vec<&ElfMachine>) =
            self.extra_elfs.iter().partition(|e| e.names_kernel());
        for e in images {
            if let Some(err) = mismatch(&e.path, e.what, e.arch, &e.machine) {
                return Err(err);
            }
        }
        if let Some(e) = &self.elf {
            if let Some(err) = mismatch(&e.path, "an ELF", e.arch, &e.machine) {
                return Err(err);
            }
        }
        for e in others {
            if let Some(err) = mismatch(&e.path, e.what, e.arch, &e.machine) {
                return Err(err);
            }
        }
        Ok(())
    }

    /// Frames at `probe`, innermost (most inlined) first, the real function last. Empty when
    /// nothing knows the address.
    pub fn frames(&mut self, probe: u64) -> Rc<[Frame]> {
        if let Some(f) = self.cache.get(&probe) {
            return f.clone();
        }
        let f: Rc<[Frame]> = self.resolve(probe).into();
        self.cache.insert(probe, f.clone());
        f
    }

    /// Number of distinct addresses resolved so far (user programs' included).
    pub fn resolved(&self) -> usize {
        self.cache.len() + self.users.iter().map(|u| u.sym.resolved()).sum::<usize>()
    }

    /// True when a sample at `pc`, with `sp_word` at `[SP]`, was taken where the frame-pointer
    /// walk misses the caller, whose return address is then the word at `[SP]`: at a
    /// function's first instruction (before `push ebp`), at a `ret` (after `pop ebp`), or
    /// near a function's start (shrink-wrapped prologues run an early-exit test before
    /// `push ebp`). In each case the word must also be a return address: it follows a call
    /// of this function (a direct `call` to its start; at its start or a `ret`, also an
    /// indirect call). The plugin reads SP at the entry of the block it samples in, which
    /// may be a few instructions before the PC: the check keeps a `ret` sampled inside a
    /// block (`add esp, 8; pop ebp; ret`) from taking a local variable for a caller.
    pub fn caller_skipped(&mut self, pc: u64, sp_word: u64) -> bool {
        match self.frame_setup_memo(pc) {
            FrameSetup::Done => false,
            FrameSetup::Missing { start } => self.follows_call(sp_word, start, true),
            FrameSetup::MaybeMissing { start } => self.follows_call(sp_word, Some(start), false),
        }
    }

    /// Whether [`Symbolizer::caller_skipped`] asks about the word at all for a sample at
    /// `pc` (false: the function set up its frame there, whatever the word).
    pub fn word_may_be_caller(&mut self, pc: u64) -> bool {
        !matches!(self.frame_setup_memo(pc), FrameSetup::Done)
    }

    fn frame_setup_memo(&mut self, pc: u64) -> FrameSetup {
        match self.skip_memo.get(&pc) {
            Some(&s) => s,
            None => {
                let s = self.frame_setup(pc);
                self.skip_memo.insert(pc, s);
                s
            }
        }
    }

    fn frame_setup(&self, pc: u64) -> FrameSetup {
        if self.starts.contains(&pc) {
            return FrameSetup::Missing { start: Some(pc) };
        }
        let Some(elf) = self.elf.as_ref() else {
            return FrameSetup::Done;
        };
        if elf.code_at(pc, x86::RET_BYTES).is_some_and(x86::is_ret) {
            let start = elf.symbols.lookup(pc).map(|s| s.start);
            return FrameSetup::Missing { start };
        }
        match elf.symbols.lookup(pc) {
            Some(sym) if pc - sym.start < x86::PROLOGUE_WINDOW => {
                FrameSetup::MaybeMissing { start: sym.start }
            }
            _ => FrameSetup::Done,
        }
    }

    /// True when `ret` is the address right after a call: a `call rel32` to `start` (to
    /// anywhere when `start` is unknown), or with `indirect`, a `call r/m` (`FF /2`), whose
    /// target the code does not tell.
    fn follows_call(&self, ret: u64, start: Option<u64>, indirect: bool) -> bool {
        let Some(elf) = self.elf.as_ref() else {
            // A symbol map alone: no code to check; trust a sample at a function's start.
            return indirect;
        };
        let before = |n: u64| {
            ret.checked_sub(n)
                .and_then(|at| elf.code_at(at, n as usize))
        };
        if let Some(target) = before(5).and_then(|b| x86::direct_call_target(b, ret)) {
            // An i386 target wraps at 4 GiB.
            if start.is_none_or(|s| target == s || target & 0xffff_ffff == s) {
                return true;
            }
        }
        indirect
            && x86::INDIRECT_CALL_LENGTHS
                .iter()
                .any(|&n| before(n as u64).is_some_and(x86::is_indirect_call))
    }

    fn intern(&mut self, name: &str) -> Rc<str> {
        if let Some(n) = self.names.get(name) {
            return n.clone();
        }
        let n: Rc<str> = Rc::from(name);
        self.names.insert(name.into(), n.clone());
        n
    }

    fn symbol_name(&self, probe: u64) -> Option<&str> {
        self.symbol(probe).map(|(s, _)| &*s.name)
    }

    /// The symbol covering `probe`, and whether its linkage name is in no known scheme.
    fn symbol(&self, probe: u64) -> Option<(&Symbol, bool)> {
        let tables = self.elf.iter().map(|e| &e.symbols).chain(&self.maps);
        tables
            .into_iter()
            .find_map(|t| t.lookup(probe).map(|s| (s, t.is_foreign(s))))
    }

    fn resolve(&mut self, probe: u64) -> Vec<Frame> {
        // (name, file, line), innermost first.
        let mut raw: Vec<(Option<String>, Option<String>, Option<u32>)> = Vec::new();
        let sym = self
            .symbol(probe)
            .map(|(s, foreign)| (s.start, s.name.to_string(), foreign));
        // A linkage name in no known scheme: the DWARF name of the real function, with its
        // scope, names it instead.
        let foreign = sym.as_ref().is_some_and(|s| s.2);
        let mut dwarf_name: Option<Rc<str>> = None;
        // addr2line looks at `probe + 1`: the top address (a null return address minus
        // one) must not reach it.
        // Only addresses in the ELF's code: the DWARF of functions the linker discarded
        // still claims ranges from address 0, which garbage return addresses would hit.
        let dwarf = self
            .elf
            .as_ref()
            .filter(|e| e.code_at(probe, 1).is_some())
            .and_then(|e| e.dwarf.as_ref());
        if let Some(ctx) = dwarf.filter(|_| probe != u64::MAX) {
            if let Ok(mut it) = ctx.find_frames(probe).skip_all_loads() {
                let mut outer_die = None;
                while let Ok(Some(f)) = it.next() {
                    outer_die = f.dw_die_offset;
                    let name = f
                        .function
                        .as_ref()
                        .and_then(|n| n.demangle().ok())
                        .map(|n| sanitize(&n).into_owned());
                    let (file, line) = match &f.location {
                        Some(l) => (l.file.map(str::to_string), l.line),
                        None => (None, None),
                    };
                    raw.push((name, file, line));
                }
                let unit = outer_die
                    .filter(|_| foreign)
                    .and_then(|die| Some((ctx.find_dwarf_and_unit(probe).skip_all_loads()?, die)));
                if let Some((unit, die)) = unit {
                    let key = dwarf_name::unit_key(unit);
                    let names = self
                        .dwarf_units
                        .entry(key)
                        .or_insert_with(|| dwarf_name::UnitNames::new(unit));
                    dwarf_name = names
                        .as_ref()
                        .and_then(|n| n.name(unit, die))
                        .map(|n| Rc::from(sanitize(&n)));
                }
            }
        }
        let sym = match dwarf_name {
            Some(n) => Some(n.to_string()),
            None => sym.map(|s| s.1),
        };
        if raw.iter().all(|r| r.0.is_none()) {
            // No DWARF function here: the symbol table names it, DWARF may still place it.
            let Some(name) = sym else { return Vec::new() };
            let (file, line) = raw.first().map_or((None, None), |r| (r.1.clone(), r.2));
            return vec![self.frame(&name, false, file, line)];
        }
        let n = raw.len();
        let mut frames = Vec::with_capacity(n);
        for (i, (name, file, line)) in raw.into_iter().enumerate() {
            let outer = i + 1 == n;
            let name = if outer { sym.clone().or(name) } else { name };
            let name = name.unwrap_or_else(|| "[unknown]".to_string());
            frames.push(self.frame(&name, !outer, file, line));
        }
        frames
    }

    fn frame(
        &mut self,
        name: &str,
        inlined: bool,
        file: Option<String>,
        line: Option<u32>,
    ) -> Frame {
        Frame {
            function: self.intern(name),
            inlined,
            file: file.map(|f| self.intern(&f)),
            line,
        }
    }
}

/// Where an instruction stands in its function's frame set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameSetup {
    /// The frame record is not (or no longer) there: function start, `ret`.
    Missing { start: Option<u64> },
    /// Near the start: missing if `[SP]` holds a return address from a call of this function.
    MaybeMissing { start: u64 },
    /// The function's own frame record is at FP.
    Done,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_only_symbolizer() {
        let map = SymbolTable::new(
            symbol_map::parse("1000 T start\n1010 T other\n", Path::new("m")).unwrap(),
            |_| None,
        );
        let mut s = Symbolizer::new(None, vec![map]).unwrap();
        assert_eq!(&*s.frames(0x1004)[0].function, "start");
        assert!(s.frames(0x10).is_empty());
        assert!(
            s.caller_skipped(0x1010, 0),
            "no code to check: trusted at a start"
        );
        assert!(!s.caller_skipped(0x1011, 0));
        assert!(s.check_arch(Arch::X86_64).is_ok());
    }

    #[test]
    fn needs_a_source() {
        assert!(matches!(
            Symbolizer::new(None, Vec::new()),
            Err(SymbolError::NoSource)
        ));
    }
}
