//! `tasks=POINTER->ID,NAME` checked against the kernel's DWARF at start: `POINTER` a global
//! variable at a fixed address whose type is a pointer to a struct, `ID` a member of that
//! struct that is a 4-byte integer, `NAME` one that is an array of 1-byte chars (the first
//! [`TASK_NAME_LEN`] bytes are read). Typedefs and qualifiers are seen through, a struct
//! declared only (C's `struct task;`) is looked up by name.
//!
//! The work is bounded by the sections' sizes: units and entries are read once each, type
//! chains are followed [`MAX_HOPS`] deep at most; malformed DWARF is an error, not a panic.

use std::borrow::Cow;

use gimli::{AttributeValue, EndianSlice, Operation, RunTimeEndian, UnitOffset};
use kern_profile_format::TASK_NAME_LEN;
use kern_profile_symbols::budget::Budget;
use object::Object;

use super::description::TaskDescription;
use super::{Current, TaskDescriptionError, TaskSpec};

mod linux;

pub use linux::{linux_layout, LinuxDwarfError};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// Typedefs, qualifiers and declarations followed from a type to what it names: a longer
/// chain is taken for a loop.
pub const MAX_HOPS: usize = 32;

/// The description's places in the kernel's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTasks {
    /// The variable's address.
    pub address: u64,
    /// The struct's name in the DWARF.
    pub strukt: String,
    /// The members' offsets in the struct.
    pub id: u32,
    pub name: u32,
    /// The name bytes read: the array's length, at most [`TASK_NAME_LEN`].
    pub name_len: u32,
    /// The array's own length (longer than `name_len` when truncated).
    pub name_array_len: u64,
}

impl ResolvedTasks {
    /// The task reader's spec: pid = tid = ID, the process's name the thread's, no
    /// kernel-thread flag, no run state.
    pub fn spec(&self) -> TaskSpec {
        TaskSpec {
            current: Current::Global {
                address: self.address,
            },
            tid: self.id,
            pid: self.id,
            name: self.name,
            name_len: self.name_len,
            leader: 0,
            flags: 0,
            kernel_thread_flag: 0,
            state: None,
        }
    }
}

/// Resolves `desc` against the DWARF of `elf` (an ELF file's bytes).
pub fn resolve(elf: &[u8], desc: &TaskDescription) -> Result<ResolvedTasks, TaskDescriptionError> {
    let d = desc.to_string();
    with_units(elf, |units| units.resolve(desc)).map_err(|e| match e {
        Unreadable::NoDwarf(why) => TaskDescriptionError::NoDwarf { desc: d, why },
        Unreadable::Dwarf(why) => dwarf_err(&d, why),
    })?
}

/// Why an ELF's DWARF cannot be read at all.
enum Unreadable {
    /// Not an ELF, or no `.debug_info`: why, said of the file.
    NoDwarf(String),
    /// Its DWARF is malformed.
    Dwarf(String),
}

/// `f` over the units of the DWARF of `elf`.
fn with_units<T>(elf: &[u8], f: impl FnOnce(&Units<'_, '_>) -> T) -> Result<T, Unreadable> {
    let file = object::File::parse(elf)
        .map_err(|e| Unreadable::NoDwarf(format!("is not an ELF ({e})")))?;
    if file.section_by_name(".debug_info").is_none() {
        return Err(Unreadable::NoDwarf("has no DWARF (.debug_info)".into()));
    }
    let endian = match file.is_little_endian() {
        true => RunTimeEndian::Little,
        false => RunTimeEndian::Big,
    };
    let mut budget = Budget::for_file(elf.len());
    let sections = gimli::DwarfSections::load(|id| -> Result<Cow<'_, [u8]>, String> {
        match file.section_by_name(id.name()) {
            Some(s) => budget
                .section_bytes(&s)
                .map_err(|e| format!("section {}: {e}", id.name())),
            None => Ok(Cow::Borrowed(&[])),
        }
    })
    .map_err(Unreadable::Dwarf)?;
    let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
    let units = Units::read(&dwarf).map_err(|e| Unreadable::Dwarf(e.to_string()))?;
    Ok(f(&units))
}

fn dwarf_err(desc: &str, e: impl std::fmt::Display) -> TaskDescriptionError {
    TaskDescriptionError::Dwarf {
        desc: desc.to_string(),
        why: e.to_string(),
    }
}

/// A DIE anywhere in `.debug_info`: its unit's index and its offset there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ref {
    unit: usize,
    offset: UnitOffset,
}

/// Why a description does not fit, before it is named in a [`TaskDescriptionError`].
enum Misfit {
    Dwarf(String),
    NoVariable,
    Ambiguous(usize),
    Pointer(String),
    NoMember(String, String),
    Member(String, String, String),
}

impl From<gimli::Error> for Misfit {
    fn from(e: gimli::Error) -> Self {
        Misfit::Dwarf(e.to_string())
    }
}

struct Units<'d, 'a> {
    dwarf: &'d gimli::Dwarf<R<'a>>,
    units: Vec<gimli::Unit<R<'a>>>,
}

impl<'d, 'a> Units<'d, 'a> {
    fn read(dwarf: &'d gimli::Dwarf<R<'a>>) -> Result<Self, gimli::Error> {
        let mut units = Vec::new();
        let mut headers = dwarf.units();
        while let Some(h) = headers.next()? {
            units.push(dwarf.unit(h)?);
        }
        Ok(Units { dwarf, units })
    }

    fn resolve(&self, desc: &TaskDescription) -> Result<ResolvedTasks, TaskDescriptionError> {
        let d = desc.to_string();
        self.fit(desc).map_err(|m| match m {
            Misfit::Dwarf(e) => dwarf_err(&d, e),
            Misfit::NoVariable => TaskDescriptionError::NoVariable {
                desc: d,
                pointer: desc.pointer.clone(),
            },
            Misfit::Ambiguous(count) => TaskDescriptionError::Ambiguous {
                desc: d,
                pointer: desc.pointer.clone(),
                count,
            },
            Misfit::Pointer(why) => TaskDescriptionError::BadPointer {
                desc: d,
                pointer: desc.pointer.clone(),
                why,
            },
            Misfit::NoMember(strukt, member) => TaskDescriptionError::NoMember {
                desc: d,
                strukt,
                member,
            },
            Misfit::Member(strukt, member, why) => TaskDescriptionError::BadMember {
                desc: d,
                strukt,
                member,
                why,
            },
        })
    }

    fn fit(&self, desc: &TaskDescription) -> Result<ResolvedTasks, Misfit> {
        let (address, var_type) = self.variable(&desc.pointer)?;
        let var_type = var_type.ok_or(Misfit::Pointer("has no type in the DWARF".into()))?;
        let pointer = self.strip(var_type)?;
        if self.tag(pointer)? != gimli::DW_TAG_pointer_type {
            return Err(Misfit::Pointer(format!(
                "is {}, not a pointer to a struct",
                self.a(pointer)?
            )));
        }
        let Some(target) = self.type_of(pointer)? else {
            return Err(Misfit::Pointer(
                "is a void pointer, not a pointer to a struct".into(),
            ));
        };
        let strukt = self.strip(target)?;
        if !matches!(
            self.tag(strukt)?,
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type
        ) {
            return Err(Misfit::Pointer(format!(
                "points to {}, not a struct",
                self.a(strukt)?
            )));
        }
        let struct_name = self.name(strukt)?.unwrap_or_else(|| "(anonymous)".into());
        let strukt = match self.is_declaration(strukt)? {
            false => strukt,
            true => self.definition(&struct_name)?.ok_or_else(|| {
                Misfit::Pointer(format!(
                    "points to struct {struct_name}, whose definition the DWARF lacks"
                ))
            })?,
        };
        let member_err = |m: &str, why: String| Misfit::Member(struct_name.clone(), m.into(), why);
        let (id, id_type) = self.member(strukt, &desc.id, &struct_name)?;
        let id_type = self.strip(id_type)?;
        if !self.is_integer(id_type, 4)? {
            return Err(member_err(
                &desc.id,
                format!("is {}, not a 4-byte integer", self.a(id_type)?),
            ));
        }
        let (name, name_type) = self.member(strukt, &desc.name, &struct_name)?;
        let name_array_len = self
            .char_array_len(self.strip(name_type)?)?
            .map_err(|why| member_err(&desc.name, why))?;
        Ok(ResolvedTasks {
            address,
            strukt: struct_name.clone(),
            id,
            name,
            name_len: name_array_len.min(TASK_NAME_LEN as u64) as u32,
            name_array_len,
        })
    }

    /// The global variable `name` with a fixed address: that address and its type.
    fn variable(&self, name: &str) -> Result<(u64, Option<Ref>), Misfit> {
        let mut found: Vec<(u64, Option<Ref>)> = Vec::new();
        for (u, unit) in self.units.iter().enumerate() {
            let mut cursor = unit.entries();
            while let Some((_, entry)) = cursor.next_dfs()? {
                if entry.tag() != gimli::DW_TAG_variable {
                    continue;
                }
                let Some(address) = self.fixed_address(unit, entry)? else {
                    continue;
                };
                let here = Ref {
                    unit: u,
                    offset: entry.offset(),
                };
                // A definition may name its declaration, which holds the name and type.
                let decl = match entry.attr_value(gimli::DW_AT_specification)? {
                    Some(v) => self.to_ref(u, v),
                    None => None,
                };
                let named = |r: Ref| -> Result<bool, gimli::Error> {
                    Ok(self.name(r)?.as_deref() == Some(name)
                        || self.string_attr(r, gimli::DW_AT_linkage_name)?.as_deref() == Some(name))
                };
                if !(named(here)? || decl.map(named).transpose()? == Some(true)) {
                    continue;
                }
                let ty = match self.type_of(here)? {
                    Some(t) => Some(t),
                    None => decl.map(|d| self.type_of(d)).transpose()?.flatten(),
                };
                if !found.iter().any(|(a, _)| *a == address) {
                    found.push((address, ty));
                }
            }
        }
        match found.len() {
            0 => Err(Misfit::NoVariable),
            1 => Ok(found[0]),
            n => Err(Misfit::Ambiguous(n)),
        }
    }

    /// A location that is one address (`DW_OP_addr`, `DW_OP_addrx`).
    fn fixed_address(
        &self,
        unit: &gimli::Unit<R<'a>>,
        entry: &gimli::DebuggingInformationEntry<'_, '_, R<'a>>,
    ) -> Result<Option<u64>, gimli::Error> {
        let Some(AttributeValue::Exprloc(expr)) = entry.attr_value(gimli::DW_AT_location)? else {
            return Ok(None);
        };
        let mut ops = expr.operations(unit.encoding());
        let address = match ops.next()? {
            Some(Operation::Address { address }) => address,
            Some(Operation::AddressIndex { index }) => self.dwarf.address(unit, index)?,
            _ => return Ok(None),
        };
        Ok(match ops.next()? {
            None => Some(address),
            Some(_) => None,
        })
    }

    /// The member `member` of the struct at `strukt` (named `struct_name`): its offset and
    /// type, found in the anonymous structs and unions it holds too (Linux's `task_struct`
    /// under `randomized_struct_fields_start`, C11's anonymous members).
    fn member(&self, strukt: Ref, member: &str, struct_name: &str) -> Result<(u32, Ref), Misfit> {
        self.find_member(strukt, member, struct_name, 0)?
            .ok_or_else(|| Misfit::NoMember(struct_name.into(), member.into()))
    }

    fn find_member(
        &self,
        strukt: Ref,
        member: &str,
        struct_name: &str,
        depth: usize,
    ) -> Result<Option<(u32, Ref)>, Misfit> {
        let err = |why: &str| Misfit::Member(struct_name.into(), member.into(), why.into());
        if depth > MAX_HOPS {
            return Err(err(&format!(
                "lies deeper than {MAX_HOPS} anonymous members (a loop?)"
            )));
        }
        let unit = &self.units[strukt.unit];
        let mut tree = unit.entries_tree(Some(strukt.offset))?;
        let root = tree.root()?;
        let mut children = root.children();
        while let Some(child) = children.next()? {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_member {
                continue;
            }
            let here = Ref {
                unit: strukt.unit,
                offset: e.offset(),
            };
            let found = match self.name(here)? {
                Some(name) if name == member => None,
                Some(_) => continue,
                // An anonymous struct or union: its members are the outer struct's.
                None => match self.type_of(here)? {
                    Some(t) => Some(self.strip(t)?),
                    None => continue,
                },
            };
            let offset =
                Self::member_offset(unit, e)?.ok_or_else(|| err("has no constant offset"))?;
            let offset = u32::try_from(offset).map_err(|_| err("is beyond 4 GiB"))?;
            if let Some(inner) = found {
                if !matches!(
                    self.tag(inner)?,
                    gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type
                ) {
                    continue;
                }
                match self.find_member(inner, member, struct_name, depth + 1)? {
                    Some((o, ty)) => {
                        let o = offset
                            .checked_add(o)
                            .ok_or_else(|| err("is beyond 4 GiB"))?;
                        return Ok(Some((o, ty)));
                    }
                    None => continue,
                }
            }
            if e.attr_value(gimli::DW_AT_bit_size)?.is_some() {
                return Err(err("is a bit field"));
            }
            let ty = self.type_of(here)?.ok_or_else(|| err("has no type"))?;
            return Ok(Some((offset, ty)));
        }
        Ok(None)
    }

    /// A member's constant offset (`DW_AT_data_member_location`, a constant or
    /// `DW_OP_plus_uconst`; none for a union's members and some producers' first member).
    fn member_offset(
        unit: &gimli::Unit<R<'a>>,
        e: &gimli::DebuggingInformationEntry<'_, '_, R<'a>>,
    ) -> Result<Option<u64>, gimli::Error> {
        Ok(match e.attr(gimli::DW_AT_data_member_location)? {
            Some(a) => match (a.udata_value(), a.value()) {
                (Some(n), _) => Some(n),
                (None, AttributeValue::Exprloc(expr)) => {
                    let mut ops = expr.operations(unit.encoding());
                    match (ops.next()?, ops.next()?) {
                        (Some(Operation::PlusConstant { value }), None) => Some(value),
                        _ => None,
                    }
                }
                _ => None,
            },
            None => Some(0),
        })
    }

    /// An integer base type of `size` bytes.
    fn is_integer(&self, r: Ref, size: u64) -> Result<bool, gimli::Error> {
        if self.tag(r)? != gimli::DW_TAG_base_type {
            return Ok(false);
        }
        let e = self.units[r.unit].entry(r.offset)?;
        let bytes = e
            .attr(gimli::DW_AT_byte_size)?
            .and_then(|a| a.udata_value());
        let encoding = match e.attr_value(gimli::DW_AT_encoding)? {
            Some(AttributeValue::Encoding(enc)) => Some(enc),
            _ => None,
        };
        Ok(bytes == Some(size)
            && matches!(
                encoding,
                Some(
                    gimli::DW_ATE_signed
                        | gimli::DW_ATE_unsigned
                        | gimli::DW_ATE_signed_char
                        | gimli::DW_ATE_unsigned_char
                        | gimli::DW_ATE_UTF
                )
            ))
    }

    /// The length of a one-dimensional array of 1-byte integers, or why `r` is not one.
    fn char_array_len(&self, r: Ref) -> Result<Result<u64, String>, Misfit> {
        if self.tag(r)? != gimli::DW_TAG_array_type {
            return Ok(Err(format!(
                "is {}, not an array of 1-byte chars",
                self.a(r)?
            )));
        }
        let element = match self.type_of(r)? {
            Some(t) => self.strip(t)?,
            None => return Ok(Err("is an array of no type".into())),
        };
        if !self.is_integer(element, 1)? {
            return Ok(Err(format!(
                "is an array of {}, not of 1-byte chars",
                self.describe(element)?
            )));
        }
        let unit = &self.units[r.unit];
        let mut tree = unit.entries_tree(Some(r.offset))?;
        let root = tree.root()?;
        let mut children = root.children();
        let mut len = None;
        let mut dimensions = 0;
        while let Some(child) = children.next()? {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_subrange_type {
                continue;
            }
            dimensions += 1;
            let get = |at| -> Result<Option<u64>, gimli::Error> {
                Ok(e.attr(at)?.and_then(|a| a.udata_value()))
            };
            len = match (get(gimli::DW_AT_count)?, get(gimli::DW_AT_upper_bound)?) {
                (Some(n), _) => Some(n),
                (None, Some(upper)) => {
                    let lower = get(gimli::DW_AT_lower_bound)?.unwrap_or(0);
                    upper.checked_add(1).and_then(|n| n.checked_sub(lower))
                }
                _ => None,
            };
        }
        Ok(match (dimensions, len) {
            (1, Some(n)) if n > 0 => Ok(n),
            (1, _) => Err("is an array of unknown or zero length".into()),
            _ => Err("is not a one-dimensional array".into()),
        })
    }

    /// The defining DIE of the struct named `name` (for a declaration's).
    fn definition(&self, name: &str) -> Result<Option<Ref>, gimli::Error> {
        for (u, unit) in self.units.iter().enumerate() {
            let mut cursor = unit.entries();
            while let Some((_, e)) = cursor.next_dfs()? {
                if !matches!(
                    e.tag(),
                    gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type
                ) {
                    continue;
                }
                let r = Ref {
                    unit: u,
                    offset: e.offset(),
                };
                if self.name(r)?.as_deref() == Some(name) && !self.is_declaration(r)? {
                    return Ok(Some(r));
                }
            }
        }
        Ok(None)
    }

    /// `r` with its typedefs and qualifiers seen through.
    fn strip(&self, mut r: Ref) -> Result<Ref, Misfit> {
        for _ in 0..MAX_HOPS {
            match self.tag(r)? {
                gimli::DW_TAG_typedef
                | gimli::DW_TAG_const_type
                | gimli::DW_TAG_volatile_type
                | gimli::DW_TAG_restrict_type
                | gimli::DW_TAG_atomic_type => match self.type_of(r)? {
                    Some(next) => r = next,
                    None => return Ok(r),
                },
                _ => return Ok(r),
            }
        }
        Err(Misfit::Dwarf(format!(
            "a chain of more than {MAX_HOPS} typedefs and qualifiers (a loop?)"
        )))
    }

    fn tag(&self, r: Ref) -> Result<gimli::DwTag, gimli::Error> {
        Ok(self.units[r.unit].entry(r.offset)?.tag())
    }

    fn is_declaration(&self, r: Ref) -> Result<bool, gimli::Error> {
        let e = self.units[r.unit].entry(r.offset)?;
        Ok(matches!(
            e.attr_value(gimli::DW_AT_declaration)?,
            Some(AttributeValue::Flag(true))
        ))
    }

    fn type_of(&self, r: Ref) -> Result<Option<Ref>, gimli::Error> {
        let e = self.units[r.unit].entry(r.offset)?;
        Ok(match e.attr_value(gimli::DW_AT_type)? {
            Some(v) => self.to_ref(r.unit, v),
            None => None,
        })
    }

    /// A reference attribute's DIE: in the same unit, or any other (`DW_FORM_ref_addr`).
    fn to_ref(&self, unit: usize, v: AttributeValue<R<'a>>) -> Option<Ref> {
        match v {
            AttributeValue::UnitRef(offset) => Some(Ref { unit, offset }),
            AttributeValue::DebugInfoRef(o) => self.units.iter().enumerate().find_map(|(u, x)| {
                o.to_unit_offset(&x.header)
                    .map(|offset| Ref { unit: u, offset })
            }),
            _ => None,
        }
    }

    fn name(&self, r: Ref) -> Result<Option<String>, gimli::Error> {
        self.string_attr(r, gimli::DW_AT_name)
    }

    fn string_attr(&self, r: Ref, at: gimli::DwAt) -> Result<Option<String>, gimli::Error> {
        let unit = &self.units[r.unit];
        let e = unit.entry(r.offset)?;
        match e.attr_value(at)? {
            Some(v) => Ok(Some(
                self.dwarf
                    .attr_string(unit, v)?
                    .to_string_lossy()
                    .into_owned(),
            )),
            None => Ok(None),
        }
    }

    /// [`Units::describe`] with an article.
    fn a(&self, r: Ref) -> Result<String, gimli::Error> {
        let d = self.describe(r)?;
        Ok(
            match self.name(r)?.is_none() && d.starts_with(['a', 'e', 'i', 'o', 'u']) {
                true => format!("an {d}"),
                false => format!("a {d}"),
            },
        )
    }

    /// A type in a message: its name, else what it is.
    fn describe(&self, r: Ref) -> Result<String, gimli::Error> {
        let what = match self.tag(r)? {
            gimli::DW_TAG_pointer_type => "pointer",
            gimli::DW_TAG_array_type => "array",
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type => "struct",
            gimli::DW_TAG_union_type => "union",
            gimli::DW_TAG_enumeration_type => "enum",
            gimli::DW_TAG_subroutine_type => "function",
            _ => "type",
        };
        Ok(match self.name(r)? {
            Some(n) if what == "struct" || what == "union" || what == "enum" => {
                format!("{what} {n}")
            }
            Some(n) => n,
            None => what.to_string(),
        })
    }
}

#[cfg(test)]
mod tests;
