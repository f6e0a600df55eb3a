//! The user's QEMU command: which binary it runs (found and version-checked before the guest
//! starts), which kernel it boots, and the same command with the plugin added.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kern_profile_format::qemu::{build_for_qemu, min_qemu_version, parse_qemu_version, Build};

use super::RecordError;

/// A QEMU command line, checked.
#[derive(Debug, Clone)]
pub struct QemuCommand {
    /// The program as given (`qemu-system-i386`, or a path).
    pub program: OsString,
    /// Where it was found.
    pub path: PathBuf,
    /// Everything after the program.
    pub args: Vec<OsString>,
    /// `X.Y.Z` from `--version`.
    pub version: String,
    /// The plugin build this QEMU loads; `None` for a QEMU checked for its gdbstub only
    /// ([`QemuCommand::check_for_gdbstub`]) that loads none.
    pub build: Option<&'static Build>,
}

impl QemuCommand {
    /// Finds the program of `argv` (on PATH unless it has a `/`), and checks that it is a QEMU
    /// one of the plugin builds loads on (`qemu-version.txt`), by name, before anything runs;
    /// the build it loads is [`QemuCommand::build`]. `command` names the subcommand for messages.
    pub fn check(argv: &[OsString], command: &'static str) -> Result<Self, RecordError> {
        Self::checked(argv, command, true)
    }

    /// As [`QemuCommand::check`], for a QEMU sampled through its gdbstub (`record --gdb`):
    /// any version, no plugin build needed.
    pub fn check_for_gdbstub(
        argv: &[OsString],
        command: &'static str,
    ) -> Result<Self, RecordError> {
        Self::checked(argv, command, false)
    }

    fn checked(
        argv: &[OsString],
        command: &'static str,
        plugin: bool,
    ) -> Result<Self, RecordError> {
        let (program, args) = argv.split_first().ok_or(RecordError::NoCommand(command))?;
        let name = program.to_string_lossy().into_owned();
        let path = find_program(program).ok_or_else(|| RecordError::QemuNotFound {
            where_: if name.contains('/') {
                String::new()
            } else {
                " on PATH".into()
            },
            program: name.clone(),
            min: min_qemu_version(),
        })?;
        let out = Command::new(&path)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|source| RecordError::QemuVersionRun {
                program: name.clone(),
                source,
            })?;
        let said = String::from_utf8_lossy(&out.stdout);
        let version = parse_qemu_version(&said)
            .ok_or_else(|| RecordError::QemuVersionUnknown {
                program: name.clone(),
                said: said
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(120)
                    .collect(),
                min: min_qemu_version(),
            })?
            .to_string();
        let build = match build_for_qemu(&version) {
            Ok(b) => Some(b),
            Err(_) if !plugin => None,
            Err(e) => {
                return Err(RecordError::QemuTooOld {
                    program: name,
                    found: e.found,
                    min: e.min,
                    command,
                })
            }
        };
        let cmd = QemuCommand {
            program: program.clone(),
            path,
            args: args.to_vec(),
            version,
            build,
        };
        if let Some(p) = cmd.option("plugin").filter(|p| {
            let p = p.to_string_lossy();
            p.contains("kern-profile") || p.contains("kern_profile")
        }) {
            return Err(RecordError::PluginGiven(p.to_string_lossy().into_owned()));
        }
        Ok(cmd)
    }

    /// The value of QEMU option `-NAME VALUE` (or `--NAME`, `-NAME=VALUE`), the last one given.
    pub fn option(&self, name: &str) -> Option<OsString> {
        let mut found = None;
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            let Some(s) = a.to_str() else { continue };
            let Some(opt) = s.strip_prefix("--").or_else(|| s.strip_prefix('-')) else {
                continue;
            };
            if opt == name {
                found = it.next().cloned();
            } else if let Some(v) = opt.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                found = Some(OsString::from(v));
            }
        }
        found
    }

    /// The kernel QEMU boots (`-kernel`).
    pub fn kernel(&self) -> Option<PathBuf> {
        self.option("kernel").map(PathBuf::from)
    }

    /// Boots Linux with `nokaslr` added to its command line (`-append`), so that its
    /// addresses are those of the image its samples are named from and its unwind tables
    /// read. A command line that asks for `kaslr` itself is kept. Returns what it did or
    /// did not do, for the user.
    pub fn disable_kaslr(&mut self) -> Option<String> {
        let at = self.args.iter().rposition(|a| {
            let a = a.to_string_lossy();
            a == "-append" || a == "--append"
        });
        let line = at.and_then(|i| self.args.get(i + 1));
        let tokens: Vec<String> = line.map_or(Vec::new(), |l| {
            l.to_string_lossy()
                .split_whitespace()
                .map(String::from)
                .collect()
        });
        if tokens.iter().any(|t| t == "nokaslr") {
            return None;
        }
        if tokens.iter().any(|t| t == "kaslr") {
            return Some(
                "-append asks for kaslr: the kernel's addresses will not be its image's, \
                 so its functions will not be named; drop kaslr to name them"
                    .into(),
            );
        }
        match at {
            Some(i) if i + 1 < self.args.len() => {
                let mut l = self.args[i + 1].clone();
                l.push(" nokaslr");
                self.args[i + 1] = l;
            }
            _ => self.args.extend(["-append".into(), "nokaslr".into()]),
        }
        Some(
            "added nokaslr to -append: with KASLR the kernel would run away from the \
             addresses its image's symbols and unwind tables give"
                .into(),
        )
    }

    /// The command with `-plugin PLUGIN,ARGS` added at the end.
    pub fn with_plugin(&self, plugin: &Path, plugin_args: &str) -> Command {
        let mut c = Command::new(&self.path);
        c.args(&self.args);
        let mut spec = plugin.as_os_str().to_os_string();
        spec.push(",");
        spec.push(plugin_args);
        c.arg("-plugin").arg(spec);
        c
    }

    /// The program's name, for messages.
    pub fn name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }
}

/// `program` as `Command` would run it: a path when it has a `/`, else the first match on
/// PATH; `None` when there is no such executable file.
pub fn find_program(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.to_string_lossy().contains('/') {
        return is_executable(p).then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|c| is_executable(c))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> QemuCommand {
        QemuCommand {
            program: "qemu-system-i386".into(),
            path: "/usr/bin/qemu-system-i386".into(),
            args: args.iter().map(OsString::from).collect(),
            version: "10.0.2".into(),
            build: Some(&kern_profile_format::qemu::BUILDS[0]),
        }
    }

    #[test]
    fn options_and_the_plugin_argument() {
        let c = cmd(&["-m", "128M", "-kernel", "k.elf", "-serial", "stdio"]);
        assert_eq!(c.kernel(), Some(PathBuf::from("k.elf")));
        assert_eq!(cmd(&["--kernel", "a"]).kernel(), Some(PathBuf::from("a")));
        assert_eq!(cmd(&["-kernel=b"]).kernel(), Some(PathBuf::from("b")));
        assert_eq!(cmd(&["-kernelx", "b"]).kernel(), None);
        assert_eq!(cmd(&["-m", "1G"]).kernel(), None);
        let run = c.with_plugin(Path::new("/p/kern-profile.so"), "out=/d/cpu.raw,delay=10");
        let args: Vec<_> = run
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            &args[args.len() - 2..],
            ["-plugin", "/p/kern-profile.so,out=/d/cpu.raw,delay=10"]
        );
    }

    #[test]
    fn linux_boots_without_kaslr() {
        let args = |c: &QemuCommand| {
            c.args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        let mut c = cmd(&["-kernel", "vmlinuz", "-append", "console=ttyS0 quiet"]);
        assert!(c.disable_kaslr().unwrap().starts_with("added nokaslr"));
        assert_eq!(args(&c)[3], "console=ttyS0 quiet nokaslr");
        assert_eq!(c.disable_kaslr(), None, "once");
        let mut c = cmd(&["-kernel", "vmlinuz"]);
        c.disable_kaslr();
        assert_eq!(args(&c), ["-kernel", "vmlinuz", "-append", "nokaslr"]);
        let mut c = cmd(&["-kernel", "vmlinuz", "-append", "kaslr"]);
        assert!(c.disable_kaslr().unwrap().contains("asks for kaslr"));
        assert_eq!(args(&c)[3], "kaslr");
    }

    #[test]
    fn missing_programs_are_named() {
        let e = QemuCommand::check(&["qemu-system-nonesuch".into()], "record").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("QEMU binary `qemu-system-nonesuch` not found on PATH"),
            "{e}"
        );
        let e = QemuCommand::check(&[], "record").unwrap_err();
        assert!(e.to_string().contains("after `--`"), "{e}");
    }
}
