//! Call edges from exact counts, for the callgrind profile: where a call instruction ends
//! right before the next executed instruction of the kernel's code, its count is the number of
//! calls made there, and its target (a direct call's) the callee. Indirect calls name no
//! callee and are left out.
//!
//! Inclusive costs are not counted by the plugin (it counts blocks, not calls and returns):
//! a callee's inclusive cost is divided among its call sites in proportion to their calls, as
//! gprof does: `incl(F) = self(F) + Σ calls(F→G) / entries(G) × incl(G)` over real functions
//! (code inlined into F is in its self cost), `entries(G)` the executions of G's first
//! instruction less G's calls of itself. This is exact where a function is called from one
//! place, or where each call costs the same; a cycle of calls through several functions counts
//! its callees' cost only once round the cycle.

use std::collections::BTreeMap;

use kern_profile_arch::guest;
use kern_profile_format::Arch;
use kern_profile_symbols::Symbolizer;

/// An executed address of the kernel, as the profile names it.
pub struct Site<K> {
    pub addr: u64,
    /// The function the profile puts it in (an inlined one's, with inline naming).
    pub key: K,
    /// The real function that holds it: inclusive costs are summed over real functions, so
    /// that code inlined into a function counts in its inclusive cost.
    pub real: K,
    pub line: u32,
    pub count: u64,
}

/// The calls from one line to one callee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub calls: u64,
    /// The callee's line at its entry.
    pub target_line: u32,
    /// The callee's inclusive cost given to these calls.
    pub inclusive: u64,
}

/// Caller → (calling line, callee) → the calls.
pub type Edges<K> = BTreeMap<K, BTreeMap<(u32, K), Edge>>;

/// The longest call instruction (x86's `call r/m` with SIB and displacement is 7 bytes;
/// riscv64's `auipc` + `jalr` pair ends in a 4-byte `jalr`).
const MAX_CALL: u64 = 8;

/// The call edges among `sites` (sorted by address, each instruction of the kernel that ran
/// once at least), named by their keys.
pub fn call_edges<K: Ord + Clone>(sym: &Symbolizer, arch: Arch, sites: &[Site<K>]) -> Edges<K> {
    let Some(elf) = sym.elf() else {
        return Edges::new();
    };
    let g = guest(arch);
    // (caller site, callee site) of every call instruction that ran.
    let mut calls: Vec<(usize, usize)> = Vec::new();
    for (i, w) in sites.windows(2).enumerate() {
        let (a, r) = (&w[0], &w[1]);
        if r.addr - a.addr > MAX_CALL {
            continue;
        }
        let before = [MAX_CALL, 4, 2].into_iter().find_map(|n| {
            let at = r.addr.checked_sub(n)?;
            elf.code_at(at, n as usize)
        });
        let Some(Some(target)) = before.and_then(|b| g.call_before(b, r.addr)) else {
            continue;
        };
        if let Ok(t) = sites.binary_search_by_key(&target, |s| s.addr) {
            calls.push((i, t));
        }
    }
    // The real functions' graph: self costs, entries (the runs of each call target, less
    // the function's calls of itself) and calls between different functions.
    let mut own: BTreeMap<K, u64> = BTreeMap::new();
    for s in sites {
        let o = own.entry(s.real.clone()).or_insert(0);
        *o = o.saturating_add(s.count);
    }
    let mut entries: BTreeMap<K, u64> = BTreeMap::new();
    let mut targets: Vec<usize> = calls.iter().map(|c| c.1).collect();
    targets.sort_unstable();
    targets.dedup();
    for t in targets {
        let e = entries.entry(sites[t].real.clone()).or_insert(0);
        *e = e.saturating_add(sites[t].count);
    }
    let mut graph: Edges<K> = Edges::new();
    for &(c, t) in &calls {
        let (caller, callee) = (&sites[c], &sites[t]);
        if caller.real == callee.real {
            if let Some(e) = entries.get_mut(&callee.real) {
                *e = e.saturating_sub(caller.count);
            }
            continue;
        }
        add_calls(&mut graph, &caller.real, 0, &callee.real, caller.count);
    }
    let inclusive = inclusive_costs(&graph, &entries, &|k: &K| own.get(k).copied().unwrap_or(0));
    // The edges as the profile names them, each given its share of the callee's cost.
    let mut edges: Edges<K> = Edges::new();
    for &(c, t) in &calls {
        let (caller, callee) = (&sites[c], &sites[t]);
        let e = add_calls(
            &mut edges,
            &caller.key,
            caller.line,
            &callee.key,
            caller.count,
        );
        e.target_line = callee.line;
        if caller.real != callee.real {
            let incl = inclusive.get(&callee.real).copied().unwrap_or(0) as f64;
            let share = share(
                caller.count,
                entries.get(&callee.real).copied().unwrap_or(0),
            );
            e.inclusive = e.inclusive.saturating_add((incl * share).round() as u64);
        }
    }
    edges
}

/// Adds `calls` to the edge `from` (at `line`) → `to`; returns the edge.
fn add_calls<'e, K: Ord + Clone>(
    edges: &'e mut Edges<K>,
    from: &K,
    line: u32,
    to: &K,
    calls: u64,
) -> &'e mut Edge {
    let e = edges
        .entry(from.clone())
        .or_default()
        .entry((line, to.clone()))
        .or_insert(Edge {
            calls: 0,
            target_line: 0,
            inclusive: 0,
        });
    e.calls = e.calls.saturating_add(calls);
    e
}

/// The part of a callee's cost `calls` of its `entries` take (at most all of it).
fn share(calls: u64, entries: u64) -> f64 {
    if entries == 0 {
        return 0.0;
    }
    (calls as f64 / entries as f64).min(1.0)
}

/// Each function's inclusive cost, callees first, without recursion on the host stack (a
/// kernel's call graph can be deep); an edge back into a function being summed adds nothing.
fn inclusive_costs<K: Ord + Clone>(
    edges: &Edges<K>,
    entries: &BTreeMap<K, u64>,
    self_cost: &impl Fn(&K) -> u64,
) -> BTreeMap<K, u64> {
    let mut done: BTreeMap<K, u64> = BTreeMap::new();
    let mut on_path: BTreeMap<K, ()> = BTreeMap::new();
    for root in edges.keys() {
        if done.contains_key(root) {
            continue;
        }
        // (function, whether its callees were pushed)
        let mut stack = vec![(root.clone(), false)];
        while let Some((k, expanded)) = stack.pop() {
            if done.contains_key(&k) {
                continue;
            }
            let callees = edges.get(&k);
            if !expanded {
                on_path.insert(k.clone(), ());
                stack.push((k.clone(), true));
                for (_, callee) in callees.into_iter().flat_map(|c| c.keys()) {
                    if !done.contains_key(callee) && !on_path.contains_key(callee) {
                        stack.push((callee.clone(), false));
                    }
                }
                continue;
            }
            let mut total = self_cost(&k) as f64;
            for ((_, callee), e) in callees.into_iter().flatten() {
                if *callee == k {
                    continue;
                }
                let Some(&incl) = done.get(callee) else {
                    continue; // a cycle back into the path
                };
                total += incl as f64 * share(e.calls, entries.get(callee).copied().unwrap_or(0));
            }
            on_path.remove(&k);
            done.insert(k, total.round() as u64);
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(list: &[(&'static str, &'static str, u64)]) -> Edges<&'static str> {
        let mut e = Edges::new();
        for &(from, to, calls) in list {
            e.entry(from).or_default().insert(
                (1, to),
                Edge {
                    calls,
                    target_line: 0,
                    inclusive: 0,
                },
            );
        }
        e
    }

    #[test]
    fn callees_are_shared_by_calls_and_cycles_end() {
        // main calls a 3 times and b once; b calls a once; a (10 each) is entered 4 times.
        let e = edges(&[("main", "a", 3), ("main", "b", 1), ("b", "a", 1)]);
        let entries = BTreeMap::from([("a", 4), ("b", 1)]);
        let own = |k: &&str| match *k {
            "main" => 1,
            "a" => 40,
            "b" => 5,
            _ => 0,
        };
        let incl = inclusive_costs(&e, &entries, &own);
        assert_eq!(incl["b"], 5 + 10);
        assert_eq!(incl["main"], 1 + 30 + 15);
        // A cycle: x and y call each other; each counts the other's cost once.
        let e = edges(&[("x", "y", 1), ("y", "x", 1)]);
        let entries = BTreeMap::from([("x", 1), ("y", 1)]);
        let incl = inclusive_costs(&e, &entries, &|_: &&str| 7);
        assert_eq!(incl["x"] + incl["y"], 7 + 14);
    }
}
