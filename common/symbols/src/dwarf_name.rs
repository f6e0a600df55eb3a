//! A function's DWARF name with its scope (`CRUNCH.QUICKSORT`, `drivers::net::poll`): for a
//! function whose linkage name is in no scheme the demangler knows.
//!
//! The scope is the namespaces, modules, classes, structures and interfaces the function's
//! DIE (or the declaration its definition refers to) is declared in, outermost first; in a
//! Pascal or Modula compilation unit, which is a unit or module of its own, the unit's name
//! (its source file's stem) comes first. C++ and Rust join the parts with `::`, other
//! languages with `.`.

use std::rc::Rc;

use gimli::{AttributeValue, Reader, UnitOffset, UnitRef, UnitSectionOffset};
use rustc_hash::FxHashMap;

/// A unit's place: its offset in its section (`.debug_types` units marked by the top bit).
pub(crate) fn unit_key<R: Reader<Offset = usize>>(unit: UnitRef<'_, R>) -> u64 {
    match unit.header.offset() {
        UnitSectionOffset::DebugInfoOffset(o) => o.0 as u64,
        UnitSectionOffset::DebugTypesOffset(o) => o.0 as u64 | 1 << 63,
    }
}

/// How many `DW_AT_specification` / `DW_AT_abstract_origin` links are followed to a name.
const MAX_LINKS: usize = 4;

/// What names a unit's functions: its own name (a Pascal unit), the scopes of every function
/// DIE, the separator. Made in one walk over the unit's tree, so that naming many functions
/// of a large unit stays linear.
pub(crate) struct UnitNames {
    unit: Option<String>,
    /// Function (subprogram) DIE offset → the names of its scopes, outermost first.
    scopes: FxHashMap<usize, Rc<[String]>>,
    sep: &'static str,
}

impl UnitNames {
    /// `None` when the unit's tree cannot be read.
    pub(crate) fn new<R: Reader<Offset = usize>>(unit: UnitRef<'_, R>) -> Option<Self> {
        let mut cursor = unit.entries();
        let (_, root) = cursor.next_dfs().ok()??;
        let language = match root.attr_value(gimli::DW_AT_language).ok()? {
            Some(AttributeValue::Language(l)) => Some(l),
            _ => None,
        };
        let mut own = None;
        if language.is_some_and(|l| UNIT_IS_MODULE.contains(&l)) {
            let case_insensitive = matches!(
                root.attr_value(gimli::DW_AT_identifier_case).ok()?,
                Some(AttributeValue::IdentifierCase(
                    gimli::DW_ID_up_case | gimli::DW_ID_case_insensitive
                ))
            );
            own = unit
                .name
                .as_ref()
                .and_then(|n| unit_stem(n, case_insensitive));
        }
        let sep = match language {
            Some(gimli::DW_LANG_Rust)
            | Some(gimli::DW_LANG_C_plus_plus)
            | Some(gimli::DW_LANG_C_plus_plus_03)
            | Some(gimli::DW_LANG_C_plus_plus_11)
            | Some(gimli::DW_LANG_C_plus_plus_14) => "::",
            _ => ".",
        };
        Some(UnitNames {
            unit: own,
            scopes: function_scopes(unit, cursor)?,
            sep,
        })
    }

    /// The qualified DWARF name of the function whose DIE is at `offset`; `None` when the DIE
    /// has no name or the DWARF cannot be read.
    pub(crate) fn name<R: Reader<Offset = usize>>(
        &self,
        unit: UnitRef<'_, R>,
        offset: UnitOffset,
    ) -> Option<String> {
        let (named_at, name) = named_die(unit, offset)?;
        let mut parts: Vec<&str> = self.unit.iter().map(String::as_str).collect();
        if let Some(scopes) = self.scopes.get(&named_at.0) {
            parts.extend(scopes.iter().map(String::as_str));
        }
        parts.push(&name);
        Some(parts.join(self.sep))
    }
}

/// Languages whose compilation unit is a unit or module that names its functions' scope.
const UNIT_IS_MODULE: [gimli::DwLang; 3] = [
    gimli::DW_LANG_Pascal83,
    gimli::DW_LANG_Modula2,
    gimli::DW_LANG_Modula3,
];

/// The DIE holding the function's name (itself, or a declaration or abstract instance it
/// refers to within the unit) and that name.
fn named_die<R: Reader<Offset = usize>>(
    unit: UnitRef<'_, R>,
    mut offset: UnitOffset,
) -> Option<(UnitOffset, String)> {
    for _ in 0..=MAX_LINKS {
        let entry = unit.entry(offset).ok()?;
        if let Some(v) = entry.attr_value(gimli::DW_AT_name).ok()? {
            let name = unit
                .attr_string(v)
                .ok()?
                .to_string_lossy()
                .ok()?
                .into_owned();
            return Some((offset, name));
        }
        let link = [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin]
            .into_iter()
            .find_map(|at| match entry.attr_value(at) {
                Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
                _ => None,
            });
        offset = link?;
    }
    None
}

/// The scopes of every function DIE after the root, outermost first: one walk over the
/// unit's tree, keeping the open scopes.
fn function_scopes<R: Reader<Offset = usize>>(
    unit: UnitRef<'_, R>,
    mut cursor: gimli::EntriesCursor<'_, '_, R>,
) -> Option<FxHashMap<usize, Rc<[String]>>> {
    let mut depth = 0isize;
    // (depth, name) of the open scopes; `current` is their names, shared by the functions
    // declared in them.
    let mut open: Vec<(isize, Option<String>)> = Vec::new();
    let mut current: Rc<[String]> = Rc::from([]);
    let mut changed = false;
    let mut scopes = FxHashMap::default();
    while let Some((delta, entry)) = cursor.next_dfs().ok()? {
        depth += delta;
        while open.last().is_some_and(|(d, _)| *d >= depth) {
            open.pop();
            changed = true;
        }
        let tag = entry.tag();
        if tag == gimli::DW_TAG_subprogram {
            if changed {
                current = open.iter().filter_map(|(_, n)| n.clone()).collect();
                changed = false;
            }
            scopes.insert(entry.offset().0, current.clone());
        }
        if SCOPES.contains(&tag) {
            let name = match entry.attr_value(gimli::DW_AT_name) {
                Ok(Some(v)) => unit
                    .attr_string(v)
                    .ok()
                    .and_then(|s| s.to_string_lossy().ok().map(|s| s.into_owned())),
                _ => None,
            };
            open.push((depth, name));
            changed = true;
        }
    }
    Some(scopes)
}

/// The DIEs that name a scope of the functions declared in them.
const SCOPES: [gimli::DwTag; 6] = [
    gimli::DW_TAG_namespace,
    gimli::DW_TAG_module,
    gimli::DW_TAG_class_type,
    gimli::DW_TAG_structure_type,
    gimli::DW_TAG_union_type,
    gimli::DW_TAG_interface_type,
];

/// A unit's name from its compilation unit's (source file's) name: the file name without
/// directories and extension, upper case where identifiers are case-insensitive (FreePascal
/// names `crunch.pas`'s routines `CRUNCH_$$_...`).
fn unit_stem<R: Reader>(name: &R, case_insensitive: bool) -> Option<String> {
    let name = name.to_string_lossy().ok()?;
    let file = name.rsplit(['/', '\\']).next()?;
    let stem = file.split_once('.').map_or(file, |(s, _)| s);
    if stem.is_empty() {
        return None;
    }
    Some(match case_insensitive {
        true => stem.to_ascii_uppercase(),
        false => stem.to_string(),
    })
}
