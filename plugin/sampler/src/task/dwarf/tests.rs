use std::collections::HashMap;
use std::path::Path;

use super::*;
use kern_profile_linux_image::TaskLayout;

fn desc(s: &str) -> TaskDescription {
    TaskDescription::parse(s).unwrap()
}

/// The example kernels, as scripts/guests/build-kernel.sh builds them (`sched=on`'s tasks).
#[test]
fn the_example_kernels_describe_their_tasks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/examples");
    for (elf, pointer_size) in [
        ("kernel.elf", 4),
        ("kernel64.elf", 8),
        ("kernel-riscv64.elf", 8),
        ("kernel-aarch64.elf", 8),
    ] {
        let path = root.join(elf);
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("skipped: no {}", path.display());
            continue;
        };
        let r = resolve(&bytes, &desc("example")).unwrap_or_else(|e| panic!("{elf}: {e}"));
        assert_eq!((r.strukt.as_str(), r.id, r.name), ("Task", 0, 4), "{elf}");
        assert_eq!((r.name_len, r.name_array_len), (16, 16), "{elf}");
        assert_eq!(r.address % pointer_size, 0, "{elf}");
        let s = r.spec();
        assert_eq!(s.current, Current::Global { address: r.address });
        assert_eq!((s.tid, s.pid, s.kernel_thread_flag), (0, 0, 0));
        let err = |d: &str| resolve(&bytes, &desc(d)).unwrap_err().to_string();
        assert_eq!(
            err("CURRENT_TASK->id,id"),
            "tasks=CURRENT_TASK->id,id: member `id` of struct Task is a u32, not an array of 1-byte chars"
        );
        assert_eq!(
            err("CURRENT_TASK->name,name"),
            "tasks=CURRENT_TASK->name,name: member `name` of struct Task is an array, not a 4-byte integer"
        );
        assert!(err("CURRENT_TASK->pid,name").ends_with("struct Task has no member `pid`"));
        assert!(err("NO_SUCH_TASK->id,name").contains("no global variable `NO_SUCH_TASK`"));
    }
}

#[test]
fn not_an_elf_or_no_dwarf() {
    let e = resolve(b"not an elf", &desc("example"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("tasks=CURRENT_TASK->id,name: elf= is not an ELF"),
        "{e}"
    );
    let stripped =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/examples/user.embed.elf");
    if let Ok(bytes) = std::fs::read(&stripped) {
        let e = resolve(&bytes, &desc("example")).unwrap_err().to_string();
        assert!(e.ends_with("elf= has no DWARF (.debug_info)"), "{e}");
    }
}

/// A hand-made DWARF 4 unit (32-bit addresses): DIEs with labels, `ref4`s patched at the end.
#[derive(Default)]
struct Info {
    body: Vec<u8>,
    labels: HashMap<&'static str, u32>,
    fixups: Vec<(usize, &'static str)>,
}

/// The unit header's size: the DIEs' offsets start after it.
const HEADER: u32 = 11;

impl Info {
    fn die(&mut self, label: &'static str, abbrev: u8) -> &mut Self {
        self.labels.insert(label, HEADER + self.body.len() as u32);
        self.body.push(abbrev);
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.body.extend_from_slice(s.as_bytes());
        self.body.push(0);
        self
    }
    /// A base type (abbreviation 6): its name, size in bytes and encoding.
    fn base(&mut self, label: &'static str, name: &str, size: u8, enc: gimli::DwAte) {
        self.die(label, 6).str(name).u8(size).u8(enc.0);
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.body.push(v);
        self
    }
    fn to(&mut self, label: &'static str) -> &mut Self {
        self.fixups.push((self.body.len(), label));
        self.body.extend_from_slice(&[0; 4]);
        self
    }
    fn end(&mut self) -> &mut Self {
        self.body.push(0);
        self
    }
    fn bytes(&self) -> Vec<u8> {
        let mut body = self.body.clone();
        for &(at, label) in &self.fixups {
            body[at..at + 4].copy_from_slice(&self.labels[label].to_le_bytes());
        }
        let mut out = ((body.len() + 7) as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&4u16.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.push(4);
        out.extend_from_slice(&body);
        out
    }
}

/// The abbreviations the tests' DIEs use, by code.
fn abbrevs() -> Vec<u8> {
    use gimli::constants::*;
    let mut a = Vec::new();
    let mut add =
        |code: u8, tag: gimli::DwTag, children: bool, attrs: &[(gimli::DwAt, gimli::DwForm)]| {
            a.extend_from_slice(&[code, tag.0 as u8, children as u8]);
            for (at, form) in attrs {
                a.extend_from_slice(&[at.0 as u8, form.0 as u8]);
            }
            a.extend_from_slice(&[0, 0]);
        };
    add(1, DW_TAG_compile_unit, true, &[]);
    add(
        2,
        DW_TAG_variable,
        false,
        &[
            (DW_AT_name, DW_FORM_string),
            (DW_AT_type, DW_FORM_ref4),
            (DW_AT_location, DW_FORM_exprloc),
        ],
    );
    add(3, DW_TAG_pointer_type, false, &[(DW_AT_type, DW_FORM_ref4)]);
    add(
        4,
        DW_TAG_structure_type,
        true,
        &[
            (DW_AT_name, DW_FORM_string),
            (DW_AT_byte_size, DW_FORM_data1),
        ],
    );
    add(
        5,
        DW_TAG_member,
        false,
        &[
            (DW_AT_name, DW_FORM_string),
            (DW_AT_type, DW_FORM_ref4),
            (DW_AT_data_member_location, DW_FORM_data1),
        ],
    );
    add(
        6,
        DW_TAG_base_type,
        false,
        &[
            (DW_AT_name, DW_FORM_string),
            (DW_AT_byte_size, DW_FORM_data1),
            (DW_AT_encoding, DW_FORM_data1),
        ],
    );
    add(7, DW_TAG_array_type, true, &[(DW_AT_type, DW_FORM_ref4)]);
    add(
        8,
        DW_TAG_subrange_type,
        false,
        &[(DW_AT_count, DW_FORM_data1)],
    );
    add(
        9,
        DW_TAG_typedef,
        false,
        &[(DW_AT_name, DW_FORM_string), (DW_AT_type, DW_FORM_ref4)],
    );
    add(10, DW_TAG_pointer_type, false, &[]);
    // An anonymous member, and an anonymous struct (Linux's `randomized_struct_fields_start`
    // with randstruct on; C11's anonymous members).
    add(
        11,
        DW_TAG_member,
        false,
        &[
            (DW_AT_type, DW_FORM_ref4),
            (DW_AT_data_member_location, DW_FORM_data1),
        ],
    );
    add(
        12,
        DW_TAG_structure_type,
        true,
        &[(DW_AT_byte_size, DW_FORM_data1)],
    );
    a.push(0);
    a
}

/// A unit with `current` (at 0x1000) of type `var`, pointing (through `current_t`, a pointer
/// to typedef `task_t`) to struct task { `id` of type `id`; `name` of type `name` at +8 }.
fn unit(var: &'static str, id: &'static str, name: &'static str) -> Vec<u8> {
    let mut i = Info::default();
    i.die("cu", 1);
    i.die("current", 2)
        .str("current")
        .to(var)
        .u8(5)
        .u8(0x03)
        .body
        .extend_from_slice(&0x1000u32.to_le_bytes());
    i.die("ptr", 3).to("task_t");
    i.die("task_t", 9).str("task_t").to("task");
    i.die("task", 4).str("task").u8(24);
    i.die("m_id", 5).str("id").to(id).u8(0);
    i.die("m_name", 5).str("name").to(name).u8(8);
    i.end();
    i.base("u32", "u32", 4, gimli::DW_ATE_unsigned);
    i.base("u64", "u64", 8, gimli::DW_ATE_unsigned);
    i.base("char", "char", 1, gimli::DW_ATE_signed_char);
    i.base("float", "float", 4, gimli::DW_ATE_float);
    i.die("char16", 7).to("char");
    i.die("sub16", 8).u8(16).end();
    i.die("char32", 7).to("char");
    i.die("sub32", 8).u8(32).end();
    i.die("u32x16", 7).to("u32");
    i.die("subu", 8).u8(16).end();
    i.die("void_ptr", 10);
    i.die("loop", 9).str("loop").to("loop");
    i.end();
    i.bytes()
}

/// The DWARF of a unit `info`, with the tests' abbreviations in `abbrev`.
fn dwarf_of<'a>(info: &'a [u8], abbrev: &'a [u8]) -> gimli::Dwarf<R<'a>> {
    gimli::Dwarf::load(|id| -> Result<R<'_>, gimli::Error> {
        let data: &[u8] = match id {
            gimli::SectionId::DebugInfo => info,
            gimli::SectionId::DebugAbbrev => abbrev,
            _ => &[],
        };
        Ok(EndianSlice::new(data, RunTimeEndian::Little))
    })
    .unwrap()
}

fn resolve_unit(info: &[u8], d: &str) -> Result<ResolvedTasks, TaskDescriptionError> {
    let abbrev = abbrevs();
    let dwarf = dwarf_of(info, &abbrev);
    let d = desc(d);
    Units::read(&dwarf)
        .map_err(|e| dwarf_err(&d.to_string(), e))?
        .resolve(&d)
}

fn err(info: &[u8], d: &str) -> String {
    resolve_unit(info, d).unwrap_err().to_string()
}

#[test]
fn a_c_kernel_s_description_resolves() {
    let r = resolve_unit(&unit("ptr", "u32", "char16"), "current->id,name").unwrap();
    assert_eq!(
        r,
        ResolvedTasks {
            address: 0x1000,
            strukt: "task".into(),
            id: 0,
            name: 8,
            name_len: 16,
            name_array_len: 16,
        }
    );
    // A longer name is read in its first 16 bytes.
    let r = resolve_unit(&unit("ptr", "u32", "char32"), "current->id,name").unwrap();
    assert_eq!((r.name_len, r.name_array_len), (16, 32));
}

#[test]
fn each_mismatch_names_the_argument_the_symbol_and_the_member() {
    let d = "current->id,name";
    assert_eq!(
        err(&unit("ptr", "u64", "char16"), d),
        "tasks=current->id,name: member `id` of struct task is a u64, not a 4-byte integer"
    );
    assert!(err(&unit("ptr", "float", "char16"), d).ends_with("is a float, not a 4-byte integer"));
    assert_eq!(
        err(&unit("ptr", "u32", "u32"), d),
        "tasks=current->id,name: member `name` of struct task is a u32, not an array of 1-byte chars"
    );
    assert!(
        err(&unit("ptr", "u32", "u32x16"), d).ends_with("is an array of u32, not of 1-byte chars")
    );
    assert_eq!(
        err(&unit("u32", "u32", "char16"), d),
        "tasks=current->id,name: `current` is a u32, not a pointer to a struct"
    );
    assert!(err(&unit("void_ptr", "u32", "char16"), d)
        .ends_with("`current` is a void pointer, not a pointer to a struct"));
    assert_eq!(
        err(&unit("ptr", "u32", "char16"), "current->tid,name"),
        "tasks=current->tid,name: struct task has no member `tid`"
    );
    assert_eq!(
        err(&unit("ptr", "u32", "char16"), "curr->id,name"),
        "tasks=curr->id,name: the DWARF of elf= has no global variable `curr` at a fixed address"
    );
    // A typedef that names itself: an error, after a bounded walk.
    assert_eq!(
        err(&unit("loop", "u32", "char16"), d),
        "tasks=current->id,name: the DWARF of elf= does not read: a chain of more than 32 typedefs and qualifiers (a loop?)"
    );
    assert!(err(&unit("ptr", "loop", "char16"), d).contains("does not read"));
}

#[test]
fn truncated_or_corrupted_dwarf_is_an_error_not_a_panic() {
    let good = unit("ptr", "u32", "char16");
    for len in 0..good.len() {
        let _ = resolve_unit(&good[..len], "current->id,name");
    }
    for at in 0..good.len() {
        for byte in [0x00, 0x7f, 0xff] {
            let mut bad = good.clone();
            bad[at] = byte;
            let _ = resolve_unit(&bad, "current->id,name");
        }
    }
}

/// A unit with Linux's `task_struct` as a kernel without BTF has it: `pid`, `tgid` and `comm`
/// inside an anonymous struct at +8, `comm` of type `comm`.
fn linux_unit(comm: &'static str) -> Vec<u8> {
    let mut i = Info::default();
    i.die("cu", 1);
    i.die("task", 4).str("task_struct").u8(64);
    i.die("m_state", 5).str("__state").to("u32").u8(0);
    i.die("m_anon", 11).to("anon").u8(8);
    i.die("m_leader", 5).str("group_leader").to("ptr").u8(40);
    i.die("m_flags", 5).str("flags").to("u32").u8(48);
    i.die("m_mm", 5).str("mm").to("void_ptr").u8(52);
    i.end();
    i.die("anon", 12).u8(32);
    i.die("m_pid", 5).str("pid").to("pid_t").u8(0);
    i.die("m_tgid", 5).str("tgid").to("pid_t").u8(4);
    i.die("m_comm", 5).str("comm").to(comm).u8(8);
    i.end();
    i.die("ptr", 3).to("task");
    i.die("pid_t", 9).str("pid_t").to("int");
    i.base("int", "int", 4, gimli::DW_ATE_signed);
    i.base("u32", "unsigned int", 4, gimli::DW_ATE_unsigned);
    i.base("char", "char", 1, gimli::DW_ATE_signed_char);
    i.die("char16", 7).to("char");
    i.die("sub16", 8).u8(16).end();
    i.die("void_ptr", 10);
    i.end();
    i.bytes()
}

fn linux_of(info: &[u8], per_cpu: bool) -> Result<TaskLayout, LinuxDwarfError> {
    let abbrev = abbrevs();
    let dwarf = dwarf_of(info, &abbrev);
    let symbol = |name: &str| (name == "current_task").then_some(0xc1e5_e6e8);
    Units::read(&dwarf).unwrap().linux_layout(per_cpu, &symbol)
}

#[test]
fn linux_s_task_struct_from_dwarf_through_anonymous_members() {
    let l = linux_of(&linux_unit("char16"), true).unwrap();
    assert_eq!(
        l,
        TaskLayout {
            per_cpu_current: Some(0xc1e5_e6e8),
            pid: 8,
            tgid: 12,
            comm: 16,
            comm_len: 16,
            group_leader: 40,
            flags: 48,
            mm: 52,
            state: Some(0),
        }
    );
    assert_eq!(
        linux_of(&linux_unit("char16"), false)
            .unwrap()
            .per_cpu_current,
        None
    );
    assert_eq!(
        linux_of(&linux_unit("u32"), true).unwrap_err().to_string(),
        "its DWARF's member `comm` of struct task_struct is a unsigned int, not an array of 1-byte chars"
    );
    // No task_struct at all: said so.
    assert_eq!(
        linux_of(&unit("ptr", "u32", "char16"), true)
            .unwrap_err()
            .to_string(),
        "its DWARF defines no struct task_struct"
    );
}

/// Debian's i386 kernel as `scripts/setup.sh --with-linux` fetches its -dbg vmlinux: no BTF,
/// so the layout comes from its DWARF, and `current_task` from its symbol table.
#[test]
fn debian_686_vmlinux_gives_its_layout_from_dwarf() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/linux/i386/vmlinux");
    let Ok(image) = kern_profile_linux_image::open(&path, &Default::default()) else {
        eprintln!("skipped: no {}", path.display());
        return;
    };
    let (spec, source) = crate::task::linux_image_spec(&image, kern_profile_format::Arch::I386)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(source, crate::task::LayoutSource::Dwarf);
    assert_eq!(spec.pid, spec.tid + 4, "tgid right after pid");
    assert_eq!(spec.name_len, 16);
    assert!(spec.state.is_some());
    let Current::PerCpu { offset } = spec.current else {
        panic!("{:?}", spec.current)
    };
    // A per-CPU symbol: a link address in the kernel's half, as i386 keeps them.
    assert!(offset >= 0xc000_0000, "{offset:#x}");
}
