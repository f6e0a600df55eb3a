//! The Debian package: scripts/package.sh builds it from the tested binary and plugin, it
//! unpacks into a clean directory tree (dpkg-deb -x, as apt would lay it out, without root),
//! and `kern-profile record` runs from there, finding the plugin the package installed.

use std::process::{Command, Stdio};
use std::time::Duration;

use kern_profile_e2e::{
    bin, hottest, output_with_timeout, plugin, plugin_build_file, qemu_console, root, scratch,
    skip_i386, skip_unless, Need,
};

fn run(c: &mut Command) -> String {
    let out = c.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_package_installs_into_a_clean_tree_and_records() {
    if skip_i386() || skip_unless(&[Need::Program("dpkg-deb")]) {
        return;
    }
    let dir = scratch("package");
    let out = run(Command::new("bash")
        .arg(root().join("scripts/package.sh"))
        .arg("--bin")
        .arg(bin())
        .arg("--plugins")
        .arg(plugin().parent().unwrap())
        .arg("--out")
        .arg(&dir));
    let deb = out.lines().last().unwrap().trim().to_string();
    assert!(
        deb.ends_with(".deb") && std::path::Path::new(&deb).exists(),
        "{out}"
    );
    let field = |f: &str| run(Command::new("dpkg-deb").args(["-f", &deb, f]));
    assert_eq!(field("Package").trim(), "kern-profile");
    assert!(field("Depends").contains("libc6"));
    assert!(field("Recommends").contains("qemu-system-x86 (>= 1:9.2~)"));
    let listing = run(Command::new("dpkg-deb").args(["-c", &deb]));
    for f in [
        "./usr/bin/kern-profile",
        "./usr/lib/kern-profile/kern-profile.so",
        "./usr/lib/kern-profile/kern-profile-api7.so",
        "./usr/share/man/man1/kern-profile.1.gz",
        "./usr/share/man/man1/kern-profile-record.1.gz",
        "./usr/share/bash-completion/completions/kern-profile",
        "./usr/share/zsh/vendor-completions/_kern-profile",
        "./usr/share/fish/vendor_completions.d/kern-profile.fish",
    ] {
        assert!(listing.contains(f), "{f} not in the package:\n{listing}");
    }

    let tree = dir.join("root");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree));
    let kp = tree.join("usr/bin/kern-profile");
    assert!(run(Command::new(&kp).arg("--version")).starts_with("kern-profile "));
    let qemu = qemu_console("");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut c = Command::new(&kp);
    c.current_dir(&work)
        .args(["record", "--"])
        .arg(qemu.get_program())
        .args(qemu.get_args())
        .stdin(Stdio::null())
        .env("XDG_CACHE_HOME", dir.join("cache"));
    let out = output_with_timeout(c, Duration::from_secs(300));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(33), "{stderr}");
    let installed = tree
        .canonicalize()
        .unwrap()
        .join("usr/lib/kern-profile")
        .join(plugin_build_file());
    assert!(
        stderr.contains(&format!("with plugin {} (installed)", installed.display())),
        "{stderr}"
    );
    assert!(stderr.contains(&hottest()), "{stderr}");
    for f in ["cpu.svg", "report.txt", "profile.json", "cpu.raw"] {
        assert!(work.join("kern-profile-out").join(f).exists(), "{f}");
    }
}
