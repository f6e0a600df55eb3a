//! What is wrong with a `tasks=POINTER->ID,NAME` description, or with the kernel it
//! describes. Each message names the argument and, where one is at fault, the symbol and the
//! member.

/// A task description that does not parse, or does not fit the kernel's DWARF.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskDescriptionError {
    #[error("tasks={value}: {why}: expected 'auto', 'on', 'off', 'example' or POINTER->ID,NAME (a global variable pointing to the current task's struct, its 4-byte integer id member and its char-array name member)")]
    Syntax { value: String, why: String },
    #[error("tasks={desc}: elf= {why}")]
    NoDwarf { desc: String, why: String },
    #[error("tasks={desc}: the DWARF of elf= does not read: {why}")]
    Dwarf { desc: String, why: String },
    #[error(
        "tasks={desc}: the DWARF of elf= has no global variable `{pointer}` at a fixed address"
    )]
    NoVariable { desc: String, pointer: String },
    #[error("tasks={desc}: the DWARF of elf= has {count} global variables `{pointer}` at different addresses")]
    Ambiguous {
        desc: String,
        pointer: String,
        count: usize,
    },
    #[error("tasks={desc}: `{pointer}` {why}")]
    BadPointer {
        desc: String,
        pointer: String,
        why: String,
    },
    #[error("tasks={desc}: struct {strukt} has no member `{member}`")]
    NoMember {
        desc: String,
        strukt: String,
        member: String,
    },
    #[error("tasks={desc}: member `{member}` of struct {strukt} {why}")]
    BadMember {
        desc: String,
        strukt: String,
        member: String,
        why: String,
    },
}
