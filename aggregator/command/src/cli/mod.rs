//! The subcommands besides the default one: `record`, `top`, `stacks`, `completions`, `man`,
//! and the option groups they share with it.

pub mod annotate;
pub mod diff;
pub mod filter_args;
pub mod generate;
pub mod record;
pub mod session_args;
pub mod stacks;
pub mod top;
pub mod values;
