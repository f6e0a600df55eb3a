//! Embeds kern-profile's QEMU plugin builds (one per plugin ABI: API 4 for QEMU 9.2 to 11.0,
//! API 7 for 11.1 and later) into the `kern-profile` binary, so that a binary built anywhere,
//! `cargo install --path aggregator/command` included, can run `kern-profile record` on any of those
//! QEMUs with nothing else installed (`src/record/plugin.rs` writes the one QEMU loads to a
//! cache file).
//!
//! The plugins are built by a nested `cargo build --release -p kern-profile-plugin-api4 -p
//! kern-profile-plugin-api7` of this workspace, into its own target directory beside the outer
//! one (`kern-profile-plugin-embed`), so they are built once and then only when their sources
//! change. `KP_EMBED_PLUGIN` changes that: a directory embeds the `kern-profile.so` and
//! `kern-profile-api7.so` in it as they are (the packaging scripts, which built them already);
//! `0` embeds nothing (the binary then needs the plugins installed beside it). A build that
//! cannot make the plugins (no workspace around the crate) warns and embeds nothing.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KP_EMBED_PLUGIN");
    let chosen: Option<[PathBuf; 2]> = match env::var("KP_EMBED_PLUGIN").ok().as_deref() {
        Some("0") | Some("off") | Some("no") => None,
        Some(dir) if !dir.is_empty() => {
            let files = BUILDS.map(|(file, _)| Path::new(dir).join(file));
            for f in &files {
                println!("cargo:rerun-if-changed={}", f.display());
            }
            Some(files)
        }
        _ => build_plugins(&out),
    };
    let empty = out.join("no-plugin.so");
    std::fs::write(&empty, b"").expect("OUT_DIR is writable");
    let paths = chosen.unwrap_or_else(|| [empty.clone(), empty.clone()]);
    for ((_, var), path) in BUILDS.iter().zip(paths) {
        println!("cargo:rustc-env={var}={}", path.display());
    }
}

/// Each plugin build's installed file name and the variable its embedded path goes in, in the
/// order of `format::qemu::BUILDS`.
const BUILDS: [(&str, &str); 2] = [
    ("kern-profile.so", "KP_EMBEDDED_PLUGIN_API4"),
    ("kern-profile-api7.so", "KP_EMBEDDED_PLUGIN_API7"),
];

/// Builds the plugins of the workspace around this crate; `None` (with a warning) when it
/// cannot.
fn build_plugins(out: &Path) -> Option<[PathBuf; 2]> {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let ws = manifest.parent()?.parent()?;
    if !ws.join("plugin/tcg/Cargo.toml").exists() {
        println!(
            "cargo:warning=no plugin/ beside aggregator/: kern-profile is built without its plugin (install kern-profile.so beside the binary)"
        );
        return None;
    }
    for dep in [
        "plugin/tcg",
        "plugin/api4",
        "plugin/api7",
        "plugin/sampler",
        "common/symbols",
        "common/unwind",
        "common/arch",
        "common/format",
        "common/linux-image",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            ws.join(dep).join("src").display()
        );
        println!(
            "cargo:rerun-if-changed={}",
            ws.join(dep).join("Cargo.toml").display()
        );
    }
    println!("cargo:rerun-if-changed={}", ws.join("Cargo.lock").display());
    println!(
        "cargo:rerun-if-changed={}",
        ws.join("qemu-version.txt").display()
    );
    // OUT_DIR is <target>/<profile>/build/<package>/out.
    let target = out.ancestors().nth(4).unwrap_or(out);
    let target = target.join("kern-profile-plugin-embed");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    // No stdin: cargo's rustc probe would read whatever the outer build was given.
    cmd.stdin(std::process::Stdio::null());
    cmd.args(["build", "--release", "--quiet"])
        .args([
            "-p",
            "kern-profile-plugin-api4",
            "-p",
            "kern-profile-plugin-api7",
        ])
        .arg("--manifest-path")
        .arg(ws.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target);
    // What the outer cargo set for this crate's build (clippy's wrapper, the target
    // directory, encoded flags) is not for the plugin.
    // No debug info in the copy carried inside the binary: QEMU never shows it.
    cmd.env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    for var in [
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    match cmd.output() {
        Ok(o) if o.status.success() => {
            let so = [4, 7]
                .map(|api| target.join(format!("release/libkern_profile_plugin_api{api}.so")));
            so.iter().all(|p| p.exists()).then_some(so)
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            println!("cargo:warning=building the plugins to embed failed; kern-profile is built without them:");
            for line in err
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                println!("cargo:warning={line}");
            }
            None
        }
        Err(e) => {
            println!("cargo:warning=cannot run cargo to build the plugins to embed ({e}); kern-profile is built without them");
            None
        }
    }
}
