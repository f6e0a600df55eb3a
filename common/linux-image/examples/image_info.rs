//! Prints what kern-profile-linux-image finds in a kernel image: the container, the
//! compression, the kernel's size and architecture, the kallsyms count, and the time taken.
//!
//! usage: cargo run --release -p kern-profile-linux-image --example image_info -- IMAGE...
//!        ... --example image_info -- --dump IMAGE   (its symbols as /proc/kallsyms lists them)
//! (default: target/linux/x86_64/vmlinuz)

use std::path::PathBuf;
use std::time::Instant;

use kern_profile_linux_image::{open, Options};

fn main() {
    let mut paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let dump = paths.first().is_some_and(|p| p.as_os_str() == "--dump");
    if dump {
        paths.remove(0);
    }
    if paths.is_empty() {
        paths.push(PathBuf::from("target/linux/x86_64/vmlinuz"));
    }
    let mut failed = false;
    for path in paths {
        let start = Instant::now();
        let image = match open(&path, &Options::default()) {
            Ok(image) => image,
            Err(e) => {
                eprintln!("{e}");
                failed = true;
                continue;
            }
        };
        let unpacked = start.elapsed();
        let arch = image.arch().map_or("unknown".into(), |a| a.to_string());
        let compression = image.compression.map_or("none".into(), |c| c.to_string());
        // In --dump mode stdout is the symbol list alone.
        let summary = format!(
            "{}: {:?}, compression {compression} at {:#x}, kernel {} bytes ({}, {arch}), unpacked in {:.2} s",
            path.display(),
            image.container,
            image.payload_offset,
            image.bytes.len(),
            if image.is_elf() { "ELF" } else { "raw Image" },
            unpacked.as_secs_f64()
        );
        if dump {
            eprintln!("{summary}");
        } else {
            println!("{summary}");
        }
        match image.kallsyms() {
            Ok(k) if dump => {
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                if let Err(e) = k.write_proc_format(&mut out, image.pointer_size()) {
                    eprintln!("{e}");
                    failed = true;
                }
            }
            Ok(k) => println!(
                "  kallsyms: {} symbols ({:?}, addresses after the tokens: {}), _text {}, in {:.2} s (total {:.2} s)",
                k.symbols.len(),
                k.layout.encoding,
                k.layout.addresses_after_tokens,
                k.text.map_or("none".into(), |t| format!("{t:#x}")),
                (start.elapsed() - unpacked).as_secs_f64(),
                start.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("  {e}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
