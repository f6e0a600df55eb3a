//! Finding kern-profile's QEMU plugin without being told, and checking it is this version's.
//!
//! Where it is looked for, in order:
//! 1. beside the `kern-profile` binary: `kern-profile.so` (what `scripts/build.sh` puts in
//!    `target/release/`), `libkern_profile_plugin.so` (cargo's own name for it);
//! 2. the install layouts: `../lib/kern-profile/kern-profile.so` relative to the binary
//!    (`/usr/bin` → `/usr/lib/kern-profile/`, the Debian package; `~/.cargo/bin` →
//!    `~/.cargo/lib/kern-profile/`);
//! 3. the copy built into the binary (`build.rs` embeds it; `cargo install --path
//!    aggregator` so gives a binary that needs nothing else), written once to a cache file
//!    named after its content (`$XDG_CACHE_HOME/kern-profile/`, else `~/.cache/kern-profile/`,
//!    else the temporary directory), since QEMU loads plugins from files.
//!
//! Every plugin exports `kern_profile_plugin_version`, a NUL-terminated
//! `kern-profile-plugin X.Y.Z` string read here from its dynamic symbol table (no loading):
//! a plugin of another version is passed over with a note, and named in the error when no
//! plugin fits.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSymbol};

use super::RecordError;

/// The symbol every kern-profile plugin exports.
pub const VERSION_SYMBOL: &str = "kern_profile_plugin_version";

/// The version string this binary's plugin must carry.
pub fn expected_version() -> String {
    format!("kern-profile-plugin {}", env!("CARGO_PKG_VERSION"))
}

/// The plugin bytes built into this binary (empty when the build embedded none).
const EMBEDDED: &[u8] = include_bytes!(env!("KP_EMBEDDED_PLUGIN"));

/// Where the plugin in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginSource {
    /// `--plugin`.
    Given,
    /// Beside the binary or in an install layout.
    Installed,
    /// The copy built into the binary.
    Embedded,
}

/// The plugin a session loads.
#[derive(Debug, Clone)]
pub struct Plugin {
    pub path: PathBuf,
    pub source: PluginSource,
    /// Candidates passed over, and why (for the user).
    pub notes: Vec<String>,
}

/// The version string a plugin file exports, read from its dynamic symbol table.
pub fn plugin_version(bytes: &[u8]) -> Result<String, String> {
    let file = object::File::parse(bytes).map_err(|e| format!("not a shared object ({e})"))?;
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(VERSION_SYMBOL))
        .ok_or("exports no kern_profile_plugin_version: not a kern-profile plugin, or one older than 0.1")?;
    let section = sym
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .ok_or("its version symbol is in no section")?;
    let data = section
        .data_range(sym.address(), sym.size().max(1))
        .ok()
        .flatten()
        .ok_or("its version symbol points outside its section")?;
    let text = data.split(|&b| b == 0).next().unwrap_or_default();
    String::from_utf8(text.to_vec()).map_err(|_| "its version is not text".to_string())
}

/// Checks the plugin file at `path`: `Err` says why it cannot be used.
pub fn check(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let v = plugin_version(&bytes)?;
    if v != expected_version() {
        return Err(format!(
            "it is {v}, this kern-profile is {}: use the plugin built with it",
            env!("CARGO_PKG_VERSION")
        ));
    }
    Ok(())
}

/// Finds the plugin: `given` (checked) or, without it, the first fitting candidate.
pub fn locate(given: Option<&Path>) -> Result<Plugin, RecordError> {
    if let Some(p) = given {
        check(p).map_err(|why| RecordError::PluginUnusable {
            path: p.to_path_buf(),
            why,
        })?;
        return Ok(Plugin {
            path: absolute(p),
            source: PluginSource::Given,
            notes: Vec::new(),
        });
    }
    let mut notes = Vec::new();
    let mut searched = Vec::new();
    for c in installed_candidates() {
        if !c.exists() {
            searched.push(c.display().to_string());
            continue;
        }
        match check(&c) {
            Ok(()) => {
                return Ok(Plugin {
                    path: c,
                    source: PluginSource::Installed,
                    notes,
                })
            }
            Err(why) => {
                notes.push(format!("passed over {}: {why}", c.display()));
                searched.push(format!("{} ({why})", c.display()));
            }
        }
    }
    if !EMBEDDED.is_empty() {
        let path = extract_embedded().map_err(|source| RecordError::Io {
            what: "cannot write the built-in plugin to a file for QEMU".into(),
            source,
        })?;
        return Ok(Plugin {
            path,
            source: PluginSource::Embedded,
            notes,
        });
    }
    searched.push("a copy built into this binary (none: built without it)".into());
    Err(RecordError::PluginNotFound { searched })
}

/// Beside the binary, then the install layouts.
fn installed_candidates() -> Vec<PathBuf> {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok())
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    vec![
        dir.join("kern-profile.so"),
        dir.join("libkern_profile_plugin.so"),
        dir.join("../lib/kern-profile/kern-profile.so"),
    ]
    .into_iter()
    .map(|p| normalize(&p))
    .collect()
}

/// `a/b/../c` → `a/c`, for messages (the path is not resolved).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Writes the built-in plugin to its cache file (once: the name holds a hash of the bytes).
fn extract_embedded() -> std::io::Result<PathBuf> {
    let name = format!(
        "kern-profile-{}-{:016x}.so",
        env!("CARGO_PKG_VERSION"),
        fnv1a(EMBEDDED)
    );
    let mut last_err = None;
    for dir in cache_dirs() {
        let path = dir.join(&name);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == EMBEDDED.len() as u64) {
            return Ok(path);
        }
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| crate::atomic_file::write_atomically(&path, |w| w.write_all(EMBEDDED)));
        match written {
            Ok(()) => return Ok(path),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| std::io::Error::other("no cache directory")))
}

fn cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(x).join("kern-profile"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        dirs.push(PathBuf::from(h).join(".cache/kern-profile"));
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    dirs.push(std::env::temp_dir().join(format!("kern-profile-{uid}")));
    dirs
}

/// FNV-1a, 64 bits: names the cache file after the plugin's bytes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Whether this binary carries its plugin.
pub fn has_embedded() -> bool {
    !EMBEDDED.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_without_the_version_symbol_are_refused() {
        let e = plugin_version(b"not an ELF").unwrap_err();
        assert!(e.starts_with("not a shared object"), "{e}");
        // An ELF without the symbol: the test binary itself.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let e = plugin_version(&me).unwrap_err();
        assert!(e.contains("exports no kern_profile_plugin_version"), "{e}");
    }

    #[test]
    fn the_embedded_plugin_is_this_version() {
        if !has_embedded() {
            eprintln!("built without an embedded plugin (KP_EMBED_PLUGIN=0)");
            return;
        }
        assert_eq!(plugin_version(EMBEDDED).unwrap(), expected_version());
    }

    #[test]
    fn paths_normalize_for_messages() {
        assert_eq!(
            normalize(Path::new("/usr/bin/../lib/kern-profile/kern-profile.so")),
            PathBuf::from("/usr/lib/kern-profile/kern-profile.so")
        );
    }
}
