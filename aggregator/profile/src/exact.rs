//! The exact flat profile of `exact=on` recordings: every executed instruction counted, each
//! instruction address attributed to its innermost (inlined) function, or to the real
//! function with `--no-inline`.
//!
//! As folded stacks, an address gives a one-level stack (its function) or, with inline
//! expansion, the function with its inline chain (`outer;inlined_[i]`), so a flamegraph
//! shows inlined code inside the function it was inlined into and self counts go to the
//! innermost function. With user programs (`--user`), an address the kernel does not name
//! but a user binary's segments hold is that program's: `[user] NAME;function`.

use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::filter::NameRules;
use crate::folded::{Folded, FoldedBuilder};
use crate::stacks::{StackNamer, UNKNOWN_FRAME};

/// Names the exact counts (instruction address → executions).
pub fn exact_folded(
    exact: &FxHashMap<u64, u64>,
    namer: &mut StackNamer<'_>,
    addresses: bool,
    rules: &NameRules,
) -> Folded {
    let mut b = FoldedBuilder::default();
    let unknown: Rc<str> = Rc::from(UNKNOWN_FRAME);
    let mut frames: Vec<Rc<str>> = Vec::new();
    for (&addr, &n) in exact {
        frames.clear();
        let names = namer.probe_names(addr);
        let user = if names.is_empty() {
            namer.user_names(addr)
        } else {
            None
        };
        if !names.is_empty() {
            frames.extend(names.iter().cloned());
        } else if let Some((root, names)) = user {
            frames.push(root);
            if !names.is_empty() {
                frames.extend(names.iter().cloned());
            } else if addresses {
                frames.push(Rc::from(format!("{addr:#x}")));
            } else {
                frames.push(unknown.clone());
            }
        } else if addresses {
            frames.push(Rc::from(format!("{addr:#x}")));
        } else {
            frames.push(unknown.clone());
        }
        if rules.shape(&mut frames, 0).is_some() {
            b.add(&frames, n);
        }
    }
    b.finish()
}
