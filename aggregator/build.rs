//! Embeds kern-profile's QEMU plugin into the `kern-profile` binary, so that a binary built
//! anywhere, `cargo install --path aggregator` included, can run `kern-profile record` with
//! nothing else installed (`src/record/plugin.rs` writes it to a cache file for QEMU).
//!
//! The plugin is built by a nested `cargo build --release -p kern-profile-plugin` of this
//! workspace, into its own target directory beside the outer one (`kern-profile-plugin-embed`),
//! so it is built once and then only when its sources change. `KP_EMBED_PLUGIN` changes that:
//! a path embeds that `.so` as is (the packaging scripts, which built it already); `0` embeds
//! nothing (the binary then needs the plugin installed beside it). A build that cannot make the
//! plugin (no workspace around the crate) warns and embeds nothing.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KP_EMBED_PLUGIN");
    let chosen = match env::var("KP_EMBED_PLUGIN").ok().as_deref() {
        Some("0") | Some("off") | Some("no") => None,
        Some(path) if !path.is_empty() => {
            println!("cargo:rerun-if-changed={path}");
            Some(PathBuf::from(path))
        }
        _ => build_plugin(&out),
    };
    let path = chosen.unwrap_or_else(|| {
        let empty = out.join("no-plugin.so");
        std::fs::write(&empty, b"").expect("OUT_DIR is writable");
        empty
    });
    println!("cargo:rustc-env=KP_EMBEDDED_PLUGIN={}", path.display());
}

/// Builds the plugin of the workspace around this crate; `None` (with a warning) when it
/// cannot.
fn build_plugin(out: &Path) -> Option<PathBuf> {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let ws = manifest.parent()?;
    if !ws.join("plugin/Cargo.toml").exists() {
        println!(
            "cargo:warning=no plugin/ beside the aggregator: kern-profile is built without its plugin (install kern-profile.so beside the binary)"
        );
        return None;
    }
    for dep in ["plugin", "recorder", "unwind", "format"] {
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
    cmd.args(["build", "--release", "--quiet", "-p", "kern-profile-plugin"])
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
            let so = target.join("release/libkern_profile_plugin.so");
            so.exists().then_some(so)
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            println!("cargo:warning=building the plugin to embed failed; kern-profile is built without it:");
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
            println!("cargo:warning=cannot run cargo to build the plugin to embed ({e}); kern-profile is built without it");
            None
        }
    }
}
