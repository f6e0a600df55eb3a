//! User programs' CFI: the plugin's `user=` programs (`record --user`), so that a walk which
//! reaches a program built without frame pointers (a user-mode sample, or a system call
//! crossed into its caller) goes on by the program's own `.eh_frame` (issue 38.1;
//! docs/walk-design.md section 7).
//!
//! An address alone does not say which program runs there: programs linked at one address
//! run in separate address spaces (the i386 example kernel's `procs=on`). A program is taken
//! only where guest memory at the pc holds its own code bytes ([`UserTables::find`]), so a
//! program not given, or another at the same address, is walked by frame pointers as before,
//! never by a table that is not its own.

use kern_profile_format::Arch;
use object::{Object, ObjectSection};

use super::text::is_exec;
use super::{CfiRow, CfiTable, ElfTables, Limits, TableError};

/// At most this many `user=` programs.
pub const MAX_USER_PROGRAMS: usize = 64;
/// At most this many bytes of a program's code are kept (for the check of the code at a pc).
pub const MAX_USER_CODE: usize = 64 << 20;
/// Bytes of code compared at a pc: enough to tell two builds of a function apart, few enough
/// to be one read.
const CHECK_BYTES: u64 = 8;

/// One program's table, and its code to recognise it by.
#[derive(Debug, Clone)]
pub struct UserProgram {
    /// The name it was given under (the plugin's start line).
    pub name: String,
    pub cfi: CfiTable,
    /// Its executable sections: `(address, bytes)`.
    code: Vec<(u64, Vec<u8>)>,
}

/// The `user=` programs with CFI.
#[derive(Debug, Clone, Default)]
pub struct UserTables {
    programs: Vec<UserProgram>,
}

/// What [`UserTables::add`] found in a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserAdded {
    /// Its CFI, with this many rows.
    Rows(usize),
    /// No CFI section (or every entry refused): its stacks are walked by frame pointers.
    NoCfi,
}

impl UserTables {
    /// Adds the program whose ELF is `elf` (named `name`), for an `arch` guest.
    pub fn add(&mut self, name: &str, elf: &[u8], arch: Arch) -> Result<UserAdded, TableError> {
        if self.programs.len() >= MAX_USER_PROGRAMS {
            return Err(TableError::TooLarge {
                what: "user programs",
                count: self.programs.len() + 1,
                cap: MAX_USER_PROGRAMS,
            });
        }
        let parts = ElfTables::of(elf)?;
        if parts.guest.arch != arch {
            return Err(TableError::WrongArch {
                found: parts.guest.arch.name(),
                guest: arch.name(),
            });
        }
        let Some(cfi) = parts
            .cfi_table(Limits::default())?
            .filter(|t| !t.is_empty())
        else {
            return Ok(UserAdded::NoCfi);
        };
        let mut code = Vec::new();
        let mut total = 0usize;
        for s in parts.file.sections().filter(is_exec) {
            // A section with no bytes in the file (NOBITS) has nothing to compare.
            let Ok(data) = s.data() else { continue };
            if data.is_empty() {
                continue;
            }
            total = total.saturating_add(data.len());
            if total > MAX_USER_CODE {
                return Err(TableError::TooLarge {
                    what: "bytes of a user program's code",
                    count: total,
                    cap: MAX_USER_CODE,
                });
            }
            code.push((s.address(), data.to_vec()));
        }
        let rows = cfi.len();
        self.programs.push(UserProgram {
            name: name.to_string(),
            cfi,
            code,
        });
        Ok(UserAdded::Rows(rows))
    }

    /// A program given as its table and its code (`code` at `at`), not read from an ELF
    /// (tests and fuzzing); bounded as [`add`](Self::add) is.
    pub fn push(
        &mut self,
        name: &str,
        cfi: CfiTable,
        at: u64,
        code: Vec<u8>,
    ) -> Result<(), TableError> {
        if self.programs.len() >= MAX_USER_PROGRAMS || code.len() > MAX_USER_CODE {
            return Err(TableError::TooLarge {
                what: "user programs or bytes of their code",
                count: code.len(),
                cap: MAX_USER_CODE,
            });
        }
        self.programs.push(UserProgram {
            name: name.into(),
            cfi,
            code: vec![(at, code)],
        });
        Ok(())
    }

    /// Whether no program with CFI was given.
    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }

    /// The programs with CFI.
    pub fn programs(&self) -> &[UserProgram] {
        &self.programs
    }

    /// Bytes of memory the tables and code hold.
    pub fn heap_bytes(&self) -> usize {
        self.programs
            .iter()
            .map(|p| p.cfi.heap_bytes() + p.code.iter().map(|(_, b)| b.len()).sum::<usize>())
            .sum()
    }

    /// The row at `pc` of the program running there: one whose table covers `pc` and whose
    /// code bytes there are in guest memory (`read`), the first given where several are.
    #[inline]
    pub fn find<R>(&self, pc: u64, read: &mut R) -> Option<CfiRow>
    where
        R: FnMut(u64, &mut [u8]) -> bool,
    {
        self.programs
            .iter()
            .find_map(|p| p.cfi.find(pc).filter(|_| p.runs_at(pc, read)))
    }
}

impl UserProgram {
    /// Whether guest memory at `pc` holds this program's code: up to [`CHECK_BYTES`], within
    /// its section and the pc's page (a read never crosses into a page that may be unmapped).
    fn runs_at<R>(&self, pc: u64, read: &mut R) -> bool
    where
        R: FnMut(u64, &mut [u8]) -> bool,
    {
        let Some((base, bytes)) = self
            .code
            .iter()
            .find(|(a, b)| pc >= *a && pc - a < b.len() as u64)
        else {
            return false;
        };
        let off = (pc - base) as usize;
        let to_page_end = 4096 - (pc & 4095);
        let n = CHECK_BYTES.min(to_page_end).min((bytes.len() - off) as u64) as usize;
        let mut got = [0u8; CHECK_BYTES as usize];
        read(pc, &mut got[..n]) && got[..n] == bytes[off..off + n]
    }
}
