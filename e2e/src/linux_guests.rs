//! The Linux guests `scripts/setup.sh --with-linux` fetches into target/linux/.

use std::path::{Path, PathBuf};

/// Whether every file of `files`, a Linux guest's in `dir`, was fetched; when one is
/// missing, panics under `KP_E2E=required`, otherwise prints why the test is skipped.
pub fn linux_guest_present(dir: &Path, files: &[PathBuf]) -> bool {
    let present = files.iter().all(|f| f.exists());
    if !present {
        let msg = format!(
            "no Linux guest in {}: run scripts/setup.sh --with-linux",
            dir.display()
        );
        assert!(
            std::env::var("KP_E2E").as_deref() != Ok("required"),
            "{msg} (KP_E2E=required)"
        );
        println!("skipped: {msg}");
    }
    present
}
