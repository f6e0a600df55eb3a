//! Numbers read back from `kern-profile`'s text outputs and folded stacks.

/// The number after `key` on the first line of `block` (an allocator's block of the
/// `--alloc -f text` report) that starts with it.
pub fn report_value(block: &str, key: &str) -> u64 {
    let line = block
        .lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no `{key}` in\n{block}"));
    line.trim_start()[key.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Allocator `name`'s block of the `--alloc -f text` report.
pub fn allocator_block<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .split("allocator `")
        .find(|b| b.starts_with(&format!("{name}`")))
        .unwrap_or_else(|| panic!("no allocator {name} in\n{report}"))
}

/// What the folded stacks that pass through `function` count.
pub fn count_through(folded: &[(Vec<String>, u64)], function: &str) -> u64 {
    folded
        .iter()
        .filter(|(s, _)| s.iter().any(|f| f == function))
        .map(|(_, n)| n)
        .sum()
}

/// The stacks of vCPU `cpu` in `--per-cpu` folded stacks, without their `cpu N` root.
pub fn cpu_stacks(per_cpu: &[(Vec<String>, u64)], cpu: usize) -> Vec<(Vec<String>, u64)> {
    let root = format!("cpu {cpu}");
    per_cpu
        .iter()
        .filter(|(s, _)| s[0] == root)
        .map(|(s, n)| (s[1..].to_vec(), *n))
        .collect()
}

/// `kern-profile RAW SYMBOL-ARGS... -f text --by process --top 1000 -o -`: every process's
/// row (`symbols`: the kernel file, or `--symbols FILE`).
pub fn by_process_text(raw: &std::path::Path, symbols: &[&str]) -> String {
    table_by(raw, symbols, "process")
}

/// [`by_process_text`] by guest thread (`--by task`).
pub fn by_task_text(raw: &std::path::Path, symbols: &[&str]) -> String {
    table_by(raw, symbols, "task")
}

fn table_by(raw: &std::path::Path, symbols: &[&str], by: &str) -> String {
    let raw = raw.to_str().expect("a UTF-8 path");
    let mut args = vec![raw];
    args.extend_from_slice(symbols);
    args.extend(["-f", "text", "--by", by, "--top", "1000", "-o", "-"]);
    crate::kern_profile(&args)
}

/// The rows of a `-f text --by task|process` table: (share %, samples, command, pid or `-`);
/// the switch columns after the pid (seconds and an exact share, all decimals) are left out.
pub fn task_table_rows(table: &str) -> Vec<(f64, u64, String, String)> {
    table
        .lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            let share = t.first()?.strip_suffix('%')?.parse().ok()?;
            let samples = t.get(1)?.parse().ok()?;
            let end = t.len() - t.iter().rev().take_while(|c| c.contains('.')).count();
            let (pid, command) = t.get(2..end)?.split_last()?;
            Some((share, samples, command.join(" "), pid.to_string()))
        })
        .collect()
}

/// A text report's `# tasks:` line (`--by task` or `--by process`, a recording with tasks).
pub fn tasks_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("# tasks:"))
        .unwrap_or_else(|| panic!("no tasks line in the report:\n{text}"))
}

/// The reasons of a report's `# tasks:` line, "... N samples read with no task (REASON N,
/// ...)": each reason with its count; none when every sample had its task.
pub fn no_task_reasons(line: &str) -> Vec<(String, u64)> {
    let Some((_, why)) = line.split_once("samples read with no task (") else {
        return Vec::new();
    };
    why.trim_end_matches(')')
        .split(", ")
        .map(|part| {
            let (reason, n) = part.rsplit_once(' ').expect("REASON N");
            (reason.to_string(), n.parse().expect("a count"))
        })
        .collect()
}
