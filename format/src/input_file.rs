//! Opening an input: a stream that can never end is refused before anything is read.

use std::fs::{File, FileType};
use std::io;
use std::path::Path;

/// Opens `path` for reading. Regular files and pipes are accepted (a pipe ends when its
/// writer does); a directory is an error, and so is a character device or a socket, which
/// may never end (`/dev/zero` would be an endless valid legacy file).
pub fn open_input(path: &Path) -> io::Result<File> {
    let file = File::open(path)?;
    check_kind(&file)?;
    Ok(file)
}

fn check_kind(file: &File) -> io::Result<()> {
    let kind = file.metadata()?.file_type();
    if kind.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is a directory",
        ));
    }
    match endless_kind(&kind) {
        Some(what) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {what}, a stream that may never end: give a file or a pipe"),
        )),
        None => Ok(()),
    }
}

#[cfg(unix)]
fn endless_kind(kind: &FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

#[cfg(not(unix))]
fn endless_kind(_: &FileType) -> Option<&'static str> {
    None
}
