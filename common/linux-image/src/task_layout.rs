//! Where a Linux kernel keeps its current task, and where the fields a profiler labels a
//! sample with lie in `task_struct`, from the image alone: the offsets from its BTF, the
//! per-CPU slot of x86's current-task pointer (arm64's user-mode one) from its kallsyms.
//!
//! The BTF is checked, not trusted: each member must be byte-aligned, no bitfield, of the
//! type every Linux gives it, and inside the struct; otherwise the plugin would read garbage
//! as a pid or a name.

use btf_rs::{Btf, Member, Struct, Type};

use crate::btf::{with_btf, BtfBlob};
use crate::{Arch, ImageError, KernelImage};

/// Where a Linux kernel keeps the current task and what its `task_struct` holds, from the
/// image alone (BTF, kallsyms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLayout {
    /// x86: the per-CPU offset of the current-task pointer (the pointer is at the GS base,
    /// FS on i386, plus this): the kallsyms value of the per-CPU symbol `current_task`
    /// (Linux 6.1, or any kernel that has the symbol; kallsyms lists per-CPU symbols at
    /// their offsets, e.g. `000000000001fb80 A current_task`), or from 6.2 `pcpu_hot` plus
    /// the BTF offset of its member `current_task`. arm64, which keeps `current` in
    /// `sp_el0` in kernel mode only: the link address of the per-CPU `__entry_task` (the
    /// task its entry from user mode loads `sp_el0` with; the CPU's offset is in
    /// `tpidr_el1`), from kallsyms or the entry code that loads it. `None`
    /// on riscv64, whose `tp` (and `sscratch` in user mode) holds `current`.
    pub per_cpu_current: Option<u64>,
    /// Byte offsets inside `task_struct` (members of anonymous structs/unions resolved, their
    /// offsets added).
    pub pid: u32,
    pub tgid: u32,
    pub comm: u32,
    /// Length of `comm` in bytes (16 in every kernel so far; read from the array type).
    pub comm_len: u32,
    pub group_leader: u32,
    pub flags: u32,
    pub mm: u32,
    /// `__state` (4 bytes, Linux 5.14 on): 0 while the task may run, a sleep state once it
    /// waits; read at a task switch to tell a preempted task from a blocked one. `None`
    /// when the BTF has no such member (older kernels call it `state`, a `long`).
    pub state: Option<u32>,
}

/// How deep anonymous structs and unions may nest, and how many typedef/const/volatile
/// links a type may have: far beyond any kernel's, and a bound on a BTF that loops.
const MAX_DEPTH: usize = 16;

/// What a member must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// An integer of this many bytes.
    Int(usize),
    /// A pointer.
    Ptr,
    /// An array of 1-byte integers (chars); its length is returned.
    CharArray,
}

/// A member found: its byte offset in the outer struct and its size in bytes.
struct Found {
    offset: u32,
    size: u32,
}

impl KernelImage {
    /// The current task's whereabouts and `task_struct`'s layout (see [`TaskLayout`]), from
    /// the kernel's BTF and, on x86, its kallsyms.
    pub fn task_layout(&self) -> Result<TaskLayout, ImageError> {
        let blob = self.btf()?;
        // x86 needs the per-CPU symbol; the other architectures keep `current` in a register.
        let percpu = matches!(self.arch(), Some(Arch::X86_64 | Arch::I386));
        let kallsyms = if percpu { Some(self.kallsyms()?) } else { None };
        let symbols = kallsyms.map(|k| PerCpuSymbols {
            current_task: k.address_of("current_task"),
            pcpu_hot: k.address_of("pcpu_hot"),
        });
        let mut layout = read_layout(self, blob, symbols)?;
        if self.arch() == Some(Arch::Aarch64) {
            // Optional: without it, user-mode samples are named by the last switch seen.
            if let Ok(k) = self.kallsyms() {
                // A raw Image's bytes start at its link base; an ELF's code is not read.
                let base = self.virtual_base(&k);
                let code = |at: u64, len: usize| {
                    let start = usize::try_from(at.checked_sub(base?)?).ok()?;
                    let bytes = self.bytes.get(start..)?;
                    Some(&bytes[..len.min(bytes.len())])
                };
                layout.per_cpu_current =
                    crate::arm64_entry_task::entry_task(|n| k.address_of(n), code);
            }
        }
        Ok(layout)
    }
}

/// The kallsyms values x86's current-task slot is found from.
#[derive(Debug, Clone, Copy, Default)]
struct PerCpuSymbols {
    current_task: Option<u64>,
    pcpu_hot: Option<u64>,
}

/// The layout from `blob` (of `image`) and, for a kernel that keeps `current` per CPU, the
/// symbols locating it.
fn read_layout(
    image: &KernelImage,
    blob: BtfBlob<'_>,
    symbols: Option<PerCpuSymbols>,
) -> Result<TaskLayout, ImageError> {
    with_btf(&image.path, blob, |btf| {
        let reader = Reader {
            image,
            btf,
            btf_offset: blob.offset,
            pointer: image.pointer_size(),
        };
        let per_cpu_current = match symbols {
            None => None,
            Some(PerCpuSymbols {
                current_task: Some(address),
                ..
            }) => Some(address),
            Some(PerCpuSymbols {
                pcpu_hot: Some(hot),
                ..
            }) => {
                let pcpu_hot = reader.structure("pcpu_hot")?;
                let member = reader.field(&pcpu_hot, "pcpu_hot", "current_task", Expect::Ptr)?;
                let slot = hot.checked_add(u64::from(member.offset)).ok_or_else(|| {
                    reader.refuse(
                        "pcpu_hot",
                        "current_task",
                        format!("lies past 2^64 ({hot:#x})"),
                    )
                })?;
                Some(slot)
            }
            Some(_) => {
                return Err(ImageError::NoCurrentTask {
                    path: image.path.clone(),
                })
            }
        };
        let task = reader.structure("task_struct")?;
        let field = |name, expect| reader.field(&task, "task_struct", name, expect);
        let pid = field("pid", Expect::Int(4))?.offset;
        let tgid = field("tgid", Expect::Int(4))?.offset;
        let comm = field("comm", Expect::CharArray)?;
        Ok(TaskLayout {
            per_cpu_current,
            pid,
            tgid,
            comm: comm.offset,
            comm_len: comm.size,
            group_leader: field("group_leader", Expect::Ptr)?.offset,
            flags: field("flags", Expect::Int(4))?.offset,
            mm: field("mm", Expect::Ptr)?.offset,
            state: field("__state", Expect::Int(4)).ok().map(|f| f.offset),
        })
    })
}

/// The queries on one kernel's BTF, with what its errors name.
struct Reader<'a> {
    image: &'a KernelImage,
    btf: &'a Btf,
    /// Where the BTF starts in the kernel bytes, for errors.
    btf_offset: u64,
    pointer: usize,
}

impl Reader<'_> {
    /// The struct called `name` (a forward declaration of it does not count).
    fn structure(&self, name: &'static str) -> Result<Struct, ImageError> {
        let types = self
            .btf
            .resolve_types_by_name(name)
            .map_err(|e| self.bad_btf(e))?;
        types
            .into_iter()
            .find_map(|t| match t {
                Type::Struct(s) | Type::Union(s) => Some(s),
                _ => None,
            })
            .ok_or_else(|| ImageError::NoBtfStruct {
                path: self.image.path.clone(),
                name,
            })
    }

    /// Member `name` of `outer` (struct `strukt`), of the type `expect` says, inside it.
    fn field(
        &self,
        outer: &Struct,
        strukt: &'static str,
        name: &'static str,
        expect: Expect,
    ) -> Result<Found, ImageError> {
        let refuse = |why: String| self.refuse(strukt, name, why);
        let member = self.member(outer, strukt, name)?;
        let ty = self.strip(member.ty.clone(), strukt, name)?;
        let size = match (expect, &ty) {
            (Expect::Int(n), Type::Int(i)) if i.size() == n => n,
            (Expect::Int(n), Type::Enum(e)) if e.size() == n => n,
            (Expect::Ptr, Type::Ptr(_)) => self.pointer,
            (Expect::CharArray, Type::Array(a)) => {
                let element = self.strip(self.chained(a, strukt, name)?, strukt, name)?;
                match element {
                    Type::Int(i) if i.size() == 1 => a.len(),
                    other => {
                        return Err(refuse(format!(
                            "is an array of {}, not of char",
                            describe(&other)
                        )))
                    }
                }
            }
            (expect, other) => {
                let want = match expect {
                    Expect::Int(n) => format!("a {n}-byte integer"),
                    Expect::Ptr => "a pointer".into(),
                    Expect::CharArray => "a char array".into(),
                };
                return Err(refuse(format!("is {}, not {want}", describe(other))));
            }
        };
        let end = u64::from(member.offset) + size as u64;
        if size == 0 || end > outer.size() as u64 {
            return Err(refuse(format!(
                "({size} bytes at byte {}) runs past the struct's {} bytes",
                member.offset,
                outer.size()
            )));
        }
        Ok(Found {
            offset: member.offset,
            size: size as u32,
        })
    }

    /// Member `name` of `outer`, looked for in its anonymous structs and unions too (their
    /// offsets added): its byte offset in `outer` and its type.
    fn member(
        &self,
        outer: &Struct,
        strukt: &'static str,
        name: &'static str,
    ) -> Result<MemberAt, ImageError> {
        self.find(outer, strukt, name, 0)?
            .ok_or_else(|| ImageError::NoBtfMember {
                path: self.image.path.clone(),
                strukt,
                member: name,
            })
    }

    fn find(
        &self,
        outer: &Struct,
        strukt: &'static str,
        name: &'static str,
        depth: usize,
    ) -> Result<Option<MemberAt>, ImageError> {
        if depth > MAX_DEPTH {
            return Err(self.refuse(
                strukt,
                name,
                "lies in anonymous structs nested too deep".into(),
            ));
        }
        for m in &outer.members {
            let member_name = self.btf.resolve_name(m).map_err(|e| self.bad_btf(e))?;
            if member_name == name {
                let offset = self.byte_offset(m, outer, strukt, name)?;
                let ty = self.chained(m, strukt, name)?;
                return Ok(Some(MemberAt { offset, ty }));
            }
            if !member_name.is_empty() {
                continue;
            }
            let inner = self.strip(self.chained(m, strukt, name)?, strukt, name)?;
            let (Type::Struct(inner) | Type::Union(inner)) = inner else {
                continue;
            };
            if let Some(found) = self.find(&inner, strukt, name, depth + 1)? {
                let base = self.byte_offset(m, outer, strukt, name)?;
                let offset = base
                    .checked_add(found.offset)
                    .ok_or_else(|| self.refuse(strukt, name, "has an offset past 4 GiB".into()))?;
                return Ok(Some(MemberAt {
                    offset,
                    ty: found.ty,
                }));
            }
        }
        Ok(None)
    }

    /// `m`'s byte offset in `outer`: a bitfield, a member off a byte boundary or one past the
    /// struct's end is refused.
    fn byte_offset(
        &self,
        m: &Member,
        outer: &Struct,
        strukt: &'static str,
        name: &'static str,
    ) -> Result<u32, ImageError> {
        if let Some(bits) = m.bitfield_size().filter(|&bits| bits != 0) {
            return Err(self.refuse(strukt, name, format!("is a bitfield of {bits} bits")));
        }
        let bits = m.bit_offset();
        if !bits.is_multiple_of(8) {
            return Err(self.refuse(strukt, name, format!("lies at bit {bits}, off a byte")));
        }
        let offset = bits / 8;
        if offset as usize >= outer.size() {
            return Err(self.refuse(
                strukt,
                name,
                format!(
                    "lies at byte {offset}, beyond its struct's {} bytes",
                    outer.size()
                ),
            ));
        }
        Ok(offset)
    }

    /// The type `t` refers to.
    fn chained(
        &self,
        t: &dyn btf_rs::BtfType,
        strukt: &'static str,
        name: &'static str,
    ) -> Result<Type, ImageError> {
        let id = t.get_type_id().unwrap_or(0);
        self.btf
            .resolve_type_by_id(id)
            .map_err(|e| self.refuse(strukt, name, format!("has no type ({id}: {e})")))
    }

    /// `t` without its typedefs and qualifiers.
    fn strip(
        &self,
        mut t: Type,
        strukt: &'static str,
        name: &'static str,
    ) -> Result<Type, ImageError> {
        for _ in 0..MAX_DEPTH {
            t = match &t {
                Type::Typedef(x) => self.chained(x, strukt, name)?,
                Type::Const(x) | Type::Volatile(x) | Type::Restrict(x) => {
                    self.chained(x, strukt, name)?
                }
                Type::TypeTag(x) => self.chained(x, strukt, name)?,
                _ => return Ok(t),
            };
        }
        Err(self.refuse(strukt, name, "has a type of too many typedef links".into()))
    }

    fn refuse(&self, strukt: &'static str, member: &'static str, why: String) -> ImageError {
        ImageError::BadBtfMember {
            path: self.image.path.clone(),
            strukt,
            member,
            why,
        }
    }

    fn bad_btf(&self, e: btf_rs::Error) -> ImageError {
        ImageError::BadBtf {
            path: self.image.path.clone(),
            offset: self.btf_offset,
            why: e.to_string(),
        }
    }
}

/// A member found in a struct or its anonymous parts.
struct MemberAt {
    offset: u32,
    ty: Type,
}

/// A type as an error names it: "int of 4 bytes", "ptr", "struct of 64 bytes".
fn describe(t: &Type) -> String {
    match t {
        Type::Int(i) => format!("an int of {} bytes", i.size()),
        Type::Enum(e) => format!("an enum of {} bytes", e.size()),
        Type::Struct(s) | Type::Union(s) => format!("a {} of {} bytes", t.name(), s.size()),
        Type::Array(a) => format!("an array of {}", a.len()),
        other => format!("a {}", other.name()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{parse, Options};

    /// A tiny BTF encoder (Linux's include/uapi/linux/btf.h): types get ids from 1 on.
    #[derive(Default)]
    struct Encoder {
        types: Vec<u8>,
        strings: Vec<u8>,
        count: u32,
    }

    impl Encoder {
        fn new() -> Self {
            Encoder {
                strings: vec![0],
                ..Default::default()
            }
        }

        fn name(&mut self, name: &str) -> u32 {
            if name.is_empty() {
                return 0;
            }
            let at = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            at
        }

        fn push(
            &mut self,
            name: &str,
            kind: u32,
            kind_flag: bool,
            vlen: u32,
            size_or_type: u32,
        ) -> u32 {
            let name = self.name(name);
            let info = (u32::from(kind_flag) << 31) | (kind << 24) | vlen;
            for v in [name, info, size_or_type] {
                self.types.extend_from_slice(&v.to_le_bytes());
            }
            self.count += 1;
            self.count
        }

        fn words(&mut self, words: &[u32]) {
            for w in words {
                self.types.extend_from_slice(&w.to_le_bytes());
            }
        }

        fn int(&mut self, name: &str, size: u32) -> u32 {
            let id = self.push(name, 1, false, 0, size);
            // Encoding signed, offset 0, all bits.
            self.words(&[(1 << 24) | (size * 8)]);
            id
        }

        fn ptr(&mut self, to: u32) -> u32 {
            self.push("", 2, false, 0, to)
        }

        fn array(&mut self, element: u32, index: u32, len: u32) -> u32 {
            let id = self.push("", 3, false, 0, 0);
            self.words(&[element, index, len]);
            id
        }

        fn typedef(&mut self, name: &str, to: u32) -> u32 {
            self.push(name, 8, false, 0, to)
        }

        /// A struct (or union) of `size` bytes; members are (name, type, bit offset, bitfield
        /// size), the bitfield sizes written only when some is not 0 (kind_flag), as pahole does.
        fn aggregate(
            &mut self,
            union: bool,
            name: &str,
            size: u32,
            members: &[(&str, u32, u32, u32)],
        ) -> u32 {
            let kind_flag = members.iter().any(|m| m.3 != 0);
            let id = self.push(
                name,
                if union { 5 } else { 4 },
                kind_flag,
                members.len() as u32,
                size,
            );
            for &(name, ty, offset, bits) in members {
                let name = self.name(name);
                let offset = if kind_flag {
                    (bits << 24) | offset
                } else {
                    offset
                };
                self.words(&[name, ty, offset]);
            }
            id
        }

        fn finish(&self) -> Vec<u8> {
            let type_len = self.types.len() as u32;
            let mut out = vec![0x9f, 0xeb, 1, 0];
            for v in [24, 0, type_len, type_len, self.strings.len() as u32] {
                out.extend_from_slice(&u32::to_le_bytes(v));
            }
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }

    /// What a test task_struct's members are: each (name, type, bit offset, bitfield size).
    type Members<'a> = Vec<(&'a str, u32, u32, u32)>;

    /// Ids of the basic types `build` declares before task_struct.
    struct Ids {
        int: u32,
        long: u32,
        char_array: u32,
        int_array: u32,
        ptr: u32,
    }

    /// A BTF with task_struct (64 bytes) as `members` makes it from `Ids`; pid and tgid are
    /// in an anonymous struct in an anonymous union at byte 8 unless `members` says other.
    fn build(members: impl FnOnce(&Ids, u32) -> Members<'static>) -> Vec<u8> {
        let mut e = Encoder::new();
        let int = e.int("int", 4);
        let long = e.int("long", 8);
        let char = e.int("char", 1);
        let index = e.int("unsigned int", 4);
        let char_array = e.array(char, index, 16);
        let int_array = e.array(int, index, 4);
        // task_struct will be the id after the pointer, pid_t and the two anonymous types.
        let ptr = e.ptr(e.count + 5);
        let pid_t = e.typedef("pid_t", int);
        let ids = Ids {
            int,
            long,
            char_array,
            int_array,
            ptr,
        };
        let inner = e.aggregate(
            false,
            "",
            8,
            &[("pid", pid_t, 0, 0), ("tgid", pid_t, 32, 0)],
        );
        let union = e.aggregate(true, "", 8, &[("", inner, 0, 0), ("pad", long, 0, 0)]);
        let members = members(&ids, union);
        let task = e.aggregate(false, "task_struct", 64, &members);
        assert_eq!(task, ptr + 4);
        // As in 6.2 to 6.14, though there current_task is at 0.
        e.aggregate(
            false,
            "pcpu_hot",
            64,
            &[("preempt_count", int, 0, 0), ("current_task", ptr, 64, 0)],
        );
        e.finish()
    }

    fn good_members(ids: &Ids, union: u32) -> Members<'static> {
        vec![
            ("flags", ids.int, 0, 0),
            ("", union, 64, 0),
            ("comm", ids.char_array, 16 * 8, 0),
            ("group_leader", ids.ptr, 32 * 8, 0),
            ("mm", ids.ptr, 40 * 8, 0),
        ]
    }

    /// A raw arm64 Image (a header, then the BTF at 64) named "test-Image".
    fn image(btf: &[u8]) -> KernelImage {
        let mut bytes = vec![0u8; 64];
        bytes[0x38..0x3c].copy_from_slice(b"ARM\x64");
        bytes.extend_from_slice(btf);
        bytes.extend_from_slice(&[0; 8]);
        parse(Path::new("test-Image"), bytes, &Options::default()).unwrap()
    }

    fn layout(btf: &[u8], symbols: Option<PerCpuSymbols>) -> Result<TaskLayout, ImageError> {
        let image = image(btf);
        read_layout(&image, image.btf()?, symbols)
    }

    fn error(btf: &[u8]) -> String {
        layout(btf, None).unwrap_err().to_string()
    }

    #[test]
    fn offsets_through_anonymous_structs_and_unions() {
        let btf = build(good_members);
        let image = image(&btf);
        assert_eq!(image.btf().unwrap().offset, 64);
        assert_eq!(
            image.task_layout().unwrap(),
            TaskLayout {
                per_cpu_current: None,
                pid: 8,
                tgid: 12,
                comm: 16,
                comm_len: 16,
                group_leader: 32,
                flags: 0,
                mm: 40,
                state: None,
            }
        );
    }

    #[test]
    fn the_current_task_slot_from_current_task_or_pcpu_hot() {
        let btf = build(good_members);
        let slot = |current_task, pcpu_hot| {
            layout(
                &btf,
                Some(PerCpuSymbols {
                    current_task,
                    pcpu_hot,
                }),
            )
            .map(|l| l.per_cpu_current)
        };
        assert_eq!(slot(Some(0x1fb80), None).unwrap(), Some(0x1fb80));
        assert_eq!(slot(None, Some(0x351c0)).unwrap(), Some(0x351c8));
        let e = slot(None, None).unwrap_err().to_string();
        assert_eq!(e, "kallsyms of test-Image has no current_task or pcpu_hot");
        let e = slot(None, Some(u64::MAX)).unwrap_err().to_string();
        assert!(e.contains("pcpu_hot.current_task lies past 2^64"), "{e}");
    }

    #[test]
    fn missing_members_and_structs_are_named() {
        let btf = build(|_, union| vec![("", union, 64, 0)]);
        assert_eq!(
            error(&btf),
            "BTF of test-Image has no task_struct member comm"
        );
        let btf = build(|ids, _| {
            let mut m = good_members(ids, 0);
            m.retain(|m| !m.0.is_empty());
            m
        });
        assert_eq!(
            error(&btf),
            "BTF of test-Image has no task_struct member pid"
        );
        let mut e = Encoder::new();
        e.int("int", 4);
        assert_eq!(
            error(&e.finish()),
            "BTF of test-Image has no struct task_struct"
        );
    }

    #[test]
    fn a_lying_btf_is_refused() {
        let with = |name: &str, ty: fn(&Ids) -> u32, offset: u32, bits: u32| {
            let name = name.to_owned();
            error(&build(move |ids, union| {
                let mut m = good_members(ids, union);
                let at = m.iter().position(|m| m.0 == name).unwrap();
                m[at] = (m[at].0, ty(ids), offset, bits);
                m
            }))
        };
        let cases = [
            // Beyond the struct, or running past its end.
            (
                with("mm", |i| i.ptr, 1000 * 8, 0),
                "task_struct.mm lies at byte 1000, beyond its struct's 64 bytes",
            ),
            (
                with("mm", |i| i.ptr, 60 * 8, 0),
                "task_struct.mm (8 bytes at byte 60) runs past the struct's 64 bytes",
            ),
            (
                with("comm", |i| i.char_array, 56 * 8, 0),
                "task_struct.comm (16 bytes at byte 56) runs past",
            ),
            // A bitfield where a pointer is expected, a member off a byte boundary.
            (
                with("group_leader", |i| i.ptr, 32 * 8, 8),
                "task_struct.group_leader is a bitfield of 8 bits",
            ),
            (
                with("group_leader", |i| i.ptr, 32 * 8 + 3, 0),
                "task_struct.group_leader lies at bit 259, off a byte",
            ),
            // Types other than Linux's.
            (
                with("comm", |i| i.int, 16 * 8, 0),
                "task_struct.comm is an int of 4 bytes, not a char array",
            ),
            (
                with("comm", |i| i.int_array, 16 * 8, 0),
                "task_struct.comm is an array of an int of 4 bytes, not of char",
            ),
            (
                with("mm", |i| i.long, 40 * 8, 0),
                "task_struct.mm is an int of 8 bytes, not a pointer",
            ),
            (
                with("flags", |i| i.long, 0, 0),
                "task_struct.flags is an int of 8 bytes, not a 4-byte integer",
            ),
            (
                with("flags", |i| i.ptr, 0, 0),
                "task_struct.flags is a ptr, not a 4-byte integer",
            ),
            (
                with("flags", |_| 999, 0, 0),
                "task_struct.flags has no type (999",
            ),
        ];
        for (got, want) in cases {
            assert!(got.starts_with("BTF of test-Image: "), "{got}");
            assert!(got.contains(want), "{got:?} does not say {want:?}");
        }
    }

    #[test]
    fn loops_in_the_types_end() {
        // A typedef that names itself, as pid's type.
        let mut e = Encoder::new();
        let looping = e.typedef("pid_t", 1);
        let task = e.aggregate(false, "task_struct", 64, &[("pid", looping, 0, 0)]);
        assert_eq!(task, 2);
        assert!(error(&e.finish()).contains("too many typedef links"));
        // An anonymous struct that holds itself.
        let mut e = Encoder::new();
        e.int("int", 4);
        let anon = e.aggregate(false, "", 8, &[("", 2, 0, 0), ("x", 1, 0, 0)]);
        e.aggregate(false, "task_struct", 64, &[("", anon, 0, 0)]);
        assert!(error(&e.finish()).contains("nested too deep"));
    }

    #[test]
    fn a_damaged_blob_is_an_error_not_a_panic_or_a_hang() {
        let btf = build(good_members);
        // Cut types: the header's lengths no longer fit the bytes left.
        let cut = image(&btf[..btf.len() - 20]);
        assert!(matches!(cut.task_layout(), Err(ImageError::NoBtf { .. })));
        // Every byte of the types (and the header's lengths) set to 0xff in turn: whatever
        // btf-rs makes of it, an answer comes, and a panic is caught as an error.
        for at in 12..btf.len() {
            let mut damaged = btf.clone();
            damaged[at] = 0xff;
            if let Err(e) = layout(&damaged, None) {
                let _ = e.to_string();
            }
        }
        // A panic inside the parser's caller is caught and named.
        let image = image(&btf);
        let e = with_btf::<()>(&image.path, image.btf().unwrap(), |_| panic!("boom")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "test-Image: the BTF at offset 0x40 is malformed: the BTF parser panicked: boom"
        );
    }
}
