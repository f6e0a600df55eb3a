//! Opening an input: a stream that can never end is refused before anything is read, and a
//! file that should be an ELF is refused by its first bytes before the rest is read.

use std::fs::{File, FileType};
use std::io::{self, Read};
use std::path::Path;

/// The first bytes of every ELF file.
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// What [`read_elf_input`] found.
#[derive(Debug)]
pub enum ElfInput {
    /// The whole file, which starts with [`ELF_MAGIC`].
    Elf(Vec<u8>),
    /// Not an ELF: its first bytes (up to [`ELF_PROBE`]), read without the rest.
    NotElf(Vec<u8>),
}

/// Bytes read before the ELF magic is checked: enough to tell what else a file is (a Linux
/// bzImage says `HdrS` at 0x202).
pub const ELF_PROBE: u64 = 1024;

/// Reads an ELF file whole, after [`open_input`]'s checks and once its first bytes are the
/// ELF magic: a large file that is no ELF (a disk image, a 2 GB sparse file) costs
/// [`ELF_PROBE`] bytes.
pub fn read_elf_input(path: &Path) -> io::Result<ElfInput> {
    let mut file = open_input(path)?;
    let mut data = Vec::new();
    (&mut file).take(ELF_PROBE).read_to_end(&mut data)?;
    if !data.starts_with(ELF_MAGIC) {
        return Ok(ElfInput::NotElf(data));
    }
    file.read_to_end(&mut data)?;
    Ok(ElfInput::Elf(data))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elf_is_read_whole_and_anything_else_only_probed() {
        let dir = tempfile::tempdir().unwrap();
        let elf = dir.path().join("k.elf");
        let mut bytes = ELF_MAGIC.to_vec();
        bytes.resize(5000, 7);
        std::fs::write(&elf, &bytes).unwrap();
        assert!(matches!(read_elf_input(&elf).unwrap(), ElfInput::Elf(d) if d == bytes));
        let big = dir.path().join("disk.img");
        let f = File::create(&big).unwrap();
        f.set_len(1 << 31).unwrap();
        match read_elf_input(&big).unwrap() {
            ElfInput::NotElf(first) => assert_eq!(first.len() as u64, ELF_PROBE),
            ElfInput::Elf(_) => panic!("zeros taken for an ELF"),
        }
        let dev = Path::new("/dev/zero");
        assert!(read_elf_input(dev).is_err(), "an endless device is refused");
    }
}
