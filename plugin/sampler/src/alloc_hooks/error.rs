use std::path::PathBuf;

/// Why the allocation hooks cannot be set up. Every message names the argument, and for a
/// SPEC line, the line: the plugin prints it and QEMU stops before the guest runs.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// A SPEC line that is malformed, or names a function or parameter the kernel lacks.
    #[error("alloc={spec}, line {line} (`{text}`): {what}")]
    Line {
        spec: String,
        line: usize,
        text: String,
        what: String,
    },
    #[error("alloc={spec}: not a preset (rust, linux, libc) and not a readable file: {source}")]
    SpecFile {
        spec: String,
        source: std::io::Error,
    },
    #[error("alloc={spec}: {what}")]
    Spec { spec: String, what: String },
    #[error("alloc= needs the kernel's symbols: add elf=KERNEL.ELF or symbols=FILE (System.map, nm output, /proc/kallsyms)")]
    NoSymbols,
    #[error("{arg}={}: {what}", path.display())]
    SymbolFile {
        arg: &'static str,
        path: PathBuf,
        what: String,
    },
}
