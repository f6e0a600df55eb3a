//! Samples → address stacks (the keys [`crate::counts::StackCounts`] counts), and address
//! stacks → frame names.
//!
//! Reading only interns *address* stacks: a key is `[meta, pc, return addresses…]` and
//! counts go in a hash map keyed by it, so memory grows with the distinct stacks, not the
//! samples. Names come at the end, each distinct address symbolized once.

use std::fmt::Write as _;
use std::ops::Range;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::boundary;
use crate::input::Sample;
use crate::options::Options;
use crate::symbolize::Symbolizer;

/// `meta` bit: a user-mode sample.
const META_USER: u64 = 1;

/// The frame user-mode samples are grouped under; with `--user`, followed by the name of
/// the binary (`[user] user.elf`).
pub const USER_FRAME: &str = "[user]";
/// The frame of addresses nothing knows (consecutive ones collapse into one).
pub const UNKNOWN_FRAME: &str = "[unknown]";
/// inferno's annotation of an inlined frame.
pub const INLINE_SUFFIX: &str = "_[i]";

/// Builds interning keys from samples, applying the filters.
pub struct KeyBuilder<'o> {
    opts: &'o Options,
    markers: bool,
}

impl<'o> KeyBuilder<'o> {
    pub fn new(opts: &'o Options) -> Self {
        KeyBuilder {
            opts,
            markers: false,
        }
    }

    /// Whether the recording's frames may hold boundary markers (header flag); otherwise
    /// values that look like markers are garbage return addresses, named `[unknown]`.
    pub fn with_markers(mut self, markers: bool) -> Self {
        self.markers = markers;
        self
    }

    /// Fills `key` for `s`; false when a filter drops the sample.
    ///
    /// The entry fix: when the PC is where the frame-pointer walk misses the caller (a
    /// function's first instruction, before `push ebp`, or a `ret`, after `pop ebp`), the
    /// word at [SP] is the caller's return address and goes in as the first return address.
    pub fn build(&self, s: &Sample<'_>, sym: &mut Symbolizer, key: &mut Vec<u64>) -> bool {
        if !self.opts.mode.keeps(s.user) {
            return false;
        }
        if let Some(cpus) = &self.opts.cpus {
            if !cpus.contains(s.vcpu) {
                return false;
            }
        }
        key.clear();
        let mut meta = if s.user { META_USER } else { 0 };
        if self.opts.per_cpu {
            meta |= (s.vcpu as u64 + 1) << 1;
        }
        key.push(meta);
        let Some((&pc, rets)) = s.addrs.split_first() else {
            return true;
        };
        if s.user && !sym.has_user_binaries() {
            if self.opts.addresses {
                key.extend_from_slice(s.addrs);
            }
            return true;
        }
        key.push(pc);
        // (Even when the word equals the first return address: in a recursion the caller
        // and the caller's caller return to the same place.)
        if let Some(w) = s.sp_word {
            let skipped = if s.user {
                sym.user_binary_of(pc)
                    .is_some_and(|i| sym.user_symbolizer(i).caller_skipped(pc, w))
            } else {
                sym.caller_skipped(pc, w)
            };
            if skipped {
                key.push(w);
            }
        }
        key.extend_from_slice(rets);
        if !self.markers {
            for a in &mut key[2..] {
                if boundary::is_marker(*a) {
                    *a = 0;
                }
            }
        }
        true
    }
}

/// How frames are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameStyle {
    /// Expand inlined functions (else only the real function of each address).
    pub inline: bool,
    /// Append ` (file:line)`.
    pub lines: bool,
    /// Unknown addresses as `0x…` rather than `[unknown]`; user addresses shown.
    pub addresses: bool,
    /// Mark inlined frames with inferno's `_[i]`.
    pub inline_suffix: bool,
}

impl NameStyle {
    pub fn from_options(o: &Options, inline_suffix: bool) -> Self {
        NameStyle {
            inline: o.inline,
            lines: o.lines,
            addresses: o.addresses,
            inline_suffix,
        }
    }
}

/// Names address stacks, root first; caches the names of each probe address.
pub struct StackNamer<'s> {
    sym: &'s mut Symbolizer,
    style: NameStyle,
    cache: FxHashMap<u64, Rc<[Rc<str>]>>,
    /// (user binary, probe) → names.
    user_cache: FxHashMap<(usize, u64), Rc<[Rc<str>]>>,
    unknown: Rc<str>,
    user: Rc<str>,
    /// `[user] NAME` per user binary.
    user_roots: Vec<Rc<str>>,
    cpus: FxHashMap<u64, Rc<str>>,
}

/// The names of an address's frames, outer function first.
pub type Names = Rc<[Rc<str>]>;

/// Where an address of a stack belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Kernel,
    User(usize),
    Unknown,
}

impl<'s> StackNamer<'s> {
    pub fn new(sym: &'s mut Symbolizer, style: NameStyle) -> Self {
        StackNamer {
            sym,
            style,
            cache: FxHashMap::default(),
            user_cache: FxHashMap::default(),
            unknown: Rc::from(UNKNOWN_FRAME),
            user: Rc::from(USER_FRAME),
            user_roots: Vec::new(),
            cpus: FxHashMap::default(),
        }
    }

    pub fn symbolizer(&mut self) -> &mut Symbolizer {
        self.sym
    }

    /// Names a key built by [`KeyBuilder`], root first, into `out` (cleared first).
    pub fn name_key(&mut self, key: &[u64], out: &mut Vec<Rc<str>>) {
        self.name_key_spaces(key, out);
    }

    /// Like [`StackNamer::name_key`], and returns where the user-space names are in `out`:
    /// the `[user]` root and the user frames after it (empty for a kernel stack). Kernel
    /// frames may follow them: a system call sampled in the kernel, whose walk went on
    /// into the user program's frames (`[user] prog;main;…;syscall_entry;…;sys_work`).
    pub fn name_key_spaces(&mut self, key: &[u64], out: &mut Vec<Rc<str>>) -> Range<usize> {
        out.clear();
        let Some((&meta, addrs)) = key.split_first() else {
            return 0..0;
        };
        let cpu_tag = meta >> 1;
        if cpu_tag > 0 {
            let n = self
                .cpus
                .entry(cpu_tag)
                .or_insert_with(|| Rc::from(format!("cpu {}", cpu_tag - 1)))
                .clone();
            out.push(n);
        }
        let user_mode = meta & META_USER != 0;
        if self.sym.has_user_binaries() && !addrs.is_empty() {
            return self.name_spaces(addrs, user_mode, out);
        }
        if user_mode {
            let start = out.len();
            out.push(self.user.clone());
            for &a in addrs.iter().rev() {
                out.push(Rc::from(format!("{a:#x}")));
            }
            return start..out.len();
        }
        if addrs.is_empty() {
            out.push(self.unknown.clone());
            return 0..0;
        }
        self.name_addrs(addrs, true, out);
        0..0
    }

    /// Names a stack (PC first) when user programs are known: each address from the kernel
    /// (kernel-mode samples only) or else from the user binary whose segments hold it. A
    /// stack whose outermost known frame is a user program's is rooted at `[user] NAME`;
    /// a user-mode sample always is (`[user]` alone when no binary holds its addresses).
    fn name_spaces(
        &mut self,
        addrs: &[u64],
        user_mode: bool,
        out: &mut Vec<Rc<str>>,
    ) -> Range<usize> {
        let mut resolved: Vec<(Space, Rc<[Rc<str>]>)> = (0..addrs.len())
            .map(|i| match boundary::probe(addrs, i, true) {
                Some(probe) => self.resolve_space(probe, user_mode),
                None => (Space::Unknown, Rc::from([])),
            })
            .collect();
        let keep = boundary::keep(addrs, |i| resolved[i].0 != Space::Unknown);
        resolved.truncate(keep);
        for i in 0..keep {
            if boundary::is_marker(addrs[i]) {
                let inner = i.checked_sub(1).map_or(&[][..], |j| &resolved[j].1[..]);
                let name = boundary::name(addrs[i], inner);
                resolved[i] = (Space::Kernel, Rc::from([Rc::from(name)]));
            }
        }
        let root = resolved
            .iter()
            .rev()
            .map(|r| r.0)
            .find(|s| *s != Space::Unknown);
        let start = out.len();
        match root {
            Some(Space::User(b)) => out.push(self.user_root(b)),
            _ if user_mode => out.push(self.user.clone()),
            _ => {}
        }
        let mut user_end = out.len();
        for (i, (space, names)) in resolved.iter().enumerate().rev() {
            if !names.is_empty() {
                out.extend(names.iter().cloned());
            } else if self.style.addresses {
                out.push(Rc::from(format!("{:#x}", addrs[i])));
            } else if out.last().map(|l| &**l) != Some(UNKNOWN_FRAME) {
                out.push(self.unknown.clone());
            }
            if user_mode || matches!(space, Space::User(_)) {
                user_end = out.len();
            }
        }
        if user_end > start {
            start..user_end
        } else {
            0..0
        }
    }

    fn resolve_space(&mut self, probe: u64, user_mode: bool) -> (Space, Rc<[Rc<str>]>) {
        if !user_mode {
            let k = self.probe_names(probe);
            if !k.is_empty() {
                return (Space::Kernel, k);
            }
        }
        match self.sym.user_binary_of(probe) {
            Some(b) => (Space::User(b), self.user_probe_names(b, probe)),
            None => (Space::Unknown, Rc::from([])),
        }
    }

    /// `[user] NAME` for user binary `b`.
    fn user_root(&mut self, b: usize) -> Rc<str> {
        while self.user_roots.len() <= b {
            let i = self.user_roots.len();
            let name = self.sym.user_binary_name(i);
            self.user_roots
                .push(Rc::from(format!("{USER_FRAME} {name}")));
        }
        self.user_roots[b].clone()
    }

    /// For an address the kernel does not name: the `[user] NAME` root of the user binary
    /// whose segments hold it, and its frames there (outer first; empty when no symbol
    /// covers it). `None` when no user binary holds it.
    pub fn user_names(&mut self, probe: u64) -> Option<(Rc<str>, Names)> {
        let b = self.sym.user_binary_of(probe)?;
        Some((self.user_root(b), self.user_probe_names(b, probe)))
    }

    fn user_probe_names(&mut self, b: usize, probe: u64) -> Rc<[Rc<str>]> {
        if let Some(n) = self.user_cache.get(&(b, probe)) {
            return n.clone();
        }
        let frames = self.sym.user_symbolizer(b).frames(probe);
        let names = frame_names(&frames, self.style);
        self.user_cache.insert((b, probe), names.clone());
        names
    }

    /// Appends the names of `addrs` (innermost first in the slice) root first. The first
    /// address is looked up as is when `first_is_pc`; return addresses at `addr - 1`.
    pub fn name_addrs(&mut self, addrs: &[u64], first_is_pc: bool, out: &mut Vec<Rc<str>>) {
        let keep = boundary::keep(addrs, |i| {
            boundary::probe(addrs, i, first_is_pc).is_some_and(|p| !self.probe_names(p).is_empty())
        });
        for (i, &a) in addrs[..keep].iter().enumerate().rev() {
            let names = match boundary::probe(addrs, i, first_is_pc) {
                Some(probe) => self.probe_names(probe),
                None => {
                    let inner = boundary::probe(addrs, i.wrapping_sub(1), first_is_pc)
                        .map_or_else(|| Rc::from([]), |p| self.probe_names(p));
                    Rc::from([Rc::from(boundary::name(a, &inner))])
                }
            };
            if !names.is_empty() {
                out.extend(names.iter().cloned());
            } else if self.style.addresses {
                out.push(Rc::from(format!("{a:#x}")));
            } else if out.last().map(|l| &**l) != Some(UNKNOWN_FRAME) {
                out.push(self.unknown.clone());
            }
        }
    }

    /// The frame names at one probe address (kernel), outer function first.
    pub fn probe_names(&mut self, probe: u64) -> Rc<[Rc<str>]> {
        if let Some(n) = self.cache.get(&probe) {
            return n.clone();
        }
        let frames = self.sym.frames(probe);
        let names = frame_names(&frames, self.style);
        self.cache.insert(probe, names.clone());
        names
    }
}

/// The names of an address's frames (innermost first in `frames`), outer function first.
fn frame_names(frames: &[crate::symbolize::Frame], style: NameStyle) -> Rc<[Rc<str>]> {
    let mut names: Vec<Rc<str>> = Vec::with_capacity(frames.len());
    for f in frames.iter().rev() {
        if f.inlined && !style.inline {
            continue;
        }
        // Each frame's own line: for a function with code inlined at the address, the
        // line of the inlined call, so that it stays a line of that function.
        let (file, line) = (&f.file, f.line);
        let decorated = style.lines || (f.inlined && style.inline_suffix);
        if !decorated {
            names.push(f.function.clone());
            continue;
        }
        let mut s = String::from(&*f.function);
        if style.lines {
            match (file, line) {
                (Some(file), Some(line)) => {
                    let _ = write!(s, " ({}:{line})", short_path(file));
                }
                (Some(file), None) => {
                    let _ = write!(s, " ({})", short_path(file));
                }
                _ => {}
            }
        }
        if f.inlined && style.inline_suffix {
            s.push_str(INLINE_SUFFIX);
        }
        names.push(Rc::from(s));
    }
    names.into()
}

/// Shortens source paths: the Rust standard library's `/rustc/<hash>/library/` and
/// Cargo's registry prefixes go, leaving `core/src/…` or `crate-1.0/src/…`.
pub fn short_path(path: &str) -> &str {
    if let Some(i) = path.find("/rustc/") {
        let rest = &path[i + "/rustc/".len()..];
        if let Some(j) = rest.find('/') {
            let rest = &rest[j + 1..];
            return rest.strip_prefix("library/").unwrap_or(rest);
        }
    }
    if let Some(i) = path.find("/registry/src/") {
        let rest = &path[i + "/registry/src/".len()..];
        if let Some(j) = rest.find('/') {
            return &rest[j + 1..];
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_list::CpuList;
    use crate::options::ModeFilter;
    use crate::symbolize::{symbol_map, SymbolTable};
    use std::path::Path;

    fn symbolizer() -> Symbolizer {
        let map = SymbolTable::new(
            symbol_map::parse(
                "1000 T root\n1100 T middle\n1200 T leaf\n1300 T entered\n1400 T asm_exc_page_fault\n1500 T end\n",
                Path::new("m"),
            )
            .unwrap(),
            |_| None,
        );
        Symbolizer::new(None, Some(map)).unwrap()
    }

    fn sample(addrs: &[u64]) -> Sample<'_> {
        Sample {
            vcpu: 0,
            user: false,
            time_ns: None,
            sp_word: None,
            stop: None,
            addrs,
        }
    }

    fn names(opts: &Options, s: &Sample<'_>) -> Option<String> {
        let mut sym = symbolizer();
        let mut key = Vec::new();
        if !KeyBuilder::new(opts)
            .with_markers(true)
            .build(s, &mut sym, &mut key)
        {
            return None;
        }
        let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(opts, true));
        let mut out = Vec::new();
        namer.name_key(&key, &mut out);
        Some(out.iter().map(|s| &**s).collect::<Vec<_>>().join(";"))
    }

    #[test]
    fn names_root_first_with_return_addresses_minus_one() {
        let o = Options::default();
        // 0x1100 as a return address is the call at its end of `root`.
        assert_eq!(
            names(&o, &sample(&[0x1204, 0x1150, 0x1100])).unwrap(),
            "root;middle;leaf"
        );
    }

    #[test]
    fn entry_fix_inserts_the_sp_word() {
        let o = Options::default();
        let mut s = sample(&[0x1300, 0x1100]);
        s.sp_word = Some(0x1210);
        assert_eq!(names(&o, &s).unwrap(), "root;leaf;entered");
        // Not at an entry: the word at [SP] is ignored.
        s.addrs = &[0x1301, 0x1100];
        assert_eq!(names(&o, &s).unwrap(), "root;entered");
        // Recursion: the caller and its caller return to the same place, both kept.
        s.addrs = &[0x1300, 0x1210, 0x1100];
        assert_eq!(names(&o, &s).unwrap(), "root;leaf;leaf;entered");
    }

    #[test]
    fn kernel_entries_and_stack_switches_are_named_frames() {
        use kern_profile_format::frame_marker::{KERNEL_ENTRY, STACK_SWITCH};
        let o = Options::default();
        // leaf <- called from the fault entry code, which interrupted `middle` at 0x1100
        // (looked up as is: 0x10ff would be `root`).
        let s = sample(&[0x1204, 0x1410, KERNEL_ENTRY, 0x1100, 0x1010]);
        assert_eq!(
            names(&o, &s).unwrap(),
            "root;middle;[exception];asm_exc_page_fault;leaf"
        );
        // A switch onto a stack of known code is kept; one into nothing known is cut.
        let s = sample(&[0x1204, 0x1110, STACK_SWITCH, 0x1010]);
        assert_eq!(names(&o, &s).unwrap(), "root;[stack switch];middle;leaf");
        let s = sample(&[0x1204, 0x1110, STACK_SWITCH, 0x9999, 0x8888]);
        assert_eq!(names(&o, &s).unwrap(), "middle;leaf");
        // A recording without the header's marker flag: small values are garbage.
        let mut sym = symbolizer();
        let mut key = Vec::new();
        let s = sample(&[0x1204, 0x1110, STACK_SWITCH, 0x1010]);
        assert!(KeyBuilder::new(&o).build(&s, &mut sym, &mut key));
        let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(&o, true));
        let mut out = Vec::new();
        namer.name_key(&key, &mut out);
        assert_eq!(out.join(";"), "root;[unknown];middle;leaf");
    }

    #[test]
    fn unknowns_collapse_or_show_as_addresses() {
        let o = Options::default();
        let s = sample(&[0x10, 0x20, 0x1050, 0x30, 0x40]);
        assert_eq!(names(&o, &s).unwrap(), "[unknown];root;[unknown]");
        let o = Options {
            addresses: true,
            ..Options::default()
        };
        assert_eq!(names(&o, &s).unwrap(), "0x40;0x30;root;0x20;0x10");
    }

    #[test]
    fn user_samples_group_and_filters_apply() {
        let mut s = sample(&[0x8048000, 0x8048100]);
        s.user = true;
        s.vcpu = 2;
        assert_eq!(names(&Options::default(), &s).unwrap(), "[user]");
        let addrs = Options {
            addresses: true,
            ..Options::default()
        };
        assert_eq!(names(&addrs, &s).unwrap(), "[user];0x8048100;0x8048000");
        let kernel_only = Options {
            mode: ModeFilter::KernelOnly,
            ..Options::default()
        };
        assert!(names(&kernel_only, &s).is_none());
        let user_only = Options {
            mode: ModeFilter::UserOnly,
            ..Options::default()
        };
        assert!(names(&user_only, &s).is_some());
        assert!(names(&user_only, &sample(&[0x1000])).is_none());
        let cpus = Options {
            cpus: Some(CpuList::parse("0-1").unwrap()),
            ..Options::default()
        };
        assert!(names(&cpus, &s).is_none());
        let per_cpu = Options {
            per_cpu: true,
            ..Options::default()
        };
        assert_eq!(names(&per_cpu, &s).unwrap(), "cpu 2;[user]");
    }

    #[test]
    fn short_paths() {
        assert_eq!(
            short_path(
                "/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/ptr/mod.rs"
            ),
            "core/src/ptr/mod.rs"
        );
        assert_eq!(
            short_path("/home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/spin-0.9.8/src/mutex.rs"),
            "spin-0.9.8/src/mutex.rs"
        );
        assert_eq!(short_path("src/main.rs"), "src/main.rs");
    }
}
