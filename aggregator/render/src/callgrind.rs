//! A callgrind profile (valgrind's format, <https://valgrind.org/docs/manual/cl-format.html>:
//! what `callgrind_annotate` and KCachegrind read) of the exact counts of an `exact=on`
//! recording: the event `Ir`, instructions executed, as self cost per function and source line.
//!
//! Names are those of the exact output ([`crate::exact`]): each executed address goes to its
//! innermost (inlined, `_[i]`) function, or the real one with `--no-inline`, under `fn=`; a
//! user program's address to its function with `ob=` the program (the exact output's
//! `[user] NAME` root); `--focus`/`--exclude` keep what they keep there. The line is the DWARF
//! line of that frame, as `--lines` names it (`fl=` its file, shortened the same way); an
//! address without one is line 0 of file `???`, callgrind's "unknown".
//!
//! Call edges (`cfn=`, `calls=`) of the kernel's direct calls, counted exactly: the runs of
//! each call instruction ([`crate::call_graph`]). Their inclusive costs are the callee's,
//! divided among its call sites in proportion to their calls (as gprof does), since the
//! plugin counts blocks, not calls and returns. Indirect calls, and user programs' calls,
//! have no edge.

use std::collections::BTreeMap;
use std::io::Write;
use std::rc::Rc;

use crate::call_graph::{call_edges, Edges, Site};
use crate::exact::exact_counts;
use crate::{file_name, write_err, Collected, CpuRenderer, Drawn, Needs};
use kern_profile_profile::collect::Run;
use kern_profile_profile::stacks::{short_path, NameStyle, StackNamer, UNKNOWN_FRAME};
use kern_profile_symbols::Frame;

/// The exact counts as a callgrind profile.
pub struct CallgrindRenderer;

/// A function's identity in the profile: object (image), source file, name.
type FnKey = (Rc<str>, Rc<str>, Rc<str>);

/// Self instructions by function, then by line.
type Costs = BTreeMap<FnKey, BTreeMap<u32, u64>>;

impl CpuRenderer for CallgrindRenderer {
    fn needs(&self) -> Needs {
        Needs::EXACT
    }

    /// Writes the exact counts as a callgrind profile.
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let profile = &collected.profile;
        let exact = exact_counts(run, profile)?;
        let (costs, sites) = costs(run, exact);
        let edges = match run.sym.elf().and_then(|e| e.arch) {
            Some(arch) => call_edges(run.sym, arch, &sites),
            None => Edges::new(),
        };
        let total: u64 = costs.values().flat_map(|l| l.values()).sum();
        let header = Header {
            cmd: format!("{} ({}, exact=on)", run.kernel, file_name(&profile.path)),
            total,
        };
        let mut out = std::io::BufWriter::new(out);
        write_callgrind(&header, &costs, &edges, &mut out)
            .and_then(|()| out.flush())
            .map_err(write_err)?;
        let lines: usize = costs.values().map(BTreeMap::len).sum();
        let calls: usize = edges.values().map(BTreeMap::len).sum();
        Ok(format!(
            "{total} instructions executed, in a callgrind profile of {} functions at {lines} \
             source lines, {calls} call edges",
            costs.len()
        ))
    }
}

/// Names each executed address as the exact output does and adds its count to its leaf
/// function's line; the kernel's addresses as call-graph sites too, sorted.
fn costs(run: &mut Run<'_>, exact: &rustc_hash::FxHashMap<u64, u64>) -> (Costs, Vec<Site<FnKey>>) {
    let style = NameStyle {
        lines: false,
        inline_suffix: true,
        ..run.style
    };
    let rules = run.filter.names.clone();
    let kernel: Rc<str> = Rc::from(run.kernel.as_str());
    let unknown_file: Rc<str> = Rc::from("???");
    let mut namer = StackNamer::new(run.sym, style);
    let mut costs = Costs::new();
    let mut sites = Vec::new();
    let mut frames: Vec<Rc<str>> = Vec::new();
    for (&addr, &n) in exact {
        frames.clear();
        let unknown = || -> Rc<str> {
            if style.addresses {
                Rc::from(format!("{addr:#x}"))
            } else {
                Rc::from(UNKNOWN_FRAME)
            }
        };
        let names = namer.probe_names(addr);
        // The real function (the outermost frame), for inclusive costs.
        let real = names.first().cloned();
        // The image and the DWARF frames of the address.
        let (object, debug, in_kernel) = if !names.is_empty() {
            frames.extend(names.iter().cloned());
            (kernel.clone(), namer.symbolizer().frames(addr), true)
        } else if let Some((root, names)) = namer.user_names(addr) {
            frames.push(root);
            if names.is_empty() {
                frames.push(unknown());
            } else {
                frames.extend(names.iter().cloned());
            }
            let sym = namer.symbolizer();
            let b = sym.user_binary_of(addr).expect("user_names found it");
            let object = sym.user_binary_name(b);
            (object, sym.user_symbolizer(b).frames(addr), false)
        } else {
            frames.push(unknown());
            (kernel.clone(), Rc::from([]), false)
        };
        if rules.shape(&mut frames, 0).is_none() {
            continue;
        }
        let Some(function) = frames.last().cloned() else {
            continue;
        };
        let (file, line) = match leaf_source(&debug, style.inline) {
            Some((f, l)) => (Rc::from(short_path(f)), l),
            None => (unknown_file.clone(), 0),
        };
        let key = (object, file, function);
        if let (true, Some(real)) = (in_kernel, real) {
            sites.push(Site {
                addr,
                real: (key.0.clone(), unknown_file.clone(), real),
                key: key.clone(),
                line,
                count: n,
            });
        }
        let c = costs.entry(key).or_default().entry(line).or_insert(0);
        *c = c.saturating_add(n);
    }
    sites.sort_unstable_by_key(|s| s.addr);
    (costs, sites)
}

/// The source file and line of the innermost frame named (the innermost inlined one, or the
/// real function's with `--no-inline`: its line there is that of the inlined call).
fn leaf_source(frames: &[Frame], inline: bool) -> Option<(&str, u32)> {
    let f = frames.iter().find(|f| inline || !f.inlined)?;
    Some((f.file.as_deref()?, f.line.unwrap_or(0)))
}

/// What the header says.
struct Header {
    cmd: String,
    total: u64,
}

/// Writes the profile: header, one block per function (sorted: the same input gives the
/// same bytes), `totals:`.
fn write_callgrind(
    h: &Header,
    costs: &Costs,
    edges: &Edges<FnKey>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "# callgrind format")?;
    writeln!(out, "version: 1")?;
    writeln!(out, "creator: kern-profile {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "cmd: {}", h.cmd)?;
    writeln!(
        out,
        "desc: Ir: guest instructions executed, counted exactly per translated block (exact=on); \
         calls of direct call instructions counted exactly, their inclusive cost the callee's \
         divided by calls (as gprof does)"
    )?;
    writeln!(out, "positions: line")?;
    writeln!(out, "events: Ir")?;
    writeln!(out, "summary: {}", h.total)?;
    let (mut ob, mut fl): (Option<&str>, Option<&str>) = (None, None);
    for ((object, file, function), lines) in costs {
        writeln!(out)?;
        if ob != Some(&**object) {
            writeln!(out, "ob={object}")?;
            ob = Some(object);
            fl = None;
        }
        if fl != Some(&**file) {
            writeln!(out, "fl={file}")?;
            fl = Some(file);
        }
        writeln!(out, "fn={function}")?;
        for (line, n) in lines {
            writeln!(out, "{line} {n}")?;
        }
        let key = (object.clone(), file.clone(), function.clone());
        for ((line, (cob, cfi, cfn)), e) in edges.get(&key).into_iter().flatten() {
            // Named even where they are the caller's: callgrind_annotate keys a callee by
            // them.
            writeln!(out, "cob={cob}")?;
            writeln!(out, "cfi={cfi}")?;
            writeln!(out, "cfn={cfn}")?;
            writeln!(out, "calls={} {}", e.calls, e.target_line)?;
            writeln!(out, "{line} {}", e.inclusive)?;
        }
    }
    writeln!(out)?;
    writeln!(out, "totals: {}", h.total)
}
