//! What `kern-profile top` shows: a header and a table of the hottest functions, or of the
//! samples per guest thread or process (`--by`), as plain lines (no colour, no cursor
//! tricks: the terminal code only places them).

use std::time::Duration;

use crate::output::by_task::{table_lines, TASK_LEGEND};
use crate::output::text::{pct, FunctionRow};
use crate::record::aggregate::sort_by_self;
use crate::ReportBy;

use super::profile::LiveTable;

/// Which table is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct View {
    /// One vCPU, or all (`None`).
    pub vcpu: Option<u32>,
    /// Sorted by total rather than self.
    pub by_total: bool,
    /// Rows by function, or the samples per task or process.
    pub by: ReportBy,
}

impl View {
    /// The next vCPU in the cycle all → 0 → 1 → … → all (`c`).
    pub fn next_vcpu(&mut self, vcpus: &[u32]) {
        self.vcpu = match self.vcpu {
            None => vcpus.first().copied(),
            Some(v) => vcpus.iter().copied().find(|&w| w > v),
        };
    }

    /// The next table in the cycle function → task → process → function (`t`).
    pub fn next_by(&mut self) {
        self.by = match self.by {
            ReportBy::Function => ReportBy::Task,
            ReportBy::Task => ReportBy::Process,
            ReportBy::Process => ReportBy::Function,
        };
    }
}

/// The run's state, for the header.
#[derive(Debug, Clone)]
pub struct Status {
    pub elapsed: Duration,
    /// `None` while QEMU runs; its status once it exited.
    pub exited: Option<String>,
    /// Show the key help (interactive mode).
    pub keys: bool,
}

/// The screen's lines: at most `rows` table rows, at most `height` lines (0: no limit),
/// each at most `width` characters (0: no limit).
pub fn render(
    p: &LiveTable,
    view: View,
    status: &Status,
    rows_wanted: usize,
    (width, height): (usize, usize),
) -> Vec<String> {
    let secs = status.elapsed.as_secs_f64();
    let kept = p.kept(view.vcpu);
    let state = match &status.exited {
        None => "QEMU running".to_string(),
        Some(s) => format!("QEMU exited, {s}"),
    };
    let mut lines = vec![format!(
        "kern-profile top: {secs:.1} s, {} samples ({:.0}/s), {state}",
        p.read,
        if secs > 0.0 {
            p.read as f64 / secs
        } else {
            0.0
        }
    )];
    let vcpus = p.vcpus();
    if vcpus.len() > 1 {
        let parts: Vec<String> = vcpus
            .iter()
            .map(|&v| format!("cpu {v} {}", p.kept(Some(v))))
            .collect();
        lines.push(format!("per vCPU: {}", parts.join(", ")));
    }
    let which = match view.vcpu {
        None => "all vCPUs".to_string(),
        Some(v) => format!("vCPU {v}"),
    };
    let order = match view.by {
        ReportBy::Function if view.by_total => "total",
        ReportBy::Function => "self",
        ReportBy::Task => "thread",
        ReportBy::Process => "process",
    };
    let mut head = format!("showing {which}, by {order}");
    if status.keys {
        head.push_str(
            "   [c] next vCPU  [s] self/total  [t] function/thread/process  [q] stop QEMU",
        );
    }
    lines.push(head);
    lines.push(String::new());
    if view.by != ReportBy::Function {
        task_table(p, view, rows_wanted, height, &mut lines);
        truncate(&mut lines, width);
        return lines;
    }
    lines.push(format!(
        "  {:>7}  {:>7}  {:>9}  Function",
        "Self", "Total", "Samples"
    ));
    let mut rows = p.rows(view.vcpu);
    if !view.by_total {
        // Functions never at a leaf say nothing in a self table.
        rows.retain(|r| r.self_count > 0);
    }
    sort(&mut rows, view.by_total);
    let room = if height == 0 {
        rows_wanted
    } else {
        rows_wanted.min(height.saturating_sub(lines.len()))
    };
    for r in rows.iter().take(room) {
        let n = if view.by_total {
            r.total_count
        } else {
            r.self_count
        };
        lines.push(format!(
            "  {:>6.2}%  {:>6.2}%  {:>9}  {}",
            pct(r.self_count, kept),
            pct(r.total_count, kept),
            n,
            r.name
        ));
    }
    if rows.is_empty() {
        lines.push("  (no samples yet)".into());
    }
    truncate(&mut lines, width);
    lines
}

/// The table by thread or process, below the header `lines`: its heading and rows (as
/// `-f text --by` writes them) in at most `height` lines (0: no limit), then the legend.
fn task_table(
    p: &LiveTable,
    view: View,
    rows_wanted: usize,
    height: usize,
    lines: &mut Vec<String>,
) {
    let rows = p.task_rows(view.vcpu);
    let total = rows.iter().fold(0u64, |t, r| t.saturating_add(r.samples));
    if total == 0 {
        lines.push("  (no samples yet)".into());
        return;
    }
    if !p.has_tasks {
        lines.push(
            "  (no task records yet: the plugin records them with tasks=, on by default with \
             elf= of a Linux kernel)"
                .into(),
        );
    }
    // The heading, and a line for the legend after the blank one.
    let room = if height == 0 {
        rows_wanted
    } else {
        rows_wanted.min(height.saturating_sub(lines.len() + 3))
    };
    lines.extend(table_lines(rows, room, total, view.by));
    if height == 0 || lines.len() + 2 <= height {
        lines.push(String::new());
        lines.push(TASK_LEGEND.into());
    }
}

/// Cuts each line to `width` characters (0: no limit).
fn truncate(lines: &mut [String], width: usize) {
    if width > 0 {
        for l in lines {
            if let Some((i, _)) = l.char_indices().nth(width) {
                l.truncate(i);
            }
        }
    }
}

fn sort(rows: &mut [FunctionRow], by_total: bool) {
    if by_total {
        rows.sort_by(|a, b| {
            b.total_count
                .cmp(&a.total_count)
                .then(b.self_count.cmp(&a.self_count))
                .then(a.name.cmp(&b.name))
        });
    } else {
        sort_by_self(rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vcpu_cycle_returns_to_all() {
        let mut v = View::default();
        let cpus = [0, 2];
        v.next_vcpu(&cpus);
        assert_eq!(v.vcpu, Some(0));
        v.next_vcpu(&cpus);
        assert_eq!(v.vcpu, Some(2));
        v.next_vcpu(&cpus);
        assert_eq!(v.vcpu, None);
    }

    #[test]
    fn an_empty_profile_says_so() {
        let p = LiveTable::default();
        let st = Status {
            elapsed: Duration::from_secs(2),
            exited: None,
            keys: true,
        };
        let lines = render(&p, View::default(), &st, 10, (40, 0));
        assert!(lines[0].starts_with("kern-profile top: 2.0 s, 0 samples"));
        assert!(lines.iter().all(|l| l.chars().count() <= 40));
        assert_eq!(lines.last().unwrap(), "  (no samples yet)");
    }
}
