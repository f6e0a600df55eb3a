//! The `alloc=SPEC` description: `Spec::parse`, then its resolution against a symbol map.
//! The input is the SPEC text, optionally followed by a NUL and a symbol map (`nm` layout);
//! without one, every function the SPEC names gets a symbol, so that resolution gets past
//! the lookups. Arguments come from made-up DWARF parameters (every other function) or
//! from the calling convention.

use std::hint::black_box;

use kern_profile_format::Arch;
use kern_profile_sampler::alloc_hooks::args::Location;
use kern_profile_sampler::alloc_hooks::dwarf::Param;
use kern_profile_sampler::alloc_hooks::resolve::resolve;
use kern_profile_sampler::alloc_hooks::symbols::{Symbol, SymbolIndex};
use kern_profile_sampler::alloc_hooks::Spec;

use crate::bounded;

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    let (spec_bytes, map) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let text = String::from_utf8_lossy(spec_bytes);
    let spec = match Spec::parse("fuzz.spec", &text) {
        Ok(spec) => spec,
        Err(e) => {
            black_box(e.to_string());
            return;
        }
    };
    let index = match map {
        Some(m) => SymbolIndex::from_map(&String::from_utf8_lossy(m)),
        None => symbols_for(&spec),
    };
    for arch in [Arch::I386, Arch::X86_64, Arch::Riscv64, Arch::Aarch64] {
        match resolve(&spec, &index, &made_up_params, arch, "fuzz") {
            Ok(set) => {
                for h in &set.hooks {
                    assert_eq!(set.at(h.entry).map(|x| x.id), Some(h.id), "{h:?}");
                }
                black_box(set.registers());
            }
            Err(e) => {
                black_box(e.to_string());
            }
        }
    }
}

/// A symbol for each function the SPEC names, 16 bytes apart.
fn symbols_for(spec: &Spec) -> SymbolIndex {
    let symbols = spec
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| Symbol {
            name: f.function.clone(),
            addr: 0x1000 + 16 * i as u64,
        })
        .collect();
    SymbolIndex::new(symbols)
}

/// DWARF parameters for every other function: the usual names, in a register, on the
/// stack, or without a usable location.
fn made_up_params(addr: u64) -> Option<Vec<Param>> {
    if addr & 16 != 0 {
        return None;
    }
    let param = |name: &str, location| Param {
        name: name.into(),
        location,
    };
    Some(vec![
        param("size", Ok(Location::Register("eax"))),
        param("ptr", Ok(Location::Stack(8))),
        param("n", Ok(Location::Register("rdi"))),
        param("count", Err("an optimised-out location".into())),
        param("order", Ok(Location::Stack(-4))),
    ])
}
