//! A session's output directory: checked writable before QEMU starts, and left as it was
//! found when the session fails (a directory it created is removed again if empty).

use std::path::{Path, PathBuf};

use super::RecordError;

/// The raw file's name in the directory, once the recording is complete.
pub const RAW_NAME: &str = "cpu.raw";
/// Its name while QEMU writes it: a failed session leaves an earlier `cpu.raw` alone.
pub const RAW_PARTIAL_NAME: &str = "cpu.raw.recording";

/// The output directory of a session.
#[derive(Debug)]
pub struct OutputDir {
    pub path: PathBuf,
    /// The outermost directory the session made (removed again, with those inside it on
    /// the way to `path`, when the session fails and they are empty).
    created: Option<PathBuf>,
}

impl OutputDir {
    /// Creates `path` if needed and checks that files can be made in it.
    pub fn prepare(path: &Path) -> Result<Self, RecordError> {
        let err = |source| RecordError::OutputDir {
            dir: path.to_path_buf(),
            source,
        };
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let created = path
            .ancestors()
            .take_while(|a| !a.exists())
            .last()
            .map(Path::to_path_buf);
        std::fs::create_dir_all(&path).map_err(err)?;
        let dir = OutputDir {
            path: path.clone(),
            created,
        };
        // A probe file, removed at once: the permission bits do not tell (root, ACLs,
        // read-only mounts).
        match tempfile::Builder::new()
            .prefix(".kern-profile-probe-")
            .tempfile_in(&path)
        {
            Ok(_) => Ok(dir),
            Err(e) => {
                dir.discard();
                Err(err(e))
            }
        }
    }

    /// Where QEMU's plugin writes.
    pub fn raw_partial(&self) -> PathBuf {
        self.path.join(RAW_PARTIAL_NAME)
    }

    /// The complete recording.
    pub fn raw(&self) -> PathBuf {
        self.path.join(RAW_NAME)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A failed session: removes the partial recording, and the directory if this session
    /// created it and nothing else is in it.
    pub fn discard(&self) {
        let _ = std::fs::remove_file(self.raw_partial());
        let Some(top) = &self.created else { return };
        for d in self.path.ancestors() {
            if std::fs::remove_dir(d).is_err() || d == top {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritable_directories_are_named_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let e = OutputDir::prepare(&file.join("out"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot write to the output directory"), "{e}");
        assert!(e.contains("a-file/out"), "{e}");

        let fresh = dir.path().join("new/out");
        let out = OutputDir::prepare(&fresh).unwrap();
        assert!(fresh.is_dir());
        assert_eq!(
            std::fs::read_dir(&fresh).unwrap().count(),
            0,
            "probe removed"
        );
        std::fs::write(out.raw_partial(), b"partial").unwrap();
        out.discard();
        assert!(!dir.path().join("new").exists());
        // A directory that was there stays.
        let out = OutputDir::prepare(dir.path()).unwrap();
        out.discard();
        assert!(dir.path().exists());
    }
}
