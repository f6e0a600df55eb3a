//! FreePascal's linkage names of routines, shown as `UNIT.NAME`, `UNIT.CLASS.METHOD`.
//!
//! The rules, from FPC 3.2's compiler/symdef.pas (`make_mangledname`,
//! `tprocdef.defaultmangledname`, `tabstractprocdef.mangledprocparanames`):
//!
//! ```text
//! name     = [typeprefix "_$"] owner ["$_$" prefix] "_$$_" suffix
//! owner    = UNIT | "P$" PROGRAM                  (upper case)
//! prefix   = { TYPE "_$_" } [ROUTINE paras { "_" ROUTINE paras } | "$CRC" hex8]
//! suffix   = ["$"] ROUTINE paras                   ("$": operators, class constructors)
//! paras    = { "$" PARAMTYPE } ["$$" RESULTTYPE] | "$crc" hex8
//! ```
//!
//! `prefix` holds the object, class or record types a method is declared in (outermost
//! first), then the routines a nested routine is declared in. Routines are shown without
//! parameter types, as FreePascal's own backtraces and debuggers (its DWARF names) show them:
//! the types cannot be split back out reliably anyway (`FILE$OF$T`, generics' `$crc`, `_` in
//! both type and routine names), and the name then matches the DWARF name of the same
//! routine inlined elsewhere. Overloads of one name therefore share a frame.
//!
//! Not demangled (left as they are, for the DWARF name to stand in): names with a type prefix
//! (`VMT_$`, `WRPR_$` interface thunks: no plain routine), a `$CRC` nesting prefix, and
//! anything malformed. Routines nested two deep or more are ambiguous (`A$T_B`: `_B` may end
//! the type or name the next routine): only the outermost enclosing routine is shown.

/// `UNIT.NAME` for a FreePascal routine's linkage name, `None` when it is not one.
pub(super) fn demangle(name: &str) -> Option<String> {
    let (head, suffix) = name.split_once("_$$_")?;
    let (owner, prefix) = owner_and_prefix(head)?;
    let mut parts = vec![owner];
    if let Some(prefix) = prefix {
        // The last piece is the enclosing routine (or empty after a type's `_$_`).
        let (types, routine) = match prefix.rsplit_once("_$_") {
            Some((types, routine)) => (Some(types), routine),
            None => (None, prefix),
        };
        for ty in types.into_iter().flat_map(|t| t.split("_$_")) {
            parts.push(identifier(ty)?);
        }
        if !routine.is_empty() {
            parts.push(routine_name(routine)?);
        }
    }
    // Operators and class constructors: `$plus`, shown as their DWARF name `plus`.
    let suffix = suffix.strip_prefix('$').unwrap_or(suffix);
    parts.push(routine_name(suffix)?);
    Some(parts.join("."))
}

/// The unit or program name and the `$_$` prefix after it, if any. A name with a type
/// prefix (a `$` in the owner) is no routine's.
fn owner_and_prefix(head: &str) -> Option<(&str, Option<&str>)> {
    let body = head.strip_prefix("P$").unwrap_or(head);
    match body.split_once('$') {
        None => Some((identifier(body)?, None)),
        Some((owner, rest)) => {
            let prefix = rest.strip_prefix("_$").filter(|p| !p.is_empty())?;
            Some((identifier(owner)?, Some(prefix)))
        }
    }
}

/// A routine's name without its parameter and result types (`NAME$T1$T2$$R`).
fn routine_name(s: &str) -> Option<&str> {
    let Some((name, paras)) = s.split_once('$') else {
        return identifier(s);
    };
    let paras_ok = !paras.is_empty()
        && paras
            .chars()
            .all(|c| c == '$' || c == '.' || c == '_' || c.is_ascii_alphanumeric());
    paras_ok.then(|| identifier(name))?
}

/// A Pascal identifier (unit names may be dotted: `SYSTEM.SYSUTILS`).
fn identifier(s: &str) -> Option<&str> {
    let ok = !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c == '_' || c == '.' || c.is_ascii_alphanumeric());
    ok.then_some(s)
}

#[cfg(test)]
mod tests {
    use super::demangle;

    fn d(name: &str) -> Option<String> {
        demangle(name)
    }

    #[test]
    fn program_and_unit_routines() {
        // From a program built with FPC 3.2.2 (tests/data/fpc/kernel.pas).
        assert_eq!(d("P$KERNEL_$$_SPIN").as_deref(), Some("KERNEL.SPIN"));
        assert_eq!(
            d("P$KERNEL_$$_FILL$LONGINT").as_deref(),
            Some("KERNEL.FILL")
        );
        assert_eq!(
            d("CRUNCH_$$_QUICKSORT$array_of_LONGINT$LONGINT$LONGINT").as_deref(),
            Some("CRUNCH.QUICKSORT")
        );
        assert_eq!(
            d("P$CRUNCH_$$_QUICKSORT$LONGINT$LONGINT").as_deref(),
            Some("CRUNCH.QUICKSORT")
        );
    }

    #[test]
    fn overloads_share_their_name() {
        assert_eq!(
            d("CRUNCH_$$_SUM$array_of_LONGINT$$INT64").as_deref(),
            Some("CRUNCH.SUM")
        );
        assert_eq!(
            d("CRUNCH_$$_SUM$LONGINT$LONGINT$$LONGINT").as_deref(),
            Some("CRUNCH.SUM")
        );
        assert_eq!(
            d("OUTPUT_$$_SQUARE$SMALLINT$$SMALLINT").as_deref(),
            Some("OUTPUT.SQUARE")
        );
    }

    #[test]
    fn methods_operators_and_nested_routines() {
        assert_eq!(
            d("CRUNCH$_$TSORTER_$__$$_SORT$array_of_LONGINT").as_deref(),
            Some("CRUNCH.TSORTER.SORT")
        );
        assert_eq!(
            d("CRUNCH$_$TSORTER_$__$$_COUNT$$LONGINT").as_deref(),
            Some("CRUNCH.TSORTER.COUNT")
        );
        assert_eq!(
            d("SYSTEM$_$TAGGREGATEDOBJECT_$__$$__RELEASE$$LONGINT").as_deref(),
            Some("SYSTEM.TAGGREGATEDOBJECT._RELEASE")
        );
        assert_eq!(
            d("OUTPUT$_$MYOBJECT_$__$$_MYMETHOD").as_deref(),
            Some("OUTPUT.MYOBJECT.MYMETHOD")
        );
        // A nested record's method.
        assert_eq!(
            d("U$_$TOUTER_$_TINNER_$__$$_GET$$LONGINT").as_deref(),
            Some("U.TOUTER.TINNER.GET")
        );
        assert_eq!(
            d("CRUNCH_$$_$plus$TVEC$TVEC$$TVEC").as_deref(),
            Some("CRUNCH.plus")
        );
        assert_eq!(
            d("CRUNCH$_$QUICKSORT$array_of_LONGINT$LONGINT$LONGINT_$$_SWAP$LONGINT$LONGINT")
                .as_deref(),
            Some("CRUNCH.QUICKSORT.SWAP")
        );
        // A routine nested in a method.
        assert_eq!(
            d("CRUNCH$_$TSORTER_$_SORT$array_of_LONGINT_$$_INNER").as_deref(),
            Some("CRUNCH.TSORTER.SORT.INNER")
        );
        assert_eq!(
            d("SYSTEM$_$STR_REAL$SMALLINT$SMALLINT$EXTENDED$TREAL_TYPE$OPENSTRING_$$_COUNT_LEADING_ZERO$crc1CF7EDB4")
                .as_deref(),
            Some("SYSTEM.STR_REAL.COUNT_LEADING_ZERO")
        );
        assert_eq!(d("SYSUTILS.X_$$_F").as_deref(), Some("SYSUTILS.X.F"));
    }

    #[test]
    fn not_routines_or_malformed_stay() {
        for name in [
            "kmain",
            "fpc_ansistr_decr_ref",
            "DEBUGSTART_$CRUNCH",
            "INIT$_$SYSTEM",
            "VMT_$CRUNCH_$$_TSORTER",
            "WRPR_$SYSTEM_$$_TINTERFACEDOBJECT_$_IUNKNOWN_$_2_$_SYSTEM$_$TINTERFACEDOBJECT_$__$$__RELEASE$$LONGINT",
            "SYSTEM$_$$CRC12345678_$$_DO_FILLCHAR$crcEDFA6FCF",
            "_$$_",
            "_$$_F",
            "U_$$_",
            "U_$$_F$",
            "U_$$_$",
            "U_$$_F$a b",
            "U$_$_$$_F",
            "U$X_$$_F",
            "P$_$$_F",
            "$_$$_F",
            "U$_$T_$_$_$$_F",
            "Ü_$$_F",
            "U_$$_F$Ü",
            ".U_$$_F",
        ] {
            assert_eq!(d(name), None, "{name}");
        }
    }
}
