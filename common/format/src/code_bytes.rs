//! The code-bytes record (kind 6): a few bytes of code at a user-mode PC, read the first time
//! a vCPU sampled that 4 KiB page of that address space, so that a reader can tell which of
//! several programs linked at the same addresses ran in each address space.

use crate::error::FormatError;
use crate::kind;
use crate::raw_reader::corrupt;
use crate::source::{u16_at, u32_at, u64_at, word_at};

/// Bytes before the address.
const FIXED: usize = 12;
/// At most this many bytes of code per record.
pub const MAX_CODE_BYTES: usize = 256;

/// One code-bytes record, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeBytes<'a> {
    /// The vCPU that sampled the address.
    pub vcpu: u32,
    /// The address space: the page-table base the samples carry (x86 CR3, riscv `satp`,
    /// aarch64 `TTBR0_EL1`).
    pub page_table_base: u64,
    /// The virtual address of the first byte (a sampled PC).
    pub vaddr: u64,
    /// The code there, as the guest's memory held it.
    pub bytes: &'a [u8],
}

impl<'a> CodeBytes<'a> {
    /// Appends the record, kind and length included. At most [`MAX_CODE_BYTES`] are kept.
    pub fn encode(&self, out: &mut Vec<u8>, ptr_width: usize) {
        let bytes = &self.bytes[..self.bytes.len().min(MAX_CODE_BYTES)];
        out.push(kind::CODE_BYTES);
        let len = FIXED + ptr_width + 2 + bytes.len();
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&self.vcpu.to_le_bytes());
        out.extend_from_slice(&self.page_table_base.to_le_bytes());
        match ptr_width {
            4 => out.extend_from_slice(&(self.vaddr as u32).to_le_bytes()),
            _ => out.extend_from_slice(&self.vaddr.to_le_bytes()),
        }
        out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        out.extend_from_slice(bytes);
    }

    /// Decodes a record body (the record at `offset`, for errors).
    pub(crate) fn decode(b: &'a [u8], width: usize, offset: u64) -> Result<Self, FormatError> {
        let head = FIXED + width + 2;
        if b.len() < head {
            return Err(corrupt(
                offset,
                format!("code-bytes record of {} bytes is too short", b.len()),
            ));
        }
        let n = u16_at(b, FIXED + width) as usize;
        if b.len() != head + n {
            return Err(corrupt(
                offset,
                format!(
                    "code-bytes record with {n} bytes of code should be {} bytes, record says {}",
                    head + n,
                    b.len()
                ),
            ));
        }
        Ok(CodeBytes {
            vcpu: u32_at(b, 0),
            page_table_base: u64_at(b, 4),
            vaddr: word_at(b, FIXED, width),
            bytes: &b[head..],
        })
    }
}
