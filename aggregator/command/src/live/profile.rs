//! The counts behind `kern-profile top`, in the profile crate's model: each kept sample's
//! address stack counted in its vCPU's [`StackCounts`] as it is read; at each refresh the
//! distinct stacks named into [`Folded`] stacks and the rows drawn by [`function_rows`], as
//! the text report draws them, so that the live table and the report cannot disagree. The
//! rows by task or process (`--by`) are counted from the same keys, which carry each
//! sample's task ([`crate::filter::SampleFilter::task_keys`]), as `-f text --by` counts them
//! ([`rows_of`]).

use rustc_hash::FxHashMap;

use crate::counts::StackCounts;
use crate::filter::NameRules;
use crate::folded::{Folded, FoldedBuilder};
use crate::input::Sample;
use crate::output::by_task::{rows_of, TaskRow};
use crate::output::text::{function_rows, FunctionRow};
use crate::stacks::{key_task, KeyBuilder, StackNamer};
use crate::symbolize::Symbolizer;
use crate::tasks::{TaskId, Tasks};
use crate::ReportBy;

/// vCPUs from this one on are read but not counted.
const MAX_VCPUS: usize = 4096;

/// The live counts.
#[derive(Default)]
pub struct LiveProfile {
    /// Kept address stacks per vCPU index (keys carry no vCPU unless `--per-cpu`).
    per_vcpu: Vec<StackCounts>,
    /// Samples read.
    pub read: u64,
    key: Vec<u64>,
}

impl LiveProfile {
    /// Counts one sample.
    pub fn add(&mut self, s: &Sample<'_>, keys: &KeyBuilder<'_>, sym: &mut Symbolizer) {
        self.read += 1;
        let v = s.vcpu as usize;
        if v >= MAX_VCPUS || !keys.build(s, sym, &mut self.key) {
            return;
        }
        if self.per_vcpu.len() <= v {
            self.per_vcpu.resize_with(v + 1, StackCounts::default);
        }
        self.per_vcpu[v].add(&self.key, 1);
    }

    /// What was counted so far, named: each vCPU's stacks, and all of them; with `by` a
    /// task or process, also their rows of the recording's `tasks` so far.
    pub fn table(
        &mut self,
        namer: &mut StackNamer<'_>,
        rules: &NameRules,
        tasks: &Tasks,
        by: ReportBy,
    ) -> LiveTable {
        let mut per_vcpu = Vec::new();
        let mut task_rows = Vec::new();
        let mut all_tasks: FxHashMap<Option<TaskId>, u64> = FxHashMap::default();
        let mut frames = Vec::new();
        for (v, counts) in (0u32..).zip(&mut self.per_vcpu) {
            if counts.total() == 0 {
                continue;
            }
            // Merged each refresh: pending keys stay about a refresh's worth.
            counts.flush();
            let mut b = FoldedBuilder::default();
            let mut per_task: FxHashMap<Option<TaskId>, u64> = FxHashMap::default();
            counts.for_each(|key, n| {
                if namer.name_key_shaped(key, rules, &mut frames).is_some() {
                    b.add(&frames, n);
                    if by != ReportBy::Function {
                        let c = per_task.entry(key_task(key)).or_insert(0);
                        *c = c.saturating_add(n);
                    }
                }
            });
            per_vcpu.push((v, b.finish()));
            if by != ReportBy::Function {
                for (&t, &n) in &per_task {
                    let c = all_tasks.entry(t).or_insert(0);
                    *c = c.saturating_add(n);
                }
                task_rows.push((v, rows_of(per_task, tasks, by)));
            }
        }
        LiveTable {
            read: self.read,
            all: Folded::merge(per_vcpu.iter().map(|(_, f)| f)),
            per_vcpu,
            all_task_rows: rows_of(all_tasks, tasks, by),
            task_rows,
            has_tasks: tasks.any(),
        }
    }
}

/// The named stacks of one refresh.
#[derive(Debug, Default)]
pub struct LiveTable {
    /// Samples read.
    pub read: u64,
    /// Per vCPU with kept samples, sorted by vCPU.
    pub per_vcpu: Vec<(u32, Folded)>,
    pub all: Folded,
    /// With `--by task|process`: the rows per vCPU (as `per_vcpu`), and of all vCPUs.
    pub task_rows: Vec<(u32, Vec<TaskRow>)>,
    pub all_task_rows: Vec<TaskRow>,
    /// Whether the recording had a task record so far.
    pub has_tasks: bool,
}

impl LiveTable {
    /// The stacks of `vcpu` (all vCPUs with `None`).
    fn folded(&self, vcpu: Option<u32>) -> Option<&Folded> {
        match vcpu {
            None => Some(&self.all),
            Some(v) => self.per_vcpu.iter().find(|(w, _)| *w == v).map(|(_, f)| f),
        }
    }

    /// Kept samples of `vcpu` (all vCPUs with `None`).
    pub fn kept(&self, vcpu: Option<u32>) -> u64 {
        self.folded(vcpu).map_or(0, |f| f.total)
    }

    /// The vCPUs with kept samples.
    pub fn vcpus(&self) -> Vec<u32> {
        self.per_vcpu
            .iter()
            .filter(|(_, f)| f.total > 0)
            .map(|(v, _)| *v)
            .collect()
    }

    /// Self and total counts per function, of `vcpu` or all vCPUs, sorted by name.
    pub fn rows(&self, vcpu: Option<u32>) -> Vec<FunctionRow> {
        self.folded(vcpu).map(function_rows).unwrap_or_default()
    }

    /// The rows by task or process of `vcpu` or all vCPUs, most first.
    pub fn task_rows(&self, vcpu: Option<u32>) -> &[TaskRow] {
        match vcpu {
            None => &self.all_task_rows,
            Some(v) => self
                .task_rows
                .iter()
                .find(|(w, _)| *w == v)
                .map_or(&[], |(_, r)| r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::SampleFilter;
    use crate::options::Options;
    use crate::stacks::NameStyle;
    use crate::symbolize::{symbol_map, SymbolTable};
    use std::path::Path;

    /// The rows of every view are the report's: `function_rows` of the named stacks.
    #[test]
    fn tables_per_vcpu_and_of_all() {
        let text = "1000 T root\n1100 T middle\n1200 T leaf\n1300 T other\n1400 T end\n";
        let map = SymbolTable::new(symbol_map::parse(text, Path::new("m")).unwrap(), |_| None);
        let mut sym = Symbolizer::new(None, vec![map]).unwrap();
        let opts = Options {
            exclude: vec!["other".into()],
            ..Options::default()
        };
        let filter = SampleFilter::from_options(&opts);
        let keys = KeyBuilder::new(&filter);
        let mut live = LiveProfile::default();
        let stacks: [(u32, &[u64]); 5] = [
            (0, &[0x1204, 0x1150, 0x1050]),
            (0, &[0x1204, 0x1150, 0x1050]),
            (2, &[0x1104, 0x1050]),
            (2, &[0x1304, 0x1050]),
            (5000, &[0x1204, 0x1150, 0x1050]),
        ];
        for (vcpu, addrs) in stacks {
            live.add(&Sample::of_addresses(vcpu, addrs), &keys, &mut sym);
        }
        let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(&opts, false));
        let table = live.table(
            &mut namer,
            &filter.names,
            &Tasks::default(),
            ReportBy::Function,
        );
        assert_eq!(table.read, 5);
        assert_eq!(table.vcpus(), [0, 2]);
        assert_eq!((table.kept(None), table.kept(Some(2))), (3, 1));
        assert_eq!(table.kept(Some(1)), 0);
        assert!(table.rows(Some(1)).is_empty());
        let row = |v, name: &str| {
            let r = table.rows(v).into_iter().find(|r| r.name == name).unwrap();
            (r.self_count, r.total_count)
        };
        assert_eq!(row(None, "root"), (0, 3));
        assert_eq!(row(None, "leaf"), (2, 2));
        assert_eq!(row(Some(2), "middle"), (1, 1));
        assert_eq!(table.rows(None), function_rows(&table.all));
        assert!(table.rows(None).iter().all(|r| r.name != "other"));
    }
}
