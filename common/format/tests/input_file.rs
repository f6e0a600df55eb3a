//! `open_input`: files and pipes open, streams that may never end do not.

use std::path::Path;

use kern_profile_format::open_input;

#[test]
fn endless_devices_are_refused_by_name() {
    for dev in ["/dev/zero", "/dev/urandom"] {
        let e = open_input(Path::new(dev)).expect_err(dev).to_string();
        assert!(
            e.contains("character device") && e.contains("never end"),
            "{dev}: {e}"
        );
    }
}

#[test]
fn directories_are_refused_and_files_open() {
    let dir = std::env::temp_dir().join(format!("kp-input-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = open_input(&dir).expect_err("a directory").to_string();
    assert!(e.contains("is a directory"), "{e}");
    let file = dir.join("f");
    std::fs::write(&file, b"x").unwrap();
    assert!(open_input(&file).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pipes_open() {
    // A pipe ends when its writer does: `kern-profile <(zcat raw.gz) kernel.elf` works.
    let dir = std::env::temp_dir().join(format!("kp-input-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("p");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let writer = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::write(fifo, b"abc").unwrap()
    });
    let mut f = open_input(&fifo).unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut got).unwrap();
    writer.join().unwrap();
    assert_eq!(got, b"abc");
    std::fs::remove_dir_all(&dir).unwrap();
}
