//! `kern-profile record` and `kern-profile top` as a library: a QEMU command run with the
//! plugin added ([`session`]), after checking, before the guest starts, the QEMU binary and
//! its version ([`qemu`]), the kernel's symbols ([`kernel`]), the plugin ([`plugin`]) and the
//! output directory ([`outdir`]); signals passed on to QEMU ([`launch`]); and the recording
//! drawn into the usual outputs ([`aggregate`]). A running QEMU sampled through its gdbstub
//! instead is [`attach`]; one started with a gdbstub of its own, [`gdb_launch`]. The live view of `top` is [`crate::live`].

pub mod aggregate;
pub mod attach;
mod attach_tasks;
mod error;
pub mod gdb_launch;
pub mod kernel;
pub mod launch;
pub mod outdir;
pub mod plugin;
pub mod qemu;
pub mod session;

pub use error::RecordError;
pub use session::{ConsoleSpec, Recorded, Running, Sampling, Session, SessionSpec};
