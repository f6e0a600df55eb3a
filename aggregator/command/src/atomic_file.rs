//! Output files written whole or not at all: a temporary file in the target's directory,
//! renamed over the target once everything is written, so that a failed or interrupted run
//! leaves neither an empty nor a half-written file behind.
//!
//! A target that exists and is not a regular file (`/dev/null`, `/dev/stdout`, a FIFO) is
//! written in place: renaming over it would replace the device itself. A symbolic link is
//! followed, so that the file it names is replaced, not the link.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::TempPath;

/// A file being written: at `path` only after [`AtomicFile::commit`]. Dropped uncommitted,
/// the temporary file is removed.
pub struct AtomicFile {
    target: Target,
}

enum Target {
    /// Renamed to `path` on commit; `temp` removes the file when dropped. Written through
    /// a plain `File`: errors are the system's, without the temporary file's name.
    Temp {
        path: PathBuf,
        file: BufWriter<File>,
        temp: TempPath,
    },
    /// A device or FIFO, written as it goes.
    InPlace(BufWriter<File>),
}

impl AtomicFile {
    /// Starts writing `path` (in a temporary file next to it, or in place for a device).
    pub fn create(path: &Path) -> io::Result<Self> {
        let named = |e: io::Error| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        };
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(named)?;
            return Ok(AtomicFile {
                target: Target::InPlace(BufWriter::new(file)),
            });
        }
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".kern-profile-");
        // As `File::create` would: 0666 less the umask (a temporary file is 0600 otherwise).
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let (file, temp) = builder.tempfile_in(dir).map_err(named)?.into_parts();
        Ok(AtomicFile {
            target: Target::Temp {
                path,
                file: BufWriter::new(file),
                temp,
            },
        })
    }

    /// Flushes and moves the file to its path.
    pub fn commit(self) -> io::Result<()> {
        match self.target {
            Target::Temp { path, file, temp } => {
                let file = file.into_inner().map_err(|e| e.into_error())?;
                file.sync_all()?;
                temp.persist(&path).map_err(|e| e.error)?;
            }
            Target::InPlace(mut file) => file.flush()?,
        }
        Ok(())
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.target {
            Target::Temp { file, .. } => file,
            Target::InPlace(file) => file,
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}

/// Writes `path` through `f`, atomically.
pub fn write_atomically(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut file = AtomicFile::create(path)?;
    f(&mut file)?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_at_the_path_until_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let mut f = AtomicFile::create(&path).unwrap();
        f.write_all(b"half").unwrap();
        f.flush().unwrap();
        assert!(!path.exists());
        drop(f);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        write_atomically(&path, |w| w.write_all(b"whole")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"whole");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let plain = dir.path().join("plain.txt");
            std::fs::File::create(&plain).unwrap();
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), mode(&plain), "the mode File::create gives");
        }
    }

    #[test]
    fn a_device_is_written_in_place_not_replaced() {
        let null = Path::new("/dev/null");
        write_atomically(null, |w| w.write_all(b"gone")).unwrap();
        let meta = std::fs::metadata(null).unwrap();
        assert!(!meta.is_file(), "/dev/null must stay a device");
        assert_eq!(std::fs::read(null).unwrap(), b"");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        std::fs::write(&real, b"old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomically(&link, |w| w.write_all(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
    }
}
