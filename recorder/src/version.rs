//! Which QEMU the plugin needs. The numbers live once, in the workspace's `qemu-version.txt`,
//! compiled in here through `recorder/qemu-version.txt`, a symbolic link to it inside the
//! crate so that `cargo package` stores its content.

/// The workspace's `qemu-version.txt`.
pub const QEMU_VERSION_TXT: &str = include_str!("../qemu-version.txt");

/// The plugin API level the plugin is built against.
pub const PLUGIN_API: i32 = 4;

/// The value of `key=` in `qemu-version.txt`.
pub fn qemu_version_key(key: &str) -> Option<&'static str> {
    QEMU_VERSION_TXT.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The oldest QEMU the plugin loads on.
pub fn min_qemu_version() -> &'static str {
    qemu_version_key("min_version").unwrap_or("9.2")
}

/// QEMU's plugin API range does not include the level the plugin needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this QEMU supports plugin API versions {min} to {cur}, but kern-profile needs version {need}: use QEMU {min_qemu} or newer (a QEMU that still supports plugin API {need})"
)]
pub struct ApiMismatch {
    pub min: i32,
    pub cur: i32,
    pub need: i32,
    pub min_qemu: &'static str,
}

/// Checks QEMU's `info->version.{min,cur}` against [`PLUGIN_API`].
pub fn check_api(min: i32, cur: i32) -> Result<(), ApiMismatch> {
    if min <= PLUGIN_API && PLUGIN_API <= cur {
        Ok(())
    } else {
        Err(ApiMismatch {
            min,
            cur,
            need: PLUGIN_API,
            min_qemu: min_qemu_version(),
        })
    }
}

/// Extracts `X.Y.Z` from `qemu-system-* --version` output.
pub fn parse_qemu_version(output: &str) -> Option<&str> {
    let rest = output.split("QEMU emulator version ").nth(1)?;
    let v = rest
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?;
    (!v.is_empty()).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_constant_agree() {
        assert_eq!(min_qemu_version(), "9.2");
        assert_eq!(
            qemu_version_key("plugin_api").and_then(|v| v.parse().ok()),
            Some(PLUGIN_API)
        );
    }

    #[test]
    fn api_range() {
        assert!(check_api(0, 4).is_ok());
        assert!(check_api(4, 5).is_ok());
        let e = check_api(0, 3).unwrap_err().to_string();
        assert!(e.contains("QEMU 9.2 or newer"), "{e}");
        assert!(e.contains("versions 0 to 3"), "{e}");
        assert!(check_api(5, 6).is_err());
    }

    #[test]
    fn version_output() {
        let out = "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\nCopyright";
        assert_eq!(parse_qemu_version(out), Some("10.0.2"));
        assert_eq!(
            parse_qemu_version("QEMU emulator version 9.2.0\n"),
            Some("9.2.0")
        );
        assert_eq!(parse_qemu_version("nothing"), None);
    }
}
