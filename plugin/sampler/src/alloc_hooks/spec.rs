//! The `alloc=SPEC` description of what to hook: a preset (`rust`, `linux`, `libc`) or a
//! file of lines `ALLOCATOR KIND FUNCTION [ARG=WHERE]...`.
//!
//! - KIND: `alloc`, `realloc` or `free`.
//! - FUNCTION: a demangled name without hash (`kernel::kalloc::kmalloc`), or its last path
//!   components (`kalloc::kmalloc`, `kmalloc`) when they name one function; `?NAME` marks a
//!   function the kernel may lack (skipped when absent).
//! - ARG: `size` (units asked for), `count` (multiplies size), `order` (2^order units, instead
//!   of size), `ptr` (the pointer a realloc or free is given; an alloc's is its result),
//!   `array` (a bulk call's array of object pointers, `count` of them: an alloc fills it, as
//!   many as it returns; a free empties it): one event per pointer, each of `size`.
//! - WHERE: a parameter name (its location at entry from DWARF) or `argN`, the Nth argument
//!   by the calling convention (`arg0` is the first); `a|b` takes the first that resolves.
//!
//! `#` starts a comment. One directive: `convention c` (the default: cdecl on i386, System V
//! on x86_64) or `convention regparm3` (i386's first three arguments in eax, edx, ecx, as
//! Linux i386 is built).

use kern_profile_format::memtrace::Op;

use super::error::HookError;

/// The presets, by name.
pub const PRESETS: [(&str, &str); 3] = [
    ("rust", include_str!("presets/rust.spec")),
    ("linux", include_str!("presets/linux.spec")),
    ("libc", include_str!("presets/libc.spec")),
];

/// What an argument says about the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Size,
    Count,
    Order,
    Ptr,
    Array,
}

impl Role {
    fn parse(s: &str) -> Option<Role> {
        match s {
            "size" => Some(Role::Size),
            "count" => Some(Role::Count),
            "order" => Some(Role::Order),
            "ptr" => Some(Role::Ptr),
            "array" => Some(Role::Array),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Size => "size",
            Role::Count => "count",
            Role::Order => "order",
            Role::Ptr => "ptr",
            Role::Array => "array",
        }
    }
}

/// Where an argument is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Where {
    /// A parameter name, located through DWARF.
    Param(String),
    /// The Nth argument by the calling convention (0 is the first).
    Arg(u8),
}

/// Largest `argN`.
pub const MAX_ARG: u8 = 15;

/// One argument of a line: its role and where to look, in order of preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgSpec {
    pub role: Role,
    pub choices: Vec<Where>,
}

/// How `argN` is found.
pub use kern_profile_arch::Convention;

/// One line: a function to hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSpec {
    /// 1-based line number, for messages.
    pub line: usize,
    /// The line as written (comment removed), for messages.
    pub text: String,
    pub allocator: String,
    pub op: Op,
    pub function: String,
    /// `?NAME`: skipped when the kernel lacks it.
    pub optional: bool,
    pub args: Vec<ArgSpec>,
}

impl FunctionSpec {
    pub fn arg(&self, role: Role) -> Option<&ArgSpec> {
        self.args.iter().find(|a| a.role == role)
    }
}

/// A parsed SPEC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The preset's name or the file's path, as given.
    pub name: String,
    pub convention: Convention,
    pub functions: Vec<FunctionSpec>,
}

impl Spec {
    /// The preset `arg` names, or else the file at that path.
    pub fn load(arg: &str) -> Result<Spec, HookError> {
        if let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == arg) {
            return Spec::parse(arg, text);
        }
        let text = std::fs::read_to_string(arg).map_err(|source| HookError::SpecFile {
            spec: arg.to_string(),
            source,
        })?;
        Spec::parse(arg, &text)
    }

    /// Parses SPEC text; `name` names it in errors.
    pub fn parse(name: &str, text: &str) -> Result<Spec, HookError> {
        let mut spec = Spec {
            name: name.to_string(),
            convention: Convention::C,
            functions: Vec::new(),
        };
        let mut convention_line = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |what: String| HookError::Line {
                spec: name.to_string(),
                line: i + 1,
                text: line.to_string(),
                what,
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            if words[0] == "convention" && words.len() == 2 {
                if convention_line.replace(i + 1).is_some() {
                    return Err(err("a second `convention` line".into()));
                }
                spec.convention = match words[1] {
                    "c" | "cdecl" | "sysv" => Convention::C,
                    "regparm3" => Convention::Regparm3,
                    other => {
                        return Err(err(format!("unknown convention `{other}`: c or regparm3")))
                    }
                };
                continue;
            }
            spec.functions
                .push(parse_function(i + 1, line, &words).map_err(err)?);
        }
        if spec.functions.is_empty() {
            return Err(HookError::Spec {
                spec: name.to_string(),
                what: "no function to hook: lines are `ALLOCATOR KIND FUNCTION [ARG=WHERE]...`"
                    .into(),
            });
        }
        Ok(spec)
    }
}

fn parse_function(line: usize, text: &str, words: &[&str]) -> Result<FunctionSpec, String> {
    let [allocator, kind, function, args @ ..] = words else {
        return Err(
            "expected `ALLOCATOR KIND FUNCTION [ARG=WHERE]...` (or `convention c|regparm3`)".into(),
        );
    };
    let op = match *kind {
        "alloc" => Op::Alloc,
        "realloc" => Op::Realloc,
        "free" => Op::Free,
        other => return Err(format!("unknown kind `{other}`: alloc, realloc or free")),
    };
    let (optional, function) = match function.strip_prefix('?') {
        Some(f) => (true, f),
        None => (false, *function),
    };
    if function.is_empty() {
        return Err("`?` without a function name".into());
    }
    let mut parsed: Vec<ArgSpec> = Vec::new();
    for a in args {
        let arg = parse_arg(a)?;
        if parsed.iter().any(|p| p.role == arg.role) {
            return Err(format!("`{}` is given twice", arg.role.name()));
        }
        parsed.push(arg);
    }
    check_roles(op, &parsed)?;
    Ok(FunctionSpec {
        line,
        text: text.to_string(),
        allocator: allocator.to_string(),
        op,
        function: function.to_string(),
        optional,
        args: parsed,
    })
}

fn parse_arg(a: &str) -> Result<ArgSpec, String> {
    let Some((key, value)) = a.split_once('=') else {
        return Err(format!(
            "`{a}` is not ARG=WHERE (ARG: size, count, order, ptr or array)"
        ));
    };
    let role = Role::parse(key).ok_or_else(|| {
        format!("unknown argument `{key}` in `{a}`: size, count, order, ptr or array")
    })?;
    let choices = value
        .split('|')
        .map(|w| parse_where(key, w))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ArgSpec { role, choices })
}

fn parse_where(key: &str, w: &str) -> Result<Where, String> {
    if w.is_empty() {
        return Err(format!(
            "`{key}=` needs a parameter name or argN (arg0 is the first)"
        ));
    }
    if let Some(n) = w.strip_prefix("arg").filter(|n| !n.is_empty()) {
        if n.bytes().all(|b| b.is_ascii_digit()) {
            return match n.parse::<u8>() {
                Ok(n) if n <= MAX_ARG => Ok(Where::Arg(n)),
                _ => Err(format!("`{w}`: argN goes from arg0 to arg{MAX_ARG}")),
            };
        }
    }
    let ident = w
        .chars()
        .next()
        .is_some_and(|c| c == '_' || c.is_alphabetic())
        && w.chars().all(|c| c == '_' || c.is_alphanumeric());
    if !ident {
        return Err(format!(
            "`{key}={w}`: not a parameter name nor argN (arg0 is the first)"
        ));
    }
    Ok(Where::Param(w.to_string()))
}

/// Which roles each kind takes.
fn check_roles(op: Op, args: &[ArgSpec]) -> Result<(), String> {
    let has = |r: Role| args.iter().any(|a| a.role == r);
    if has(Role::Array) {
        return check_bulk_roles(op, &has);
    }
    match op {
        Op::Alloc if has(Role::Ptr) => {
            return Err(
                "an alloc's pointer is its return value: `ptr=` is for realloc and free".into(),
            )
        }
        Op::Realloc | Op::Free if !has(Role::Ptr) => {
            return Err(format!(
                "a {} needs `ptr=WHERE`, the pointer it is given",
                if op == Op::Free { "free" } else { "realloc" }
            ))
        }
        _ => {}
    }
    if has(Role::Order) && (has(Role::Size) || has(Role::Count)) {
        return Err("`order=` gives the size (2^order units): not with `size=` or `count=`".into());
    }
    if has(Role::Count) && !has(Role::Size) {
        return Err("`count=` multiplies `size=`, which is missing".into());
    }
    Ok(())
}

/// The roles of a bulk call (`array=`): its pointers are in the array, `count=` says how many.
fn check_bulk_roles(op: Op, has: &dyn Fn(Role) -> bool) -> Result<(), String> {
    if op == Op::Realloc {
        return Err("`array=` is for bulk alloc and free calls, not realloc".into());
    }
    if !has(Role::Count) {
        return Err("`array=` needs `count=WHERE`, how many pointers the array holds".into());
    }
    if has(Role::Ptr) {
        return Err("a bulk call's pointers are in `array=`: not with `ptr=`".into());
    }
    if has(Role::Order) {
        return Err("`order=` is not for bulk calls: give each object's `size=`".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Spec::parse("my.spec", text).unwrap_err().to_string()
    }

    #[test]
    fn the_issue_example_parses() {
        let s = Spec::parse(
            "ex",
            "# kmalloc\n\
             kmalloc alloc   kernel::kalloc::kmalloc        size=size\n\
             kmalloc realloc kernel::kalloc::krealloc       ptr=ptr size=size  # grows\n\
             kmalloc free    kernel::kalloc::kfree          ptr=ptr\n",
        )
        .unwrap();
        assert_eq!(s.convention, Convention::C);
        assert_eq!(s.functions.len(), 3);
        let r = &s.functions[1];
        assert_eq!(
            (r.line, r.op, r.allocator.as_str()),
            (3, Op::Realloc, "kmalloc")
        );
        assert_eq!(r.function, "kernel::kalloc::krealloc");
        assert_eq!(
            r.arg(Role::Ptr).unwrap().choices,
            [Where::Param("ptr".into())]
        );
        assert_eq!(
            r.text,
            "kmalloc realloc kernel::kalloc::krealloc       ptr=ptr size=size"
        );
        assert!(!r.optional);
    }

    #[test]
    fn presets_parse() {
        for (name, _) in PRESETS {
            let s = Spec::load(name).unwrap();
            assert!(!s.functions.is_empty(), "{name}");
        }
        let linux = Spec::load("linux").unwrap();
        assert_eq!(linux.convention, Convention::Regparm3);
        let k = linux
            .functions
            .iter()
            .find(|f| f.function == "__get_free_pages");
        assert_eq!(
            k.unwrap().arg(Role::Order).unwrap().choices,
            [Where::Arg(1)]
        );
        let rust = Spec::load("rust").unwrap();
        assert_eq!(
            rust.functions[0].arg(Role::Size).unwrap().choices,
            [Where::Param("size".into()), Where::Arg(0)]
        );
        let libc = Spec::load("libc").unwrap();
        assert!(libc
            .functions
            .iter()
            .any(|f| f.optional && f.arg(Role::Count).is_some()));
    }

    #[test]
    fn errors_name_the_line_and_what_is_wrong() {
        assert_eq!(
            err("\n\nkmalloc alocc kmalloc size=size"),
            "alloc=my.spec, line 3 (`kmalloc alocc kmalloc size=size`): unknown kind `alocc`: alloc, realloc or free"
        );
        assert!(err("kmalloc alloc")
            .contains("line 1 (`kmalloc alloc`): expected `ALLOCATOR KIND FUNCTION"));
        assert!(err("a alloc f bytes=size").contains(
            "unknown argument `bytes` in `bytes=size`: size, count, order, ptr or array"
        ));
        assert!(err("a alloc f size").contains("`size` is not ARG=WHERE"));
        assert!(err("a alloc f size=").contains("`size=` needs a parameter name or argN"));
        assert!(err("a alloc f size=arg16").contains("argN goes from arg0 to arg15"));
        assert!(err("a alloc f size=1x").contains("not a parameter name nor argN"));
        assert!(err("a alloc f size=a size=b").contains("`size` is given twice"));
        assert!(err("a alloc f ptr=p").contains("`ptr=` is for realloc and free"));
        assert!(err("a free f").contains("a free needs `ptr=WHERE`"));
        // Bulk calls.
        assert!(err("a realloc f ptr=arg0 count=arg1 array=arg2")
            .contains("`array=` is for bulk alloc and free calls, not realloc"));
        assert!(err("a alloc f array=arg3").contains("`array=` needs `count=WHERE`"));
        assert!(err("a free f ptr=arg0 count=arg1 array=arg2").contains("not with `ptr=`"));
        assert!(err("a alloc f count=arg1 array=arg2 order=arg0")
            .contains("`order=` is not for bulk calls"));
        assert!(err("a realloc f size=s").contains("a realloc needs `ptr=WHERE`"));
        assert!(err("a alloc f order=o size=s").contains("`order=` gives the size"));
        assert!(err("a alloc f count=c").contains("`count=` multiplies `size=`"));
        assert!(err("a alloc ? size=s").contains("`?` without a function name"));
        assert!(err("convention fastcall").contains("unknown convention `fastcall`"));
        assert!(err("convention c\nconvention c\na alloc f").contains("line 2"));
        assert_eq!(
            err("# nothing\n"),
            "alloc=my.spec: no function to hook: lines are `ALLOCATOR KIND FUNCTION [ARG=WHERE]...`"
        );
        let e = Spec::load("/nonexistent/x.spec").unwrap_err().to_string();
        assert!(
            e.starts_with("alloc=/nonexistent/x.spec: not a preset (rust, linux, libc) and not a readable file"),
            "{e}"
        );
    }

    #[test]
    fn argn_and_alternatives() {
        let s = Spec::parse(
            "x",
            "convention regparm3\na realloc ?f ptr=p|arg0 size=arg2",
        )
        .unwrap();
        assert_eq!(s.convention, Convention::Regparm3);
        let f = &s.functions[0];
        assert!(f.optional);
        assert_eq!(f.function, "f");
        assert_eq!(
            f.arg(Role::Ptr).unwrap().choices,
            [Where::Param("p".into()), Where::Arg(0)]
        );
        assert_eq!(f.arg(Role::Size).unwrap().choices, [Where::Arg(2)]);
        // `argx` is a parameter name, not argN.
        let s = Spec::parse("x", "a alloc f size=argx").unwrap();
        assert_eq!(
            s.functions[0].arg(Role::Size).unwrap().choices,
            [Where::Param("argx".into())]
        );
    }
}
