//! vCPU lists as users type them: `0`, `0,2-3`, `1-1`.

use std::fmt;
use std::str::FromStr;

/// What is wrong with a `--cpu` list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("empty vCPU list (expected e.g. `0`, `0,2-3`)")]
    Empty,
    #[error("`{0}` is not a vCPU number or range (expected e.g. `0`, `0,2-3`)")]
    BadItem(String),
    #[error("range `{0}` goes backwards")]
    Backwards(String),
    #[error("range `{0}` is too large (at most {max} vCPUs)", max = CpuList::MAX_CPUS)]
    TooLarge(String),
}

/// A set of vCPU indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList {
    /// Sorted, without duplicates.
    cpus: Vec<u32>,
}

impl CpuList {
    /// No vCPU index above this is accepted (QEMU's own limit is far lower).
    pub const MAX_CPUS: u32 = 1 << 16;

    /// Parses `0,2-3` style lists. Whitespace around items is ignored.
    pub fn parse(s: &str) -> Result<Self, CpuListError> {
        let mut cpus = Vec::new();
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                if s.trim().is_empty() {
                    return Err(CpuListError::Empty);
                }
                return Err(CpuListError::BadItem(s.to_string()));
            }
            let num = |t: &str| {
                t.trim()
                    .parse::<u32>()
                    .map_err(|_| CpuListError::BadItem(item.to_string()))
            };
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    let n = num(item)?;
                    (n, n)
                }
            };
            if hi < lo {
                return Err(CpuListError::Backwards(item.to_string()));
            }
            if hi >= Self::MAX_CPUS {
                return Err(CpuListError::TooLarge(item.to_string()));
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList { cpus })
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }

    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }
}

impl FromStr for CpuList {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuList::parse(s)
    }
}

impl fmt::Display for CpuList {
    /// The canonical form, with ranges: `0,2-3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.cpus.len() {
            let start = self.cpus[i];
            let mut end = start;
            while i + 1 < self.cpus.len() && self.cpus[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_items_and_ranges() {
        let l = CpuList::parse("0,2-3").unwrap();
        assert_eq!(l.cpus(), &[0, 2, 3]);
        assert!(l.contains(0) && !l.contains(1) && l.contains(3) && !l.contains(4));
        assert_eq!(CpuList::parse(" 3 , 1-2,2 ").unwrap().cpus(), &[1, 2, 3]);
        assert_eq!(CpuList::parse("5-5").unwrap().cpus(), &[5]);
    }

    #[test]
    fn displays_canonically() {
        assert_eq!(CpuList::parse("3,0,1,2,7").unwrap().to_string(), "0-3,7");
        assert_eq!(CpuList::parse("4").unwrap().to_string(), "4");
    }

    #[test]
    fn rejects_bad_lists() {
        assert_eq!(CpuList::parse(""), Err(CpuListError::Empty));
        assert!(matches!(
            CpuList::parse("1,"),
            Err(CpuListError::BadItem(_))
        ));
        assert!(matches!(CpuList::parse("a"), Err(CpuListError::BadItem(_))));
        assert!(matches!(
            CpuList::parse("-1"),
            Err(CpuListError::BadItem(_))
        ));
        assert!(matches!(
            CpuList::parse("1-2-3"),
            Err(CpuListError::BadItem(_))
        ));
        assert!(matches!(
            CpuList::parse("3-1"),
            Err(CpuListError::Backwards(_))
        ));
        assert!(matches!(
            CpuList::parse("0-4294967295"),
            Err(CpuListError::TooLarge(_))
        ));
    }
}
