//! Which QEMU each plugin build loads on. The numbers live once, in the workspace's
//! `qemu-version.txt`, compiled in here through `common/format/qemu-version.txt`, a symbolic link to
//! it inside the crate so that `cargo package` stores its content.
//!
//! QEMU 11.1 changed the plugin ABI in place (API 7: callbacks without the plugin id, with a
//! userdata pointer) and loads no plugin built for an older API, while 9.2 to 11.0 load API 4:
//! one `.so` cannot load on both, so kern-profile ships one build per ABI ([`BUILDS`]) and
//! `record` picks the one the QEMU it runs loads ([`build_for_qemu`]).

/// The workspace's `qemu-version.txt`.
pub const QEMU_VERSION_TXT: &str = include_str!("../qemu-version.txt");

/// The value of `key=` in `qemu-version.txt`.
pub fn qemu_version_key(key: &str) -> Option<&'static str> {
    QEMU_VERSION_TXT.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The oldest QEMU a plugin build loads on.
pub fn min_qemu_version() -> &'static str {
    qemu_version_key("min_version").unwrap_or("9.2")
}

/// The first QEMU with the discontinuity callback (`trigger=interrupt`).
pub fn discon_qemu_version() -> &'static str {
    qemu_version_key("discon_qemu").unwrap_or("10.2")
}

/// One plugin build: the plugin API it is compiled for, and the QEMUs that load it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Build {
    /// The plugin API level (`qemu_plugin_version`).
    pub api: i32,
    /// Its installed file name (beside `kern-profile`, or in `/usr/lib/kern-profile/`).
    pub file: &'static str,
    /// `qemu-version.txt`'s key for its QEMU range.
    key: &'static str,
}

/// Every plugin build, oldest API first.
pub const BUILDS: [Build; 2] = [
    Build {
        api: 4,
        file: "kern-profile.so",
        key: "api4_qemu",
    },
    Build {
        api: 7,
        file: "kern-profile-api7.so",
        key: "api7_qemu",
    },
];

impl Build {
    /// The build for plugin API `api`.
    pub fn for_api(api: i32) -> Option<&'static Build> {
        BUILDS.iter().find(|b| b.api == api)
    }

    /// The first QEMU that loads it.
    pub fn first_qemu(&self) -> &'static str {
        self.range().0
    }

    /// The last QEMU that loads it (`None`: every later one so far).
    pub fn last_qemu(&self) -> Option<&'static str> {
        self.range().1
    }

    fn range(&self) -> (&'static str, Option<&'static str>) {
        let r = qemu_version_key(self.key).unwrap_or("");
        let (first, last) = r.split_once('-').unwrap_or((r, ""));
        (first.trim(), Some(last.trim()).filter(|l| !l.is_empty()))
    }

    /// Its QEMUs for messages: `QEMU 9.2 to 11.0`, `QEMU 11.1 or newer`.
    pub fn qemu_range(&self) -> String {
        match self.last_qemu() {
            Some(last) => format!("QEMU {} to {last}", self.first_qemu()),
            None => format!("QEMU {} or newer", self.first_qemu()),
        }
    }

    /// Whether QEMU `version` (`X.Y.Z`) loads it.
    pub fn loads_on(&self, version: &str) -> bool {
        version_at_least(version, self.first_qemu())
            && self
                .last_qemu()
                .is_none_or(|last| !version_at_least(version, &next_minor(last)))
    }

    /// Whether QEMU's `info->version.{min,cur}` range admits it.
    pub fn admitted(&self, min: i32, cur: i32) -> bool {
        min <= self.api && self.api <= cur
    }
}

/// `11.0` → `11.1`: the first version after a release series.
fn next_minor(v: &str) -> String {
    let mut parts = v.split('.');
    let major = parts.next().unwrap_or("0");
    let minor: u64 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    format!("{major}.{}", minor + 1)
}

/// No plugin build loads on this QEMU.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("QEMU {found} is too old for kern-profile's plugin: it needs QEMU {min} or newer (plugin API 4 arrived in 9.2)")]
pub struct TooOld {
    pub found: String,
    pub min: &'static str,
}

/// The plugin build QEMU `version` (`X.Y.Z` of `--version`) loads.
pub fn build_for_qemu(version: &str) -> Result<&'static Build, TooOld> {
    BUILDS
        .iter()
        .rev()
        .find(|b| b.loads_on(version))
        .ok_or_else(|| TooOld {
            found: version.to_string(),
            min: min_qemu_version(),
        })
}

/// QEMU's plugin API range does not admit this build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", mismatch_message(self.build, self.min, self.cur, self.qemu.as_deref()))]
pub struct ApiMismatch {
    pub build: &'static Build,
    pub min: i32,
    pub cur: i32,
    /// The running QEMU's version, when known.
    pub qemu: Option<String>,
}

fn mismatch_message(build: &Build, min: i32, cur: i32, qemu: Option<&str>) -> String {
    let which = qemu.map_or_else(|| "this QEMU".to_string(), |v| format!("QEMU {v}"));
    let fit = BUILDS.iter().find(|b| b.admitted(min, cur));
    let remedy = match fit {
        Some(b) => format!(
            "use the API-{} build, {} (beside this one; `kern-profile record` picks it by itself)",
            b.api, b.file
        ),
        None => format!("use QEMU {} or newer", min_qemu_version()),
    };
    format!(
        "this plugin file is the build for {} (plugin API {}), but {which} loads plugin API {min} to {cur}: {remedy}",
        build.qemu_range(),
        build.api
    )
}

/// Checks QEMU's `info->version.{min,cur}` against `build`.
pub fn check_api(
    build: &'static Build,
    min: i32,
    cur: i32,
    qemu: Option<&str>,
) -> Result<(), ApiMismatch> {
    if build.admitted(min, cur) {
        Ok(())
    } else {
        Err(ApiMismatch {
            build,
            min,
            cur,
            qemu: qemu.map(String::from),
        })
    }
}

/// What a build says when the QEMU that opened it (version `qemu`) will refuse it, before
/// QEMU's own message ("plugin requires API version 4, but this QEMU supports only a
/// minimum version of 7"); `None` when it fits or the version is unknown.
pub fn misfit_message(build: &'static Build, qemu: &str) -> Option<String> {
    if build.loads_on(qemu) {
        return None;
    }
    let remedy = match build_for_qemu(qemu) {
        Ok(b) => format!(
            "QEMU {qemu} loads the API-{} build, {} (beside this one; `kern-profile record` picks it by itself)",
            b.api, b.file
        ),
        Err(e) => e.to_string(),
    };
    Some(format!(
        "kern-profile: this plugin file is the build for {} (plugin API {}): {remedy}",
        build.qemu_range(),
        build.api
    ))
}

/// Whether dotted version `have` is at least `min` (`10.0.2` >= `9.2`).
pub fn version_at_least(have: &str, min: &str) -> bool {
    let parse = |v: &str| -> Vec<u64> {
        v.split('.')
            .map(|p| {
                p.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    };
    let (mut a, mut b) = (parse(have), parse(min));
    let n = a.len().max(b.len());
    a.resize(n, 0);
    b.resize(n, 0);
    a >= b
}

/// Extracts `X.Y.Z` from `qemu-system-* --version` output.
pub fn parse_qemu_version(output: &str) -> Option<&str> {
    let rest = output.split("QEMU emulator version ").nth(1)?;
    let v = rest
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?;
    (!v.is_empty() && v.starts_with(|c: char| c.is_ascii_digit())).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_builds_agree() {
        assert_eq!(min_qemu_version(), "9.2");
        assert_eq!(BUILDS[0].qemu_range(), "QEMU 9.2 to 11.0");
        assert_eq!(BUILDS[1].qemu_range(), "QEMU 11.1 or newer");
        assert_eq!(discon_qemu_version(), "10.2");
        assert_eq!(
            Build::for_api(7).map(|b| b.file),
            Some("kern-profile-api7.so")
        );
    }

    #[test]
    fn each_qemu_gets_its_build() {
        for (v, api) in [
            ("9.2.0", 4),
            ("10.0.2", 4),
            ("10.2.1", 4),
            ("11.0", 4),
            ("11.0.4", 4),
            ("11.1.3", 7),
            ("11.2.0", 7),
            ("12.0.0", 7),
        ] {
            assert_eq!(build_for_qemu(v).map(|b| b.api), Ok(api), "{v}");
        }
        let e = build_for_qemu("8.2.2").unwrap_err().to_string();
        assert!(
            e.contains("QEMU 8.2.2 is too old") && e.contains("9.2 or newer"),
            "{e}"
        );
    }

    #[test]
    fn api_range() {
        let v4 = &BUILDS[0];
        assert!(check_api(v4, 0, 4, None).is_ok());
        assert!(check_api(v4, 2, 6, None).is_ok());
        let e = check_api(v4, 7, 7, Some("11.1.3")).unwrap_err().to_string();
        assert!(
            e.contains("build for QEMU 9.2 to 11.0 (plugin API 4)"),
            "{e}"
        );
        assert!(e.contains("QEMU 11.1.3 loads plugin API 7 to 7"), "{e}");
        assert!(e.contains("kern-profile-api7.so"), "{e}");
        let e = check_api(v4, 0, 3, None).unwrap_err().to_string();
        assert!(e.contains("use QEMU 9.2 or newer"), "{e}");
    }

    #[test]
    fn a_misfit_build_names_the_right_one() {
        let (v4, v7) = (&BUILDS[0], &BUILDS[1]);
        assert_eq!(misfit_message(v4, "10.0.2"), None);
        assert_eq!(misfit_message(v7, "11.1.3"), None);
        let m = misfit_message(v4, "11.1.3").unwrap();
        assert!(m.contains("kern-profile-api7.so"), "{m}");
        let m = misfit_message(v7, "10.0.2").unwrap();
        assert!(m.contains("API-4 build, kern-profile.so"), "{m}");
        let m = misfit_message(v7, "7.2.0").unwrap();
        assert!(m.contains("too old"), "{m}");
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(version_at_least("10.0.2", "9.2"));
        assert!(version_at_least("9.2.0", "9.2"));
        assert!(version_at_least("9.2", "9.2.0"));
        assert!(!version_at_least("9.1.3", "9.2"));
        assert!(!version_at_least("8.2.0", "9.2"));
        assert!(version_at_least("11.0.50", "11.0"));
        assert!(!version_at_least("11.0.50", "11.1"));
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
        assert_eq!(parse_qemu_version("QEMU emulator version .x"), None);
    }
}
