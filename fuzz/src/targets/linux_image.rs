//! Linux images and their kallsyms: `parse` over any bytes (ELF, bzImage with any
//! compression, arm64/riscv64 Image, a compressed file) with a small unpacking cap, then
//! the kallsyms scan of what came out, and the scan straight over the input at both
//! pointer sizes. Errors are formatted (every variant names the file).

use std::hint::black_box;
use std::path::Path;

use crate::bounded;
use kern_profile_linux_image::{parse, read_kallsyms, Arch, Kallsyms, Options};

/// Unpacked kernels stop here: the symbols of a cap's worth of tables fit the heap budget.
const CAP: u64 = 1 << 20;

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || check(data));
}

fn probe(kallsyms: &Kallsyms) {
    let probes = kallsyms
        .symbols
        .iter()
        .take(16)
        .flat_map(|s| [s.address, s.address.wrapping_add(s.size)]);
    for p in probes.chain([0, u64::MAX]) {
        black_box(kallsyms.lookup(p));
    }
    black_box((
        kallsyms.address_of("_text"),
        kallsyms.text,
        kallsyms.image_base,
    ));
}

fn check(data: &[u8]) {
    let path = Path::new("fuzz.img");
    match parse(path, data.to_vec(), &Options { max_payload: CAP }) {
        Ok(image) => {
            for arch in Arch::ALL {
                black_box(image.check_arch(arch).map_err(|e| e.to_string()).err());
            }
            match image.kallsyms() {
                Ok(k) => {
                    probe(&k);
                    black_box(image.virtual_base(&k));
                }
                Err(e) => {
                    black_box(e.to_string());
                }
            }
        }
        Err(e) => {
            black_box(e.to_string());
        }
    }
    for ptr in [4, 8] {
        match read_kallsyms(path, data, ptr) {
            Ok(k) => probe(&k),
            Err(e) => {
                black_box(e.to_string());
            }
        }
    }
}
