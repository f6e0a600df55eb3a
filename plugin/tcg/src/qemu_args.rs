//! Checks of QEMU's own command line (read from `/proc/self/cmdline` by the plugin).
//!
//! QEMU 10.0 bakes the index of the vCPU that *translated* a block into the block's inline
//! counter updates and callbacks when blocks are not compiled for parallel execution, which
//! is the case with single-threaded (round-robin) TCG: `-accel tcg,thread=single`, or
//! `-icount`. With several vCPUs, their blocks are shared, so instruction counts and samples
//! go to the wrong vCPU, and guests were seen to crash (an AP started by SeaBIOS ran
//! garbage). Multi-threaded TCG, QEMU's default for x86 guests, is not affected.

/// An argument's option name without its dashes, and its inline `=value`; `None` for a
/// value (no leading dash).
fn option(a: &str) -> Option<(&str, Option<&str>)> {
    let (name, inline) = match a.split_once('=') {
        Some((n, v)) if n.starts_with('-') => (n, Some(v)),
        _ => (a, None),
    };
    let name = name.strip_prefix("--").or_else(|| name.strip_prefix('-'))?;
    Some((name, inline))
}

/// The option that makes QEMU run all vCPUs on one thread, if any.
pub fn single_threaded_tcg<'a>(args: &[&'a str]) -> Option<&'a str> {
    let mut it = args.iter().copied().peekable();
    while let Some(a) = it.next() {
        match option(a) {
            Some(("icount", _)) => return Some(a),
            Some(("accel", inline)) => {
                let value = inline.or_else(|| it.peek().copied());
                if value.is_some_and(|v| v.split(',').any(|o| o == "thread=single")) {
                    return Some(value.unwrap_or(a));
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether QEMU runs with `-icount`: its virtual clock, and so the guest's timer, then
/// follows the instructions executed, and an interrupt that the instruction budget brings is
/// taken at the instruction where the budget ran out, not at the next block.
pub fn counts_instructions(args: &[&str]) -> bool {
    args.iter()
        .any(|a| matches!(option(a), Some(("icount", _))))
}

/// Splits `/proc/self/cmdline` into arguments.
pub fn split_cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(cmd: &str) -> Option<String> {
        let v: Vec<&str> = cmd.split(' ').collect();
        single_threaded_tcg(&v).map(String::from)
    }

    #[test]
    fn detects_round_robin_tcg() {
        assert_eq!(
            check("qemu -smp 4 -accel tcg,thread=single -kernel k"),
            Some("tcg,thread=single".into())
        );
        assert_eq!(
            check("qemu --accel tcg,thread=single"),
            Some("tcg,thread=single".into())
        );
        assert_eq!(
            check("qemu -accel=tcg,thread=single"),
            Some("tcg,thread=single".into())
        );
        assert_eq!(check("qemu -icount shift=auto"), Some("-icount".into()));
        assert_eq!(
            check("qemu --icount=shift=7"),
            Some("--icount=shift=7".into())
        );
        assert_eq!(check("qemu -smp 4 -accel tcg,thread=multi"), None);
        assert_eq!(check("qemu -smp 4 -accel tcg"), None);
        assert_eq!(check("qemu -smp 4"), None);
        // A kernel command line that merely mentions it is not an option.
        assert_eq!(check("qemu -append thread=single"), None);
        assert_eq!(check("qemu -accel"), None);
    }

    #[test]
    fn detects_icount() {
        let on = |cmd: &str| counts_instructions(&cmd.split(' ').collect::<Vec<_>>());
        assert!(on("qemu -icount shift=0 -kernel k"));
        assert!(on("qemu --icount=shift=auto,sleep=off"));
        assert!(!on("qemu -kernel k -append icount"));
        assert!(!on("qemu -accel tcg,thread=single"));
    }

    #[test]
    fn cmdline() {
        assert_eq!(
            split_cmdline(b"qemu\x00-smp\x004\x00"),
            vec!["qemu", "-smp", "4"]
        );
        assert!(split_cmdline(b"").is_empty());
    }
}
