//! Parameter locations at a function's first instruction, from DWARF: what lets a SPEC name
//! `size=size` for a Rust-ABI function, whose arguments no C convention predicts.
//!
//! At the entry the compiler's location is a register or a stack slot: `DW_OP_regN`,
//! `DW_OP_bregN` of the stack pointer, or `DW_OP_fbreg` (the frame base, which a
//! frame-pointer function sets one word below SP at entry on x86). Other forms (values built
//! by expressions, `DW_OP_entry_value`) are reported as unsupported, and a location list
//! without an entry covering the first instruction as optimised out.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use gimli::{EndianSlice, Operation, RunTimeEndian};
use kern_profile_format::Arch;
use object::Object;

use kern_profile_symbols::budget::Budget;

use super::args::{cfa_at_entry, dwarf_register, dwarf_sp_fp, frame_pointer_at_entry, Location};

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// One formal parameter of a function and where it is at the entry, or why that is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub location: Result<Location, String>,
}

/// How the frame base of a function is defined (`DW_AT_frame_base`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameBase {
    Register(u16),
    Cfa,
    Unknown,
}

/// The parameters of the functions starting at `entries`, from the DWARF of `file` (an ELF
/// of `file_len` bytes). Functions without DWARF are absent from the map; an ELF without
/// DWARF gives an empty map. Compressed sections are decompressed within the file's bound
/// ([`Budget`]); one that is over it or does not decompress is an error naming it, not an
/// empty section.
pub fn entry_parameters(
    file: &object::File<'_>,
    file_len: usize,
    arch: Arch,
    entries: &[u64],
) -> Result<HashMap<u64, Vec<Param>>, String> {
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let mut budget = Budget::for_file(file_len);
    let sections = gimli::DwarfSections::load(|id| -> Result<Cow<'_, [u8]>, String> {
        match file.section_by_name(id.name()) {
            Some(s) => budget
                .section_bytes(&s)
                .map_err(|e| format!("section {}: {e}", id.name())),
            None => Ok(Cow::Borrowed(&[])),
        }
    })?;
    let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
    let wanted: HashSet<u64> = entries.iter().copied().collect();
    let mut out = HashMap::new();
    let mut units = dwarf.units();
    let gimli_err = |e: gimli::Error| e.to_string();
    while let Some(header) = units.next().map_err(gimli_err)? {
        let unit = dwarf.unit(header).map_err(gimli_err)?;
        scan_unit(&dwarf, &unit, arch, &wanted, &mut out).map_err(gimli_err)?;
    }
    Ok(out)
}

/// Finds the wanted subprograms of one unit and collects their formal parameters.
fn scan_unit(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    arch: Arch,
    wanted: &HashSet<u64>,
    out: &mut HashMap<u64, Vec<Param>>,
) -> Result<(), gimli::Error> {
    let mut cursor = unit.entries();
    let mut depth = 0isize;
    // The wanted subprogram being read: its depth, entry and frame base.
    let mut current: Option<(isize, u64, FrameBase)> = None;
    while let Some((delta, entry)) = cursor.next_dfs()? {
        depth += delta;
        if current.is_some_and(|(d, ..)| depth <= d) {
            current = None;
        }
        match entry.tag() {
            gimli::DW_TAG_subprogram => {
                if let Some(addr) = entry_address(dwarf, unit, entry)? {
                    if wanted.contains(&addr) && !out.contains_key(&addr) {
                        current = Some((depth, addr, frame_base(unit, entry)?));
                        out.insert(addr, Vec::new());
                    }
                }
            }
            gimli::DW_TAG_formal_parameter => {
                let Some((d, addr, base)) = current else {
                    continue;
                };
                if depth != d + 1 {
                    continue;
                }
                let Some(name) = param_name(dwarf, unit, entry)? else {
                    continue;
                };
                let location = location_at(dwarf, unit, entry, addr, arch, base)?;
                if let Some(params) = out.get_mut(&addr) {
                    params.push(Param { name, location });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn entry_address(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R<'_>>,
) -> Result<Option<u64>, gimli::Error> {
    if let Some(v) = entry.attr_value(gimli::DW_AT_low_pc)? {
        return dwarf.attr_address(unit, v);
    }
    if entry.attr_value(gimli::DW_AT_ranges)?.is_none() {
        return Ok(None);
    }
    let mut ranges = dwarf.die_ranges(unit, entry)?;
    let mut low: Option<u64> = None;
    while let Some(r) = ranges.next()? {
        low = Some(low.map_or(r.begin, |l| l.min(r.begin)));
    }
    Ok(low)
}

fn frame_base(
    unit: &gimli::Unit<R<'_>>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R<'_>>,
) -> Result<FrameBase, gimli::Error> {
    let Some(gimli::AttributeValue::Exprloc(expr)) = entry.attr_value(gimli::DW_AT_frame_base)?
    else {
        return Ok(FrameBase::Unknown);
    };
    let mut ops = expr.operations(unit.encoding());
    Ok(match ops.next()? {
        Some(Operation::Register { register }) => FrameBase::Register(register.0),
        Some(Operation::CallFrameCFA) => FrameBase::Cfa,
        _ => FrameBase::Unknown,
    })
}

/// The parameter's own name, or its abstract origin's (out-of-line copies of inlinable
/// functions name their parameters there).
fn param_name(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R<'_>>,
) -> Result<Option<String>, gimli::Error> {
    if let Some(v) = entry.attr_value(gimli::DW_AT_name)? {
        let s = dwarf.attr_string(unit, v)?;
        return Ok(Some(s.to_string_lossy().into_owned()));
    }
    if let Some(gimli::AttributeValue::UnitRef(off)) =
        entry.attr_value(gimli::DW_AT_abstract_origin)?
    {
        let origin = unit.entry(off)?;
        if let Some(v) = origin.attr_value(gimli::DW_AT_name)? {
            let s = dwarf.attr_string(unit, v)?;
            return Ok(Some(s.to_string_lossy().into_owned()));
        }
    }
    Ok(None)
}

/// The parameter's location at `pc`, the function's entry, or why it is unknown (a broken
/// location list spoils that parameter only).
fn location_at(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R<'_>>,
    pc: u64,
    arch: Arch,
    base: FrameBase,
) -> Result<Result<Location, String>, gimli::Error> {
    let Some(value) = entry.attr_value(gimli::DW_AT_location)? else {
        return Ok(Err("has no location (optimised out)".into()));
    };
    let expr = match value {
        gimli::AttributeValue::Exprloc(expr) => Some(expr),
        v => match find_in_list(dwarf, unit, v, pc) {
            Ok(e) => e,
            Err(e) => return Ok(Err(format!("has an unreadable location list ({e})"))),
        },
    };
    let Some(expr) = expr else {
        return Ok(Err(format!(
            "has no location at the function's entry {pc:#x} (optimised out there)"
        )));
    };
    Ok(match collect_ops(expr, unit.encoding()) {
        Ok(ops) => evaluate(&ops, arch, base),
        Err(e) => Err(format!("has an unreadable location ({e})")),
    })
}

/// The location-list entry covering `pc`.
fn find_in_list<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &gimli::Unit<R<'a>>,
    value: gimli::AttributeValue<R<'a>>,
    pc: u64,
) -> Result<Option<gimli::Expression<R<'a>>>, gimli::Error> {
    if let Some(mut list) = dwarf.attr_locations(unit, value)? {
        while let Some(e) = list.next()? {
            if e.range.begin <= pc && pc < e.range.end {
                return Ok(Some(e.data));
            }
        }
    }
    Ok(None)
}

/// The operations of a location description, up to its first piece (the low part of a value
/// split over several places).
fn collect_ops<'a>(
    expr: gimli::Expression<R<'a>>,
    encoding: gimli::Encoding,
) -> Result<Vec<Operation<R<'a>>>, gimli::Error> {
    let mut ops = expr.operations(encoding);
    let mut v = Vec::new();
    while let Some(op) = ops.next()? {
        if matches!(op, Operation::Piece { .. }) {
            break;
        }
        v.push(op);
    }
    Ok(v)
}

/// Turns a location description at entry into a [`Location`].
fn evaluate(ops: &[Operation<R<'_>>], arch: Arch, base: FrameBase) -> Result<Location, String> {
    let (sp, fp) = dwarf_sp_fp(arch);
    let register = |n: u16| {
        dwarf_register(arch, n).ok_or_else(|| format!("is in DWARF register {n}, not supported"))
    };
    match ops {
        [Operation::Register { register: r }] => register(r.0).map(Location::Register),
        [Operation::RegisterOffset {
            register: r,
            offset,
            ..
        }] if r.0 == sp => Ok(Location::Stack(*offset)),
        // Relative to the frame pointer as the body sets it up.
        [Operation::RegisterOffset {
            register: r,
            offset,
            ..
        }] if r.0 == fp => Ok(Location::Stack(frame_pointer_at_entry(arch) + offset)),
        [Operation::FrameOffset { offset }] => match base {
            FrameBase::Register(r) if r == fp => {
                Ok(Location::Stack(frame_pointer_at_entry(arch) + offset))
            }
            FrameBase::Register(r) if r == sp => Ok(Location::Stack(*offset)),
            FrameBase::Cfa => Ok(Location::Stack(cfa_at_entry(arch) + offset)),
            _ => Err("is relative to a frame base that is neither SP, FP nor the CFA".into()),
        },
        [] => Err("has an empty location at the function's entry".into()),
        other => Err(format!(
            "has a location at the function's entry that is not a register or stack slot ({} DWARF operations)",
            other.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(n: u16) -> Operation<R<'static>> {
        Operation::Register {
            register: gimli::Register(n),
        }
    }

    fn breg(n: u16, offset: i64) -> Operation<R<'static>> {
        Operation::RegisterOffset {
            register: gimli::Register(n),
            offset,
            base_type: gimli::UnitOffset(0),
        }
    }

    #[test]
    fn locations_at_entry() {
        use Location::*;
        let i = Arch::I386;
        assert_eq!(
            evaluate(&[reg(1)], i, FrameBase::Unknown),
            Ok(Register("ecx"))
        );
        assert_eq!(evaluate(&[breg(4, 4)], i, FrameBase::Unknown), Ok(Stack(4)));
        // [ebp+8] once the frame is set up is [esp+4] at entry.
        assert_eq!(evaluate(&[breg(5, 8)], i, FrameBase::Unknown), Ok(Stack(4)));
        let fbreg = [Operation::FrameOffset { offset: 8 }];
        assert_eq!(evaluate(&fbreg, i, FrameBase::Register(5)), Ok(Stack(4)));
        assert_eq!(evaluate(&fbreg, i, FrameBase::Cfa), Ok(Stack(12)));
        assert_eq!(
            evaluate(
                &[Operation::FrameOffset { offset: 16 }],
                Arch::X86_64,
                FrameBase::Register(6)
            ),
            Ok(Stack(8))
        );
        assert_eq!(
            evaluate(&[reg(5)], Arch::X86_64, FrameBase::Unknown),
            Ok(Register("rdi"))
        );
        assert!(evaluate(&fbreg, i, FrameBase::Unknown)
            .unwrap_err()
            .contains("frame base"));
        assert!(evaluate(&[reg(40)], i, FrameBase::Unknown)
            .unwrap_err()
            .contains("DWARF register 40"));
        assert!(
            evaluate(&[reg(1), Operation::StackValue], i, FrameBase::Unknown)
                .unwrap_err()
                .contains("not a register or stack slot")
        );
    }
}
