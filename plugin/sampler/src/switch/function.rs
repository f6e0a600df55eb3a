//! `switches=FUNCTION`: the switch function's entry, by its name in the ELF's symbol table.

use object::{Object, ObjectSymbol, SymbolKind};

/// The address of the function `name` defined in `elf` (an ELF file's bytes), if any.
pub fn function_address(elf: &[u8], name: &str) -> Option<u64> {
    let file = object::File::parse(elf).ok()?;
    file.symbols()
        .find(|s| s.is_definition() && s.kind() == SymbolKind::Text && s.name().ok() == Some(name))
        .map(|s| s.address())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_kernels_switch_function() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/examples");
        for elf in [
            "kernel.elf",
            "kernel64.elf",
            "kernel-riscv64.elf",
            "kernel-aarch64.elf",
        ] {
            let Ok(bytes) = std::fs::read(root.join(elf)) else {
                continue;
            };
            assert!(function_address(&bytes, "switch_to").is_some(), "{elf}");
            // A variable is no function.
            assert_eq!(function_address(&bytes, "CURRENT_TASK"), None, "{elf}");
        }
        assert_eq!(function_address(b"junk", "switch_to"), None);
    }
}
