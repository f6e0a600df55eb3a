//! Where a hooked function's arguments are at its first instruction, and reading them there:
//! by calling convention (`argN`), or from a DWARF location ([`super::dwarf`]) turned into the
//! same two kinds of place.

use kern_profile_arch::{guest, Arch};

use super::spec::Convention;

/// Where a value is at the function's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// A register, by the name QEMU gives it (`ecx`, `rdi`, ...).
    Register(&'static str),
    /// The word at SP + offset (SP at entry).
    Stack(i64),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Register(r) => f.write_str(r),
            Location::Stack(off) => write!(f, "[sp{off:+}]"),
        }
    }
}

/// The registers the C calling conventions pass arguments in, first to last.
fn argument_registers(arch: Arch, conv: Convention) -> &'static [&'static str] {
    guest(arch).argument_registers(conv)
}

/// Bytes between SP at entry and the first argument passed on the stack: the return address
/// on x86 (`call` pushed it), nothing where it is in a register.
fn stack_args_offset(arch: Arch) -> i64 {
    match guest(arch).return_address_on_stack() {
        true => arch.ptr_width() as i64,
        false => 0,
    }
}

/// The Nth argument (0 is the first) of a function following `conv`, at its entry. Every
/// argument is taken as one word.
pub fn convention_arg(arch: Arch, conv: Convention, n: u8) -> Location {
    let regs = argument_registers(arch, conv);
    match regs.get(n as usize) {
        Some(r) => Location::Register(r),
        None => {
            let k = n as i64 - regs.len() as i64;
            Location::Stack(stack_args_offset(arch) + k * arch.ptr_width() as i64)
        }
    }
}

/// The register a function returns its result in.
pub fn return_register(arch: Arch) -> &'static str {
    guest(arch).return_register()
}

/// The stack pointer at the return address, given the one at entry: x86's `ret` pops the
/// return address.
pub fn sp_at_return(arch: Arch, sp_at_entry: u64) -> u64 {
    sp_at_entry.wrapping_add(stack_args_offset(arch) as u64)
}

/// QEMU's name of DWARF register `n` (the psABI numbering), if it is one an argument can be in.
pub fn dwarf_register(arch: Arch, n: u16) -> Option<&'static str> {
    guest(arch).dwarf_register(n)
}

/// The stack and frame pointers' DWARF numbers.
pub fn dwarf_sp_fp(arch: Arch) -> (u16, u16) {
    guest(arch).dwarf_sp_fp()
}

/// Where the frame base of a frame-pointer function is, relative to SP at entry: after
/// `push fp; mov fp, sp` on x86 it is one word below; riscv and aarch64 set FP to SP at entry
/// (the CFA).
pub fn frame_pointer_at_entry(arch: Arch) -> i64 {
    -stack_args_offset(arch)
}

/// The canonical frame address (the caller's SP before the call) relative to SP at entry.
pub fn cfa_at_entry(arch: Arch) -> i64 {
    stack_args_offset(arch)
}

/// Reads the vCPU's registers by QEMU name, in the hook's callback.
pub trait RegisterFile {
    fn register(&mut self, name: &'static str) -> Option<u64>;
}

/// Reads the value at `loc`, `sp` being SP at entry; the word size is the guest's. `mem`
/// fills its buffer and says whether the memory was readable.
pub fn read<G, M>(loc: Location, arch: Arch, sp: u64, guest: &mut G, mem: &mut M) -> Option<u64>
where
    G: RegisterFile + ?Sized,
    M: FnMut(u64, &mut [u8]) -> bool + ?Sized,
{
    let w = arch.ptr_width() as usize;
    let mask = if w == 4 { u32::MAX as u64 } else { u64::MAX };
    match loc {
        Location::Register(r) => guest.register(r).map(|v| v & mask),
        Location::Stack(off) => {
            let mut b = [0u8; 8];
            let addr = sp.wrapping_add(off as u64) & mask;
            mem(addr, &mut b[..w]).then(|| u64::from_le_bytes(b))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventions() {
        use Location::*;
        let c = |arch, conv, n| convention_arg(arch, conv, n);
        assert_eq!(c(Arch::I386, Convention::C, 0), Stack(4));
        assert_eq!(c(Arch::I386, Convention::C, 2), Stack(12));
        assert_eq!(c(Arch::I386, Convention::Regparm3, 0), Register("eax"));
        assert_eq!(c(Arch::I386, Convention::Regparm3, 1), Register("edx"));
        assert_eq!(c(Arch::I386, Convention::Regparm3, 2), Register("ecx"));
        assert_eq!(c(Arch::I386, Convention::Regparm3, 3), Stack(4));
        assert_eq!(c(Arch::X86_64, Convention::C, 0), Register("rdi"));
        assert_eq!(c(Arch::X86_64, Convention::Regparm3, 5), Register("r9"));
        assert_eq!(c(Arch::X86_64, Convention::C, 6), Stack(8));
        assert_eq!(c(Arch::X86_64, Convention::C, 7), Stack(16));
        assert_eq!(c(Arch::Riscv64, Convention::C, 1), Register("a1"));
        assert_eq!(c(Arch::Aarch64, Convention::C, 8), Stack(0));
        assert_eq!(return_register(Arch::X86_64), "rax");
        assert_eq!(sp_at_return(Arch::I386, 0x1000), 0x1004);
        assert_eq!(sp_at_return(Arch::Aarch64, 0x1000), 0x1000);
    }

    #[test]
    fn dwarf_numbering() {
        assert_eq!(dwarf_register(Arch::I386, 1), Some("ecx"));
        assert_eq!(dwarf_register(Arch::X86_64, 5), Some("rdi"));
        assert_eq!(dwarf_register(Arch::X86_64, 16), None);
        assert_eq!(dwarf_register(Arch::Riscv64, 10), Some("a0"));
        assert_eq!(dwarf_register(Arch::Aarch64, 31), Some("sp"));
    }

    struct Regs;
    impl RegisterFile for Regs {
        fn register(&mut self, name: &'static str) -> Option<u64> {
            match name {
                "ecx" => Some(0xdead_0000_0000_0040),
                _ => None,
            }
        }
    }

    #[test]
    fn reads_registers_and_stack_words() {
        let stack: Vec<u8> = (0u8..32).collect();
        let mut mem = |addr: u64, out: &mut [u8]| {
            let at = addr.wrapping_sub(0x9000) as usize;
            match stack.get(at..at + out.len()) {
                Some(b) => {
                    out.copy_from_slice(b);
                    true
                }
                None => false,
            }
        };
        let r = |loc, arch, mem: &mut dyn FnMut(u64, &mut [u8]) -> bool| {
            read(loc, arch, 0x9000, &mut Regs, mem)
        };
        // i386 registers are masked to 32 bits.
        assert_eq!(
            r(Location::Register("ecx"), Arch::I386, &mut mem),
            Some(0x40)
        );
        assert_eq!(r(Location::Register("edx"), Arch::I386, &mut mem), None);
        assert_eq!(
            r(Location::Stack(4), Arch::I386, &mut mem),
            Some(u32::from_le_bytes([4, 5, 6, 7]) as u64)
        );
        assert_eq!(
            r(Location::Stack(8), Arch::X86_64, &mut mem),
            Some(u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]))
        );
        assert_eq!(r(Location::Stack(64), Arch::I386, &mut mem), None);
        assert_eq!(Location::Stack(-4).to_string(), "[sp-4]");
        assert_eq!(Location::Register("eax").to_string(), "eax");
    }
}
