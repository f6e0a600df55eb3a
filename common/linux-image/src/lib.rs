//! Linux kernel images as kern-profile's inputs: the kernel proper inside an x86 bzImage
//! (its compressed vmlinux ELF), an arm64 or riscv64 `Image` (raw), `Image.gz` or EFI
//! zboot image, or an ELF as it is; and the names of the kallsyms tables compiled into it, so that a
//! distribution's `vmlinuz` can be profiled with nothing else.
//!
//! ```no_run
//! use kern_profile_linux_image::{open, Arch, Options};
//! let image = open("/boot/vmlinuz".as_ref(), &Options::default())?;
//! image.check_arch(Arch::X86_64)?;
//! let kallsyms = image.kallsyms()?;
//! println!("{} symbols, _text at {:?}", kallsyms.symbols.len(), kallsyms.text);
//! # Ok::<(), kern_profile_linux_image::ImageError>(())
//! ```

mod arch;
mod arm64_entry_task;
mod btf;
mod bzimage;
mod compression;
mod error;
mod image;
mod kallsyms;
mod raw_image;
mod task_layout;

pub use arch::Arch;
pub use btf::BtfBlob;
pub use bzimage::{is_bzimage, setup_header, SetupHeader};
pub use compression::Compression;
pub use error::ImageError;
pub use image::{
    open, parse, Container, InnerContainer, Kernel, KernelImage, Options, DEFAULT_MAX_PAYLOAD,
    ELF_MAGIC,
};
pub use kallsyms::{
    read as read_kallsyms, AddressEncoding, Kallsyms, KallsymsLayout, KernelSymbol,
};
pub use raw_image::{raw_image_header, RawImageHeader};
pub use task_layout::TaskLayout;
