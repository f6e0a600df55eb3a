//! Linux's [`TaskLayout`] from DWARF, for a kernel with no BTF (Debian's 686 kernels): the
//! vmlinux its `-dbg` package ships. Checked as the BTF is: each member byte-aligned, of the
//! type every Linux gives it.

use kern_profile_linux_image::TaskLayout;

use super::{with_units, Misfit, Ref, Units, Unreadable};

/// Why a vmlinux's DWARF gives no task layout. Said of the file (`elf=`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinuxDwarfError {
    #[error("{0}")]
    NoDwarf(String),
    #[error("its DWARF does not read: {0}")]
    Dwarf(String),
    #[error("its DWARF defines no struct {0}")]
    NoStruct(&'static str),
    #[error("its DWARF's struct {strukt} has no member `{member}`")]
    NoMember { strukt: String, member: String },
    #[error("its DWARF's member `{member}` of struct {strukt} {why}")]
    BadMember {
        strukt: String,
        member: String,
        why: String,
    },
    #[error("its symbols give no per-CPU current_task (nor pcpu_hot)")]
    NoPerCpuCurrent,
}

/// What a member must be.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Int4,
    Ptr,
    CharArray,
}

/// The layout from the DWARF of `elf`. `symbol` gives a symbol's address; `per_cpu` says
/// the kernel keeps `current` per CPU (x86: the `current_task` symbol, or from 6.2
/// `pcpu_hot` plus its member's offset), not in a register.
pub fn linux_layout(
    elf: &[u8],
    per_cpu: bool,
    symbol: impl Fn(&str) -> Option<u64>,
) -> Result<TaskLayout, LinuxDwarfError> {
    let layout = with_units(elf, |units| units.linux_layout(per_cpu, &symbol));
    match layout {
        Ok(l) => l,
        Err(Unreadable::NoDwarf(why)) => Err(LinuxDwarfError::NoDwarf(why)),
        Err(Unreadable::Dwarf(why)) => Err(LinuxDwarfError::Dwarf(why)),
    }
}

impl From<Misfit> for LinuxDwarfError {
    fn from(m: Misfit) -> Self {
        match m {
            Misfit::NoMember(strukt, member) => LinuxDwarfError::NoMember { strukt, member },
            Misfit::Member(strukt, member, why) => LinuxDwarfError::BadMember {
                strukt,
                member,
                why,
            },
            Misfit::Dwarf(why) => LinuxDwarfError::Dwarf(why),
            // Of a description's variable; not asked here.
            Misfit::NoVariable | Misfit::Ambiguous(_) | Misfit::Pointer(_) => {
                LinuxDwarfError::Dwarf("a variable misfits".into())
            }
        }
    }
}

impl Units<'_, '_> {
    /// [`linux_layout`] of these units.
    pub(super) fn linux_layout(
        &self,
        per_cpu: bool,
        symbol: &dyn Fn(&str) -> Option<u64>,
    ) -> Result<TaskLayout, LinuxDwarfError> {
        // Looked up only where needed: each is a search of the symbol table.
        let per_cpu_current = match per_cpu {
            false => None,
            true => Some(match symbol("current_task") {
                Some(slot) => slot,
                None => {
                    let hot = symbol("pcpu_hot").ok_or(LinuxDwarfError::NoPerCpuCurrent)?;
                    let s = self.structure("pcpu_hot")?;
                    let (offset, _) = self.field(s, "pcpu_hot", "current_task", Expect::Ptr)?;
                    hot.checked_add(u64::from(offset))
                        .ok_or(LinuxDwarfError::NoPerCpuCurrent)?
                }
            }),
        };
        let task = self.structure("task_struct")?;
        let field = |name, expect| self.field(task, "task_struct", name, expect);
        let (comm, comm_len) = field("comm", Expect::CharArray)?;
        Ok(TaskLayout {
            per_cpu_current,
            pid: field("pid", Expect::Int4)?.0,
            tgid: field("tgid", Expect::Int4)?.0,
            comm,
            comm_len,
            group_leader: field("group_leader", Expect::Ptr)?.0,
            flags: field("flags", Expect::Int4)?.0,
            mm: field("mm", Expect::Ptr)?.0,
            state: field("__state", Expect::Int4).ok().map(|f| f.0),
        })
    }

    /// The defining DIE of struct `name`.
    fn structure(&self, name: &'static str) -> Result<Ref, LinuxDwarfError> {
        self.definition(name)
            .map_err(|e| LinuxDwarfError::Dwarf(e.to_string()))?
            .ok_or(LinuxDwarfError::NoStruct(name))
    }

    /// Member `name` of `strukt` (struct `sname`) as `expect` wants it: its offset and size.
    fn field(
        &self,
        strukt: Ref,
        sname: &str,
        name: &str,
        expect: Expect,
    ) -> Result<(u32, u32), Misfit> {
        let (offset, ty) = self.member(strukt, name, sname)?;
        let ty = self.strip(ty)?;
        let refuse = |why: String| Misfit::Member(sname.into(), name.into(), why);
        let size = match expect {
            Expect::Int4 => match self.is_integer(ty, 4)? {
                true => 4,
                false => return Err(refuse(format!("is {}, not a 4-byte integer", self.a(ty)?))),
            },
            Expect::Ptr => match self.tag(ty)? == gimli::DW_TAG_pointer_type {
                true => 0,
                false => return Err(refuse(format!("is {}, not a pointer", self.a(ty)?))),
            },
            Expect::CharArray => {
                let len = self.char_array_len(ty)?.map_err(refuse)?;
                u32::try_from(len).map_err(|_| refuse(format!("is {len} bytes long")))?
            }
        };
        Ok((offset, size))
    }
}
