//! Debian's kernels as `scripts/setup.sh --with-linux` fetches them into target/linux/ of the
//! checkout, for the tests that read real images.

use std::path::{Path, PathBuf};

/// target/linux/DIR/vmlinuz, or None after saying why when it is absent; under
/// KP_REQUIRE_LINUX=1 an absent image fails the test instead.
pub fn linux_image(dir: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/linux")
        .join(dir)
        .join("vmlinuz");
    if path.exists() {
        return Some(path);
    }
    let msg = format!(
        "no Linux image at {}: run `bash scripts/setup.sh --with-linux`",
        path.display()
    );
    assert!(
        std::env::var("KP_REQUIRE_LINUX").as_deref() != Ok("1"),
        "{msg} (KP_REQUIRE_LINUX=1)"
    );
    println!("skipped: {msg}");
    None
}
