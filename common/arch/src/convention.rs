/// The calling convention of hooked functions (`convention=` in an `alloc=` SPEC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Convention {
    /// The architecture's C convention: i386 cdecl (all on the stack), x86_64 System V.
    #[default]
    C,
    /// i386 `regparm(3)`: eax, edx, ecx, then the stack. Elsewhere the same as `C`.
    Regparm3,
}
