//! QEMU 7.2, too old for the plugin (9.2 and later load it) but not for its gdbstub:
//! scripts/setup/qemu-7.2.sh unpacks Debian 12's beside the system's QEMU, and scripts/test.sh
//! names the directory of its wrappers in `KP_QEMU_72_BIN` for its QEMU 7.2 pass.

use std::path::PathBuf;

/// The QEMU 7.2 wrappers' directory (`KP_QEMU_72_BIN`) when its `qemu-system-i386` is there.
/// `None`, and the calling test returns, when the variable is unset (the system's and sid's
/// passes: the test is the 7.2 pass's) or, except under `KP_E2E=required` (which fails the
/// test), when the wrapper is missing; each with a message.
pub fn qemu_72_bin() -> Option<PathBuf> {
    let test = std::thread::current()
        .name()
        .unwrap_or("e2e test")
        .to_string();
    let Some(dir) = std::env::var_os("KP_QEMU_72_BIN").map(PathBuf::from) else {
        eprintln!(
            "skipping {test}: KP_QEMU_72_BIN is unset (scripts/test.sh sets it to the QEMU 7.2 \
             wrappers of scripts/setup/qemu-7.2.sh for its QEMU 7.2 pass)"
        );
        return None;
    };
    let qemu = dir.join("qemu-system-i386");
    if qemu.is_file() {
        return Some(dir);
    }
    let why = format!(
        "KP_QEMU_72_BIN names {}, which holds no qemu-system-i386 (run scripts/setup/qemu-7.2.sh)",
        dir.display()
    );
    if std::env::var("KP_E2E").as_deref() == Ok("required") {
        panic!("{test}: {why} (KP_E2E=required)");
    }
    eprintln!("skipping {test}: {why}");
    None
}
