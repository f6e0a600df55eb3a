//! The counts behind `kern-profile top`, in the profile crate's model: each kept sample's
//! address stack counted in its vCPU's [`StackCounts`] as it is read; at each refresh the
//! distinct stacks named into [`Folded`] stacks and the rows drawn by [`function_rows`], as
//! the text report draws them, so that the live table and the report cannot disagree.

use crate::counts::StackCounts;
use crate::filter::NameRules;
use crate::folded::Folded;
use crate::input::Sample;
use crate::output::text::{function_rows, FunctionRow};
use crate::stacks::{KeyBuilder, StackNamer};
use crate::symbolize::Symbolizer;

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

    /// What was counted so far, named: each vCPU's stacks, and all of them.
    pub fn table(&mut self, namer: &mut StackNamer<'_>, rules: &NameRules) -> LiveTable {
        let mut per_vcpu = Vec::new();
        for (v, counts) in (0u32..).zip(&mut self.per_vcpu) {
            if counts.total() > 0 {
                // Merged each refresh: pending keys stay about a refresh's worth.
                counts.flush();
                per_vcpu.push((v, Folded::from_counts(counts, namer, rules)));
            }
        }
        LiveTable {
            read: self.read,
            all: Folded::merge(per_vcpu.iter().map(|(_, f)| f)),
            per_vcpu,
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
        let table = live.table(&mut namer, &filter.names);
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
