//! `tasks=POINTER->ID,NAME`: where another kernel than Linux keeps its current task, by the
//! names of its DWARF (checked by [`super::dwarf::resolve`]); and the example kernels' preset.

use std::fmt;

use super::TaskDescriptionError;

/// `tasks=POINTER->ID,NAME`: the global variable `POINTER` points to the current task's
/// struct, whose member `ID` is its id (a 4-byte integer) and `NAME` its name (a char array).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDescription {
    pub pointer: String,
    pub id: String,
    pub name: String,
}

/// `tasks=example`: the example kernels' scheduler (examples/kernel-common/src/sched.rs).
pub const EXAMPLE: &str = "CURRENT_TASK->id,name";
/// `switches=example`: its switch function, `switch_to(prev, next)`.
pub const EXAMPLE_SWITCH_FUNCTION: &str = "switch_to";

impl TaskDescription {
    /// Parses `value`, `example` or `POINTER->ID,NAME`.
    pub fn parse(value: &str) -> Result<TaskDescription, TaskDescriptionError> {
        let text = match value {
            "example" => EXAMPLE,
            v => v,
        };
        let syntax = |why: &str| TaskDescriptionError::Syntax {
            value: value.to_string(),
            why: why.to_string(),
        };
        let (pointer, members) = text.split_once("->").ok_or_else(|| syntax("no '->'"))?;
        let (id, name) = members
            .split_once(',')
            .ok_or_else(|| syntax("no ',' between ID and NAME (QEMU's -plugin option takes a comma doubled: tasks=POINTER->ID,,NAME)"))?;
        for (what, s) in [("POINTER", pointer), ("ID", id), ("NAME", name)] {
            if !is_identifier(s) {
                return Err(syntax(&format!("{what} `{s}` is not an identifier")));
            }
        }
        Ok(TaskDescription {
            pointer: pointer.to_string(),
            id: id.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for TaskDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{},{}", self.pointer, self.id, self.name)
    }
}

/// A C identifier (or a linker symbol's name: `.` and `$` too), not starting with a digit.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '.' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_and_the_example() {
        let d = TaskDescription::parse("current->tid,comm").unwrap();
        assert_eq!(
            (d.pointer.as_str(), d.id.as_str(), d.name.as_str()),
            ("current", "tid", "comm")
        );
        assert_eq!(d.to_string(), "current->tid,comm");
        assert_eq!(
            TaskDescription::parse("example").unwrap().to_string(),
            EXAMPLE
        );
        let err = |v: &str| TaskDescription::parse(v).unwrap_err().to_string();
        assert!(
            err("current").starts_with("tasks=current: no '->'"),
            "{}",
            err("current")
        );
        assert!(err("c->id").contains("no ','"));
        assert!(err("c->id,").contains("NAME `` is not an identifier"));
        assert!(err("1c->id,n").contains("POINTER `1c`"));
        assert!(err("c->i d,n").contains("ID `i d`"));
        assert!(err("c->id,n,m").contains("NAME `n,m`"));
    }
}
