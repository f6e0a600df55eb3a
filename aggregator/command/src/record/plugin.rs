//! Finding kern-profile's QEMU plugin without being told, and checking it is this version's
//! and the build the QEMU in use loads.
//!
//! There is one plugin build per QEMU plugin ABI (`format::qemu::BUILDS`: API 4 for
//! QEMU 9.2 to 11.0, `kern-profile.so`; API 7 for 11.1 and later, `kern-profile-api7.so`).
//! Where the build a QEMU loads is looked for, in order:
//! 1. beside the `kern-profile` binary: its file name (what `scripts/build.sh` puts in
//!    `target/release/`), then cargo's own name for it (`libkern_profile_plugin_api4.so`);
//! 2. the install layouts: `../lib/kern-profile/FILE` relative to the binary
//!    (`/usr/bin` → `/usr/lib/kern-profile/`, the Debian package; `~/.cargo/bin` →
//!    `~/.cargo/lib/kern-profile/`);
//! 3. the copy built into the binary (`build.rs` embeds every build; `cargo install --path
//!    aggregator/command` so gives a binary that needs nothing else), written once to a cache file
//!    named after its content (`$XDG_CACHE_HOME/kern-profile/`, else `~/.cache/kern-profile/`,
//!    else the temporary directory), since QEMU loads plugins from files.
//!
//! Every plugin exports `kern_profile_plugin_version`, a NUL-terminated
//! `kern-profile-plugin X.Y.Z` string, and `qemu_plugin_version`, its API level, both read
//! here from its dynamic symbol table (no loading): a plugin of another version or another
//! build is passed over with a note, and named in the error when no plugin fits.

use std::path::{Path, PathBuf};

use kern_profile_format::qemu::{Build, BUILDS};
use object::{Object, ObjectSection, ObjectSymbol};

use super::RecordError;

/// The symbol every kern-profile plugin exports.
pub const VERSION_SYMBOL: &str = "kern_profile_plugin_version";

/// The symbol every QEMU plugin exports: the plugin API level it is built for.
pub const API_SYMBOL: &str = "qemu_plugin_version";

/// The version string this binary's plugin must carry.
pub fn expected_version() -> String {
    format!("kern-profile-plugin {}", env!("CARGO_PKG_VERSION"))
}

/// The plugin builds carried inside this binary, in the order of `BUILDS` (each empty when
/// the build embedded none).
const EMBEDDED: [&[u8]; 2] = [
    include_bytes!(env!("KP_EMBEDDED_PLUGIN_API4")),
    include_bytes!(env!("KP_EMBEDDED_PLUGIN_API7")),
];

/// The embedded copy of `build` (empty when none).
fn embedded(build: &Build) -> &'static [u8] {
    BUILDS
        .iter()
        .position(|b| b == build)
        .map_or(&[][..], |i| EMBEDDED[i])
}

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

/// The bytes of dynamic symbol `name` of shared object `file` (at most `max`).
fn symbol_bytes<'a>(
    file: &object::File<'a>,
    name: &str,
    max: u64,
) -> Result<&'a [u8], &'static str> {
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(name))
        .ok_or("no such symbol")?;
    let section = sym
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .ok_or("its symbol is in no section")?;
    section
        .data_range(sym.address(), sym.size().clamp(1, max))
        .ok()
        .flatten()
        .ok_or("its symbol points outside its section")
}

/// The version string a plugin file exports, read from its dynamic symbol table.
pub fn plugin_version(bytes: &[u8]) -> Result<String, String> {
    let file = object::File::parse(bytes).map_err(|e| format!("not a shared object ({e})"))?;
    let data = symbol_bytes(&file, VERSION_SYMBOL, 256).map_err(|e| match e {
        "no such symbol" => "exports no kern_profile_plugin_version: not a kern-profile plugin, or one older than 0.1".to_string(),
        e => e.replace("its symbol", "its version symbol"),
    })?;
    let text = data.split(|&b| b == 0).next().unwrap_or_default();
    String::from_utf8(text.to_vec()).map_err(|_| "its version is not text".to_string())
}

/// The plugin API level a plugin file is built for (its `qemu_plugin_version`).
pub fn plugin_api(bytes: &[u8]) -> Result<i32, String> {
    let file = object::File::parse(bytes).map_err(|e| format!("not a shared object ({e})"))?;
    let data =
        symbol_bytes(&file, API_SYMBOL, 4).map_err(|e| format!("its qemu_plugin_version: {e}"))?;
    let word: [u8; 4] = data
        .try_into()
        .map_err(|_| "its qemu_plugin_version is not 4 bytes".to_string())?;
    Ok(match file.endianness() {
        object::Endianness::Little => i32::from_le_bytes(word),
        object::Endianness::Big => i32::from_be_bytes(word),
    })
}

/// Checks the plugin file at `path` for QEMU `qemu` (which loads `build`): `Err` says why it
/// cannot be used.
pub fn check(path: &Path, build: &Build, qemu: &str) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    check_bytes(&bytes, build, qemu)
}

fn check_bytes(bytes: &[u8], build: &Build, qemu: &str) -> Result<(), String> {
    let v = plugin_version(bytes)?;
    if v != expected_version() {
        return Err(format!(
            "it is {v}, this kern-profile is {}: use the plugin built with it",
            env!("CARGO_PKG_VERSION")
        ));
    }
    let api = plugin_api(bytes)?;
    if api != build.api {
        let what = Build::for_api(api).map_or_else(
            || format!("a plugin for API {api}"),
            |b| format!("the build for {} (plugin API {api})", b.qemu_range()),
        );
        return Err(format!(
            "it is {what}, but QEMU {qemu} loads plugin API {}: use {}, the build for {}",
            build.api,
            build.file,
            build.qemu_range()
        ));
    }
    Ok(())
}

/// Finds the plugin QEMU `qemu` loads (`build`): `given` (checked) or, without it, the first
/// fitting candidate.
pub fn locate(
    given: Option<&Path>,
    build: &'static Build,
    qemu: &str,
) -> Result<Plugin, RecordError> {
    if let Some(p) = given {
        check(p, build, qemu).map_err(|why| RecordError::PluginUnusable {
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
    for c in installed_candidates(build) {
        if !c.exists() {
            searched.push(c.display().to_string());
            continue;
        }
        match check(&c, build, qemu) {
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
    let bytes = embedded(build);
    if !bytes.is_empty() {
        let path = extract_embedded(bytes).map_err(|source| RecordError::Io {
            what: "cannot write the built-in plugin to a file for QEMU".into(),
            source,
        })?;
        return Ok(Plugin {
            path,
            source: PluginSource::Embedded,
            notes,
        });
    }
    searched.push(format!(
        "a copy of {} built into this binary (none: built without it)",
        build.file
    ));
    Err(RecordError::PluginNotFound {
        build: format!(
            "{} (plugin API {}, for {})",
            build.file,
            build.api,
            build.qemu_range()
        ),
        searched,
    })
}

/// Beside the binary, then the install layouts.
fn installed_candidates(build: &Build) -> Vec<PathBuf> {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok())
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    vec![
        dir.join(build.file),
        dir.join(format!("libkern_profile_plugin_api{}.so", build.api)),
        dir.join("../lib/kern-profile").join(build.file),
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

/// Writes a built-in plugin to its cache file (once: the name holds a hash of the bytes).
fn extract_embedded(bytes: &[u8]) -> std::io::Result<PathBuf> {
    let name = format!(
        "kern-profile-{}-{:016x}.so",
        env!("CARGO_PKG_VERSION"),
        fnv1a(bytes)
    );
    let mut last_err = None;
    for dir in cache_dirs() {
        let path = dir.join(&name);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(path);
        }
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| crate::atomic_file::write_atomically(&path, |w| w.write_all(bytes)));
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

/// Whether this binary carries every plugin build.
pub fn has_embedded() -> bool {
    EMBEDDED.iter().all(|b| !b.is_empty())
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
    fn the_embedded_plugins_are_this_version_and_their_builds() {
        if !has_embedded() {
            eprintln!("built without embedded plugins (KP_EMBED_PLUGIN=0)");
            return;
        }
        for (b, bytes) in BUILDS.iter().zip(EMBEDDED) {
            assert_eq!(plugin_version(bytes).unwrap(), expected_version());
            assert_eq!(plugin_api(bytes), Ok(b.api));
            assert_eq!(check_bytes(bytes, b, "x"), Ok(()));
        }
        // The API-4 build offered to QEMU 11.1 names the one to use.
        let e = check_bytes(EMBEDDED[0], &BUILDS[1], "11.1.3").unwrap_err();
        assert!(
            e.contains("the build for QEMU 9.2 to 11.0 (plugin API 4), but QEMU 11.1.3 loads plugin API 7: use kern-profile-api7.so"),
            "{e}"
        );
    }

    #[test]
    fn paths_normalize_for_messages() {
        assert_eq!(
            normalize(Path::new("/usr/bin/../lib/kern-profile/kern-profile.so")),
            PathBuf::from("/usr/lib/kern-profile/kern-profile.so")
        );
    }
}
