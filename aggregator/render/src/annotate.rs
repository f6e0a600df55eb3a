//! `kern-profile annotate RAW ELF FUNCTION`: one function's source lines and instructions with
//! their self samples (the samples whose PC was there), or exact instruction counts, as shares
//! of the whole run, like `perf annotate`. Lines come from DWARF (the innermost inlined
//! function's line at each instruction); instructions are decoded by [`crate::disassemble`]
//! (iced-x86 on i386 and x86_64, yaxpeax-arm on aarch64, raki on riscv64).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::rc::Rc;

use kern_profile_profile::collect::Run;
use kern_profile_profile::input::Sample;
use kern_profile_profile::percent::pct;
use kern_profile_profile::profile::SampleSink;
use kern_profile_profile::ProfileError;
use kern_profile_symbols::table::Symbol;
use rustc_hash::FxHashMap;

use crate::exact::{exact_counts, no_time_range};
use crate::file_name;

/// One decoded instruction with its count.
#[derive(Debug, Clone, PartialEq)]
pub struct Instruction {
    pub addr: u64,
    pub bytes: Vec<u8>,
    pub text: String,
    pub count: u64,
    /// The DWARF source line (innermost inlined function's), when known.
    pub line: Option<(Rc<str>, u32)>,
}

/// A function annotated with its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub function: String,
    pub start: u64,
    pub end: u64,
    pub instructions: Vec<Instruction>,
    /// The denominator of every share: the run's kept samples, or all executed instructions.
    pub total: u64,
    pub exact: bool,
    /// Samples whose PC fell inside an instruction rather than at its start (counted with the
    /// instruction): the recording was not made with this ELF when there are many.
    pub misaligned: u64,
    /// What the instructions are: `None` when decoded, else why raw words are shown.
    pub raw_note: Option<&'static str>,
    pub kernel: String,
    pub input: String,
}

impl Annotation {
    /// The function's own count (all its instructions).
    pub fn count(&self) -> u64 {
        self.instructions.iter().map(|i| i.count).sum()
    }

    /// Counts per source line, by file then line (`None`: no line information).
    pub fn lines(&self) -> BTreeMap<Option<(Rc<str>, u32)>, u64> {
        let mut m = BTreeMap::new();
        for i in &self.instructions {
            *m.entry(i.line.clone()).or_insert(0) += i.count;
        }
        m
    }

    pub fn write(&self, mut out: impl Write) -> io::Result<()> {
        let unit = if self.exact {
            "instructions executed"
        } else {
            "self samples"
        };
        writeln!(
            out,
            "# {} ({:#x}..{:#x}, {} bytes) of {}, from {}",
            self.function,
            self.start,
            self.end,
            self.end - self.start,
            self.kernel,
            self.input
        )?;
        writeln!(
            out,
            "# {} {unit} of {} ({:.2}%); shares below are of all {}",
            self.count(),
            self.total,
            pct(self.count(), self.total),
            self.total
        )?;
        if let Some(note) = self.raw_note {
            writeln!(out, "# {note}")?;
        }
        if self.misaligned > 0 {
            writeln!(
                out,
                "# {} samples fell inside an instruction, not at its start: was the recording \
                 made with this ELF? (A few are normal where the kernel patches its code at \
                 boot, as Linux's alternatives and paravirt calls do.)",
                self.misaligned
            )?;
        }
        let w = self.total.to_string().len().max(5);
        writeln!(out)?;
        writeln!(out, "Source lines:")?;
        writeln!(out, "  {:>7}  {:>w$}  Line", "Share", "Count")?;
        let mut sources: FxHashMap<Rc<str>, Option<Vec<String>>> = FxHashMap::default();
        for (line, n) in self.lines() {
            let (place, text) = match &line {
                Some((file, l)) => (
                    format!("{file}:{l}"),
                    source_line(&mut sources, file, *l).unwrap_or_default(),
                ),
                None => ("(no line information)".into(), String::new()),
            };
            let sep = if text.is_empty() { "" } else { "  | " };
            writeln!(
                out,
                "  {:>6.2}%  {n:>w$}  {place}{sep}{}",
                pct(n, self.total),
                text.trim_end()
            )?;
        }
        writeln!(out)?;
        writeln!(out, "Disassembly:")?;
        writeln!(
            out,
            "  {:>7}  {:>w$}  {:<18}  {:<24}  Instruction",
            "Share", "Count", "Address", "Bytes"
        )?;
        let mut last_line = None;
        for i in &self.instructions {
            if i.line != last_line {
                if let Some((file, l)) = &i.line {
                    writeln!(out, "  {:>7}  {:>w$}  {file}:{l}", "", "")?;
                }
                last_line = i.line.clone();
            }
            let bytes: Vec<String> = i.bytes.iter().map(|b| format!("{b:02x}")).collect();
            let share = if i.count > 0 {
                format!("{:.2}%", pct(i.count, self.total))
            } else {
                String::new()
            };
            let count = if i.count > 0 {
                i.count.to_string()
            } else {
                String::new()
            };
            writeln!(
                out,
                "  {share:>7}  {count:>w$}  {:<18}  {:<24}  {}",
                format!("{:#x}", i.addr),
                bytes.join(" "),
                i.text
            )?;
        }
        Ok(())
    }
}

/// Line `l` (1-based) of `file`, read once per file; `None` when unreadable.
fn source_line(
    cache: &mut FxHashMap<Rc<str>, Option<Vec<String>>>,
    file: &Rc<str>,
    l: u32,
) -> Option<String> {
    let lines = cache.entry(file.clone()).or_insert_with(|| {
        std::fs::read_to_string(&**file)
            .ok()
            .map(|t| t.lines().map(str::to_string).collect())
    });
    lines.as_ref()?.get((l as usize).checked_sub(1)?).cloned()
}

/// Counts the kernel samples whose PC lies in `[start, end)`.
struct LeafCounter {
    start: u64,
    end: u64,
    counts: FxHashMap<u64, u64>,
}

impl SampleSink for LeafCounter {
    fn sample(&mut self, s: &Sample<'_>, _key: &[u64], _seq: u64) {
        match s.addrs.first() {
            Some(&pc) if !s.user && (self.start..self.end).contains(&pc) => {
                *self.counts.entry(pc).or_insert(0) += 1
            }
            _ => {}
        }
    }
}

/// Annotates `function` (a full name, or its tail after `::`) of the run's kernel ELF.
pub fn annotate(
    run: &mut Run<'_>,
    function: &str,
    exact: bool,
) -> Result<Annotation, ProfileError> {
    let elf = run.sym.elf().ok_or_else(|| {
        ProfileError::Unsupported("annotate needs the kernel ELF (its code and DWARF)".into())
    })?;
    // The ELF's own symbols, or a Linux image's kallsyms (a vmlinux extracted from a vmlinuz
    // has no symbol table).
    let symbols: Vec<&Symbol> = run.sym.kernel_symbols().collect();
    let sym = find_function(&symbols, function)?.clone();
    let arch = elf.arch;
    let code = elf
        .code_at(sym.start, (sym.end - sym.start) as usize)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| {
            ProfileError::Unsupported(format!(
                "{}: {} is not in an executable section of the ELF",
                elf.path.display(),
                sym.name
            ))
        })?;
    let (counts, total) = if exact {
        // Refused before the recording is read.
        no_time_range(run)?;
        let profile = run.collect(run.input, true)?;
        let exact = exact_counts(run, &profile)?;
        let counts: FxHashMap<u64, u64> = exact
            .iter()
            .filter(|(a, _)| (sym.start..sym.end).contains(*a))
            .map(|(a, n)| (*a, *n))
            .collect();
        let total = exact.values().sum();
        (counts, total)
    } else {
        let mut counter = LeafCounter {
            start: sym.start,
            end: sym.end,
            counts: FxHashMap::default(),
        };
        let input = run.open(run.input)?;
        let profile = run.collect_from(input, false, &mut [&mut counter])?;
        (counter.counts, profile.kept)
    };
    let (decoded, raw_note) = crate::disassemble::decode(arch, sym.start, &code);
    let mut instructions: Vec<Instruction> = decoded
        .into_iter()
        .map(|(addr, len, text)| {
            let off = (addr - sym.start) as usize;
            let frames = run.sym.frames(addr);
            let line = frames
                .first()
                .and_then(|f| Some((f.file.clone()?, f.line?)));
            Instruction {
                addr,
                bytes: code[off..off + len].to_vec(),
                text,
                count: 0,
                line,
            }
        })
        .collect();
    let mut misaligned = 0;
    for (&pc, &n) in &counts {
        let i = instructions.partition_point(|i| i.addr <= pc);
        let Some(ins) = i.checked_sub(1).and_then(|i| instructions.get_mut(i)) else {
            continue;
        };
        if ins.addr != pc {
            misaligned += n;
        }
        ins.count += n;
    }
    Ok(Annotation {
        function: sym.name.to_string(),
        start: sym.start,
        end: sym.end,
        instructions,
        total,
        exact,
        misaligned,
        raw_note,
        kernel: run.kernel.clone(),
        input: file_name(run.input),
    })
}

/// The symbol named `name` (full, or its tail after `::`; the first of several with the same
/// full name, as kallsyms lists static functions of different files); an error suggesting
/// close names.
pub fn find_function<'a>(symbols: &[&'a Symbol], name: &str) -> Result<&'a Symbol, ProfileError> {
    let tail = |s: &str| s.rsplit("::").next().unwrap_or(s).to_string();
    if let Some(s) = symbols.iter().find(|s| &*s.name == name) {
        return Ok(s);
    }
    let by_tail: Vec<&Symbol> = symbols
        .iter()
        .copied()
        .filter(|s| tail(&s.name) == name)
        .collect();
    match by_tail.as_slice() {
        [one] => return Ok(one),
        [] => {}
        many => {
            let names: Vec<&str> = many.iter().map(|s| &*s.name).collect();
            return Err(ProfileError::Unsupported(format!(
                "`{name}` names several functions; give the full name: {}",
                names.join(", ")
            )));
        }
    }
    let mut close: Vec<(usize, &str)> = symbols
        .iter()
        .map(|s| {
            let d = edit_distance(name, &s.name).min(edit_distance(name, &tail(&s.name)));
            (d, &*s.name)
        })
        .filter(|(d, _)| *d <= (name.chars().count() / 3).max(2))
        .collect();
    close.sort();
    close.dedup_by(|a, b| a.1 == b.1);
    let hint = if close.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = close.iter().take(5).map(|c| c.1).collect();
        format!("; did you mean {}?", names.join(", "))
    };
    Err(ProfileError::Unsupported(format!(
        "no function `{name}` in the kernel's symbols{hint}"
    )))
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, start: u64) -> Symbol {
        Symbol {
            start,
            end: start + 16,
            name: name.into(),
        }
    }

    #[test]
    fn names_full_or_by_tail_else_suggestions() {
        let owned = [
            sym("kernel::workload::hot_leaf", 0x10),
            sym("kernel::workload::cold_leaf", 0x20),
            sym("a::new", 0x30),
            sym("b::new", 0x40),
            // kallsyms: two static functions of one name; the first is taken.
            sym("show_state", 0x50),
            sym("show_state", 0x60),
        ];
        let syms: Vec<&Symbol> = owned.iter().collect();
        assert_eq!(find_function(&syms, "show_state").unwrap().start, 0x50);
        assert_eq!(find_function(&syms, "hot_leaf").unwrap().start, 0x10);
        assert_eq!(
            find_function(&syms, "kernel::workload::cold_leaf")
                .unwrap()
                .start,
            0x20
        );
        let e = find_function(&syms, "new").unwrap_err().to_string();
        assert!(e.contains("a::new, b::new"), "{e}");
        let e = find_function(&syms, "hot_lef").unwrap_err().to_string();
        assert!(
            e.contains("did you mean kernel::workload::hot_leaf?"),
            "{e}"
        );
        let e = find_function(&syms, "zzzzzzzzzz").unwrap_err().to_string();
        assert!(!e.contains("did you mean"), "{e}");
    }
}
