//! The counts behind `kern-profile top`: samples added as they are read, each distinct
//! address stack named once (its leaf function and the distinct functions on it), counts
//! per vCPU, so that the table of any vCPU, by self or total, is a pass over the distinct
//! stacks.

use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::filter::NameRules;
use crate::input::Sample;
use crate::output::text::FunctionRow;
use crate::stacks::{KeyBuilder, StackNamer};

/// One distinct address stack.
struct Stack {
    /// Index of its leaf function (`None`: an empty stack).
    leaf: Option<u32>,
    /// Indices of the distinct functions on it.
    functions: Box<[u32]>,
    /// Samples per vCPU index.
    per_vcpu: Vec<u64>,
}

/// A distinct stack dropped by `--focus`/`--exclude`.
const DROPPED: usize = usize::MAX;

/// The live counts.
#[derive(Default)]
pub struct LiveProfile {
    index: FxHashMap<Box<[u64]>, usize>,
    stacks: Vec<Stack>,
    functions: Vec<Rc<str>>,
    function_index: FxHashMap<Rc<str>, u32>,
    /// Samples read.
    pub read: u64,
    /// Samples kept, per vCPU index.
    pub kept_per_vcpu: Vec<u64>,
    key: Vec<u64>,
    names: Vec<Rc<str>>,
}

impl LiveProfile {
    /// Counts one sample.
    pub fn add(
        &mut self,
        s: &Sample<'_>,
        keys: &KeyBuilder<'_>,
        namer: &mut StackNamer<'_>,
        rules: &NameRules,
    ) {
        self.read += 1;
        if !keys.build(s, namer.symbolizer(), &mut self.key) {
            return;
        }
        let i = match self.index.get(&self.key[..]) {
            Some(&i) => i,
            None => self.intern(namer, rules),
        };
        let Some(stack) = self.stacks.get_mut(i) else {
            return;
        };
        let v = s.vcpu as usize;
        if v >= 4096 {
            return;
        }
        if stack.per_vcpu.len() <= v {
            stack.per_vcpu.resize(v + 1, 0);
        }
        stack.per_vcpu[v] += 1;
        if self.kept_per_vcpu.len() <= v {
            self.kept_per_vcpu.resize(v + 1, 0);
        }
        self.kept_per_vcpu[v] += 1;
    }

    /// Names the current key and files it.
    fn intern(&mut self, namer: &mut StackNamer<'_>, rules: &NameRules) -> usize {
        let i = match namer.name_key_shaped(&self.key, rules, &mut self.names) {
            None => DROPPED,
            Some(_) => {
                let mut functions: Vec<u32> = Vec::with_capacity(self.names.len());
                for n in &self.names {
                    let f = match self.function_index.get(n) {
                        Some(&f) => f,
                        None => {
                            let f = self.functions.len() as u32;
                            self.functions.push(n.clone());
                            self.function_index.insert(n.clone(), f);
                            f
                        }
                    };
                    if !functions.contains(&f) {
                        functions.push(f);
                    }
                }
                let leaf = self.names.last().map(|n| self.function_index[n]);
                self.stacks.push(Stack {
                    leaf,
                    functions: functions.into(),
                    per_vcpu: Vec::new(),
                });
                self.stacks.len() - 1
            }
        };
        self.index.insert(self.key.as_slice().into(), i);
        i
    }

    /// Kept samples of `vcpu` (all vCPUs with `None`).
    pub fn kept(&self, vcpu: Option<u32>) -> u64 {
        match vcpu {
            None => self.kept_per_vcpu.iter().sum(),
            Some(v) => self.kept_per_vcpu.get(v as usize).copied().unwrap_or(0),
        }
    }

    /// The vCPUs with kept samples.
    pub fn vcpus(&self) -> Vec<u32> {
        (0u32..)
            .zip(&self.kept_per_vcpu)
            .filter(|(_, &n)| n > 0)
            .map(|(v, _)| v)
            .collect()
    }

    /// Self and total counts per function, of `vcpu` or all vCPUs, in no order.
    pub fn rows(&self, vcpu: Option<u32>) -> Vec<FunctionRow> {
        let mut self_c = vec![0u64; self.functions.len()];
        let mut total_c = vec![0u64; self.functions.len()];
        for s in &self.stacks {
            let n = match vcpu {
                None => s.per_vcpu.iter().sum(),
                Some(v) => s.per_vcpu.get(v as usize).copied().unwrap_or(0),
            };
            if n == 0 {
                continue;
            }
            if let Some(l) = s.leaf {
                self_c[l as usize] += n;
            }
            for &f in s.functions.iter() {
                total_c[f as usize] += n;
            }
        }
        self.functions
            .iter()
            .zip(self_c.iter().zip(&total_c))
            .filter(|(_, (_, &t))| t > 0)
            .map(|(name, (&self_count, &total_count))| FunctionRow {
                name: name.to_string(),
                self_count,
                total_count,
            })
            .collect()
    }
}
