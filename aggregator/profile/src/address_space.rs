//! Address spaces: which user program ran where, when several are linked at the same
//! addresses.
//!
//! Samples of format version 2 carry the page-table base they ran under (x86 CR3, riscv
//! `satp`, aarch64 `TTBR0_EL1`): one value per address space, i.e. per process. The plugin
//! also records a few bytes of code at user-mode PCs (record kind 6, the first time a vCPU
//! samples a 4 KiB page of an address space, and again when the code there changed). Given
//! `--user` programs, each address space's recorded code is compared with each program's
//! code at the same addresses: the one program whose bytes match everywhere it has code
//! names that address space's user frames, whatever the order of `--user`. An address space
//! that matches none, or several, is warned of. Address spaces without recorded code (and
//! files without page-table bases) are named as before: from the first program whose
//! loadable segments hold the address.
//!
//! A kernel may reuse one page directory for programs run one after another (an exec that
//! frees the old directory and gets the same page back). Read in file order, a code record
//! whose bytes differ from an earlier record of its address space, vCPU and address (the
//! plugin's re-read of a page whose code changed) starts that space's next program: the
//! samples after it get a key of their own (`cr3 0x… #2`), judged on the records from there
//! on.

use kern_profile_format::{Arch, CodeBytes, CpuMode};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::symbolize::Symbolizer;
use crate::warning::Warning;

/// Code records kept per address space (the plugin writes few; a damaged file may not).
const MAX_RECORDS_PER_SPACE: usize = 256;
/// Bytes of a record compared.
const MAX_BYTES: usize = 64;

/// The identity of the address space a recorded page-table base names. x86: CR3 without its
/// low 12 bits (the PCID or cache-control bits, which vary for one page directory).
pub fn identity(arch: Option<Arch>, base: u64) -> u64 {
    arch.map_or(base, |a| {
        kern_profile_arch::guest(a).page_table_identity(base)
    })
}

/// The address space of a sample: its page-table base, when one was recorded while address
/// translation was on (with it off, the register names no address space).
pub fn of_sample(arch: Option<Arch>, mode: CpuMode, base: Option<u64>) -> Option<u64> {
    match mode {
        CpuMode::Real | CpuMode::PagingOff => None,
        _ => base.map(|b| identity(arch, b)),
    }
}

/// The page-table register's name, for frames and warnings.
fn register(arch: Option<Arch>) -> &'static str {
    arch.map_or("page tables", |a| {
        kern_profile_arch::guest(a).page_table_register()
    })
}

/// One code record: an address and the bytes there.
type Code = (u64, Box<[u8]>);

/// Programs told apart in one address space at most: a guest rewriting its code all the
/// time (a JIT) would otherwise start a program per record.
const MAX_PROGRAMS_PER_SPACE: u32 = 1024;

/// One program's run in an address space: the space's identity, which program it was
/// there (0: the first), and the code recorded while it ran.
#[derive(Debug, Clone)]
struct SpaceCode {
    identity: u64,
    program: u32,
    records: Vec<Code>,
    /// The vCPU of each record.
    vcpus: Vec<u32>,
}

/// The code records of a recording, by address space, and the keys that samples carry: one
/// per program an address space ran, in the order the file gives them.
#[derive(Debug, Clone, Default)]
pub struct CodeSamples {
    /// Indexed by key.
    spaces: Vec<SpaceCode>,
    /// The key of each identity's latest program.
    current: FxHashMap<u64, usize>,
}

impl CodeSamples {
    /// The key of address space `identity`'s current program: what a sample read at this
    /// point of the file carries.
    pub fn key(&mut self, identity: u64) -> u64 {
        let spaces = &mut self.spaces;
        *self.current.entry(identity).or_insert_with(|| {
            spaces.push(SpaceCode {
                identity,
                program: 0,
                records: Vec::new(),
                vcpus: Vec::new(),
            });
            spaces.len() - 1
        }) as u64
    }

    /// Keeps a record (its first 64 bytes; at most 256 per program). Other bytes at the
    /// address of an earlier record of the same address space and vCPU start its next program
    /// (the page tables were reused): the plugin reads a page's first code again at later
    /// samples and records it anew only when it changed. (Records of different vCPUs, or at
    /// other addresses, may differ where they overlap without that: one may have been read
    /// at a return address in data.)
    pub fn add(&mut self, arch: Option<Arch>, c: &CodeBytes<'_>) {
        if c.bytes.is_empty() {
            return;
        }
        let identity = identity(arch, c.page_table_base);
        let n = c.bytes.len().min(MAX_BYTES);
        let bytes = &c.bytes[..n];
        let mut key = self.key(identity) as usize;
        let now = &self.spaces[key];
        if now.program + 1 < MAX_PROGRAMS_PER_SPACE
            && now
                .records
                .iter()
                .zip(&now.vcpus)
                .any(|(r, &v)| v == c.vcpu && r.0 == c.vaddr && differ(&r.1, bytes))
        {
            let program = now.program + 1;
            self.spaces.push(SpaceCode {
                identity,
                program,
                records: Vec::new(),
                vcpus: Vec::new(),
            });
            key = self.spaces.len() - 1;
            self.current.insert(identity, key);
        }
        let space = &mut self.spaces[key];
        if space.records.len() < MAX_RECORDS_PER_SPACE {
            space.records.push((c.vaddr, bytes.into()));
            space.vcpus.push(c.vcpu);
        }
    }

    /// Whether no code was recorded.
    pub fn is_empty(&self) -> bool {
        self.spaces.iter().all(|s| s.records.is_empty())
    }

    /// Each key's identity and program number.
    fn names(&self) -> Vec<(u64, u32)> {
        self.spaces
            .iter()
            .map(|s| (s.identity, s.program))
            .collect()
    }
}

/// Whether two reads at one address differ in the bytes both hold.
fn differ(had: &[u8], bytes: &[u8]) -> bool {
    let n = had.len().min(bytes.len());
    had[..n] != bytes[..n]
}

/// What the code of one address space says about the given programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This program's code, and no other's, matches.
    Program(usize),
    /// These programs (in `--user` order, two or more) all match at every recorded address;
    /// the first names the address space.
    Several(Vec<usize>),
    /// No program matches: each has other bytes at some recorded address, or none there.
    NoProgram,
}

/// Judges one address space's `records` against `programs` programs; `byte_at(p, addr)` is
/// program `p`'s code byte at `addr`, if it has one there. A program matches when it has
/// code at one recorded address at least and every record where it has code equals it.
pub fn judge(
    records: &[Code],
    programs: usize,
    byte_at: impl Fn(usize, u64) -> Option<u8>,
) -> Verdict {
    let matching: Vec<usize> = (0..programs)
        .filter(|&p| {
            let mut held = false;
            for (vaddr, bytes) in records {
                let mut compared = bytes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &b)| Some(byte_at(p, vaddr.wrapping_add(i as u64))? == b))
                    .peekable();
                if compared.peek().is_none() {
                    continue;
                }
                if !compared.all(|same| same) {
                    return false;
                }
                held = true;
            }
            held
        })
        .collect();
    match matching[..] {
        [] => Verdict::NoProgram,
        [p] => Verdict::Program(p),
        _ => Verdict::Several(matching),
    }
}

/// The program that names a user address of an address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The address space's program (which may not hold the address).
    Program(usize),
    /// None: the address space's code matches no given program.
    Nothing,
    /// Not known (no recorded code there, or no address space): the first program whose
    /// segments hold the address.
    FirstHolding,
}

/// The verdicts of a recording's address spaces.
#[derive(Debug, Clone)]
pub struct AddressSpaces {
    verdicts: FxHashMap<u64, Verdict>,
    /// Each key's page-table identity and program number there.
    names: Vec<(u64, u32)>,
    register: &'static str,
}

impl Default for AddressSpaces {
    fn default() -> Self {
        AddressSpaces::none(None)
    }
}

impl AddressSpaces {
    /// No verdicts (no code bytes, or no user programs): addresses are named from the first
    /// program holding them; address spaces are named with `arch`'s register.
    pub fn none(arch: Option<Arch>) -> Self {
        AddressSpaces {
            verdicts: FxHashMap::default(),
            names: Vec::new(),
            register: register(arch),
        }
    }

    /// Judges every address space of `code` against `sym`'s user programs.
    pub fn decide(code: &CodeSamples, arch: Option<Arch>, sym: &Symbolizer) -> Self {
        let n = sym.user_binary_count();
        let byte_at = |p: usize, addr: u64| {
            sym.user_elf(p)
                .and_then(|e| e.code_at(addr, 1))
                .map(|b| b[0])
        };
        let verdicts = match n {
            0 => FxHashMap::default(),
            _ => (0u64..)
                .zip(&code.spaces)
                .filter(|(_, s)| !s.records.is_empty())
                .map(|(key, s)| (key, judge(&s.records, n, byte_at)))
                .collect(),
        };
        AddressSpaces {
            verdicts,
            names: code.names(),
            register: register(arch),
        }
    }

    /// Which program names the user addresses of `space`.
    pub fn choice(&self, space: Option<u64>) -> Choice {
        match space.and_then(|s| self.verdicts.get(&s)) {
            Some(Verdict::Program(p)) => Choice::Program(*p),
            Some(Verdict::Several(ps)) => Choice::Program(ps[0]),
            Some(Verdict::NoProgram) => Choice::Nothing,
            None => Choice::FirstHolding,
        }
    }

    /// `cr3 0x…` (or the architecture's register) of a sample's key; `cr3 0x… #2` for the
    /// second program that address space ran.
    pub fn describe(&self, space: u64) -> String {
        match self.names.get(space as usize) {
            Some(&(identity, 0)) => format!("{} {identity:#x}", self.register),
            Some(&(identity, p)) => format!("{} {identity:#x} #{}", self.register, p + 1),
            None => format!("{} {space:#x}", self.register),
        }
    }

    /// Where a key sorts: by identity, then program.
    fn order(&self, space: u64) -> (u64, u32) {
        self.names
            .get(space as usize)
            .copied()
            .unwrap_or((space, 0))
    }

    /// The address spaces whose program could not be told, sorted by address space.
    pub fn warnings(&self, sym: &Symbolizer) -> Vec<Warning> {
        let mut spaces: Vec<_> = self.verdicts.iter().collect();
        spaces.sort_unstable_by_key(|(s, _)| self.order(**s));
        spaces
            .into_iter()
            .filter_map(|(&s, v)| match v {
                Verdict::Program(_) => None,
                Verdict::NoProgram => Some(Warning::SpaceMatchesNoProgram {
                    space: self.describe(s),
                }),
                Verdict::Several(ps) => Some(Warning::SpaceMatchesSeveral {
                    space: self.describe(s),
                    programs: ps
                        .iter()
                        .map(|&p| sym.user_binary_name(p).to_string())
                        .collect(),
                }),
            })
            .collect()
    }
}

/// User addresses named from the first program holding them while several programs hold
/// them (no recorded code decided): for one warning at the end, which says why.
#[derive(Debug, Default)]
pub struct Overlaps {
    probes: FxHashSet<u64>,
    programs: Vec<usize>,
    /// Of those, addresses of samples that recorded no address space.
    without_space: u64,
    /// The address spaces, recorded, whose code no record gave.
    spaces_without_code: FxHashSet<u64>,
}

impl Overlaps {
    /// Notes that `probe`, in address space `space` (when the sample recorded one), was
    /// named from the first of `holding` (two or more programs).
    pub fn add(&mut self, probe: u64, space: Option<u64>, holding: &[usize]) {
        if self.probes.insert(probe) {
            match space {
                Some(s) => {
                    self.spaces_without_code.insert(s);
                }
                None => self.without_space += 1,
            }
        }
        for &p in holding {
            if !self.programs.contains(&p) {
                self.programs.push(p);
            }
        }
    }

    /// The warning, when addresses were named so.
    pub fn warning(&self, sym: &Symbolizer, spaces: &AddressSpaces) -> Option<Warning> {
        if self.probes.is_empty() {
            return None;
        }
        let mut programs = self.programs.clone();
        programs.sort_unstable();
        let mut without_code: Vec<u64> = self.spaces_without_code.iter().copied().collect();
        without_code.sort_unstable_by_key(|&s| spaces.order(s));
        let why = match (self.without_space, without_code.len()) {
            (_, 0) => "its samples recorded no address space (an older plugin, or address \
                       translation off)"
                .to_string(),
            (n, k) => {
                let shown: Vec<String> = without_code
                    .iter()
                    .take(4)
                    .map(|&s| spaces.describe(s))
                    .collect();
                let more = if k > 4 {
                    format!(" and {} more", k - 4)
                } else {
                    String::new()
                };
                let older = if n > 0 {
                    "; other samples recorded no address space"
                } else {
                    ""
                };
                format!(
                    "no code was recorded in address space{} {}{more} (no user-mode sample \
                     there, and no system call whose walk crossed into the program){older}",
                    if k == 1 { "" } else { "s" },
                    shown.join(", ")
                )
            }
        };
        Some(Warning::ProgramsOverlap {
            programs: programs
                .iter()
                .map(|&p| sym.user_binary_name(p).to_string())
                .collect(),
            addresses: self.probes.len() as u64,
            why,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two programs linked at 0x1000 with the same first 16 bytes, then different code;
    /// a third holds code elsewhere only.
    fn byte_at(p: usize, addr: u64) -> Option<u8> {
        match p {
            0 | 1 if (0x1000..0x1010).contains(&addr) => Some(addr as u8),
            0 if (0x1010..0x1100).contains(&addr) => Some(0xa0 ^ addr as u8),
            1 if (0x1010..0x1080).contains(&addr) => Some(0xb0 ^ addr as u8),
            2 if (0x9000..0x9100).contains(&addr) => Some(0x55),
            _ => None,
        }
    }

    fn code(p: usize, vaddr: u64, n: usize) -> Code {
        let bytes: Vec<u8> = (0..n as u64)
            .map(|i| byte_at(p, vaddr + i).unwrap_or(0xcc))
            .collect();
        (vaddr, bytes.into())
    }

    #[test]
    fn the_program_whose_bytes_match_everywhere_wins() {
        assert_eq!(
            judge(&[code(1, 0x1020, 16)], 3, byte_at),
            Verdict::Program(1)
        );
        assert_eq!(
            judge(&[code(0, 0x1020, 16)], 3, byte_at),
            Verdict::Program(0)
        );
        // The order of the programs does not matter: only their bytes.
        let swapped = |p: usize, a: u64| byte_at(1 - p, a);
        assert_eq!(
            judge(&[code(1, 0x1020, 16)], 2, swapped),
            Verdict::Program(0)
        );
        // Common code decides nothing alone; one distinct record is enough.
        let records = [code(0, 0x1000, 16), code(0, 0x1040, 32)];
        assert_eq!(judge(&records, 3, byte_at), Verdict::Program(0));
    }

    #[test]
    fn common_code_only_matches_several() {
        assert_eq!(
            judge(&[code(0, 0x1000, 16)], 3, byte_at),
            Verdict::Several(vec![0, 1])
        );
    }

    #[test]
    fn foreign_code_matches_no_program() {
        // Bytes no program has at that address.
        let other: Code = (0x1020, vec![0x90; 16].into());
        assert_eq!(judge(&[other], 3, byte_at), Verdict::NoProgram);
        // Code where no program has any.
        let elsewhere: Code = (0x5000, vec![0x90; 16].into());
        assert_eq!(judge(&[elsewhere], 3, byte_at), Verdict::NoProgram);
        // One record against a program is enough to rule it out.
        let records = [
            code(0, 0x1000, 16),
            code(1, 0x1020, 16),
            code(0, 0x1040, 16),
        ];
        assert_eq!(judge(&records, 3, byte_at), Verdict::NoProgram);
        assert_eq!(judge(&[], 3, byte_at), Verdict::NoProgram);
    }

    #[test]
    fn records_past_a_programs_code_compare_what_it_has() {
        // Program 1's code ends at 0x1080: a record running past it compares its part
        // (the bytes beyond are another section's, or nothing the program loads).
        assert_eq!(
            judge(&[code(1, 0x1078, 16)], 2, byte_at),
            Verdict::Program(1)
        );
    }

    #[test]
    fn x86_identities_drop_the_pcid() {
        assert_eq!(identity(Some(Arch::X86_64), 0x1234_5007), 0x1234_5000);
        assert_eq!(
            identity(Some(Arch::Riscv64), 0x8000_0000_0008_1234),
            0x8000_0000_0008_1234
        );
        assert_eq!(
            of_sample(Some(Arch::I386), CpuMode::PagingOff, Some(0x1000)),
            None
        );
        assert_eq!(
            of_sample(Some(Arch::I386), CpuMode::Paging, Some(0x10f000)),
            Some(0x10f000)
        );
        assert_eq!(of_sample(Some(Arch::I386), CpuMode::Unknown, None), None);
    }

    fn record(space: u64, vaddr: u64, bytes: &[u8]) -> CodeBytes<'_> {
        CodeBytes {
            vcpu: 0,
            page_table_base: space,
            vaddr,
            bytes,
        }
    }

    #[test]
    fn other_bytes_where_records_overlap_start_the_spaces_next_program() {
        let x86 = Some(Arch::I386);
        let mut c = CodeSamples::default();
        let first = c.key(0x10f000);
        c.add(x86, &record(0x10f007, 0x1000, &[1, 2, 3, 4]));
        // The same bytes again, and code elsewhere: the same program.
        c.add(x86, &record(0x10f000, 0x1002, &[3, 4, 5]));
        c.add(x86, &record(0x10f000, 0x2000, &[9; 8]));
        assert_eq!(c.key(0x10f000), first);
        // Another address space is another key.
        let other = c.key(0x200000);
        assert_ne!(other, first);
        // Other bytes where an earlier record has some, at another address (a read at a
        // return address in data, maybe): the same program.
        c.add(x86, &record(0x10f000, 0x1003, &[7, 7]));
        assert_eq!(c.key(0x10f000), first);
        // Other bytes at an earlier record's address: the next program, from here on.
        c.add(x86, &record(0x10f000, 0x1000, &[7, 7, 7, 7]));
        let second = c.key(0x10f000);
        assert_ne!(second, first);
        assert_eq!(c.key(0x200000), other);
        // Its records are its own: the first program's no longer conflict.
        c.add(x86, &record(0x10f000, 0x2000, &[1, 2, 3]));
        assert_eq!(c.key(0x10f000), second);
        let spaces = AddressSpaces {
            verdicts: FxHashMap::default(),
            names: c.names(),
            register: "cr3",
        };
        assert_eq!(spaces.describe(first), "cr3 0x10f000");
        assert_eq!(spaces.describe(second), "cr3 0x10f000 #2");
        assert_eq!(spaces.describe(other), "cr3 0x200000");
        assert_eq!(c.spaces[second as usize].records.len(), 2);
    }
}
