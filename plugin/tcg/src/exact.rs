//! `exact=on`: one execution counter per distinct block, in scoreboards of
//! [`CHUNK_SLOTS`] counters per vCPU, summed over the vCPUs at exit.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::exact_slots::{slot_location, ExactTable, CHUNK_SLOTS};
use kern_profile_format::encode_exact_blocks;
use kern_profile_unwind::PtrWidth;
use qemu_plugin_sys as sys;

use crate::qemu::U64Entry;

#[derive(Default)]
pub struct ExactState {
    table: ExactTable,
    chunks: Vec<U64Entry>,
}

impl ExactState {
    /// The execution counter of the block with these instruction addresses, allocating its
    /// scoreboard on first use.
    pub fn counter_for(&mut self, insns: &[u64]) -> Option<U64Entry> {
        let (slot, _) = self.table.slot(insns)?;
        let (chunk, offset) = slot_location(slot);
        while self.chunks.len() <= chunk {
            self.chunks.push(U64Entry::new_scoreboard(CHUNK_SLOTS * 8)?);
        }
        Some(self.chunks[chunk].at_offset(offset))
    }

    /// Sums every executed block's counter over the vCPUs and encodes the exact-count
    /// records; returns the number of blocks written.
    pub fn encode(&self, width: PtrWidth, out: &mut Vec<u8>) -> usize {
        // SAFETY: plain API call.
        let nv = unsafe { sys::qemu_plugin_num_vcpus() }.max(0) as u32;
        // Each chunk's element base per vCPU.
        let bases: Vec<Vec<*mut u8>> = self
            .chunks
            .iter()
            .map(|c| (0..nv).map(|v| c.element(v)).collect())
            .collect();
        let counts: Vec<(u64, &[u64])> = self
            .table
            .blocks()
            .filter_map(|(slot, insns)| {
                let (chunk, offset) = slot_location(slot);
                let per_vcpu = bases.get(chunk)?;
                let execs: u64 = per_vcpu
                    .iter()
                    .map(|&base| {
                        // SAFETY: the slot lies inside the element (offset < CHUNK_SLOTS * 8);
                        // vCPUs may still be adding, so read atomically.
                        unsafe { (*(base.add(offset) as *const AtomicU64)).load(Ordering::Relaxed) }
                    })
                    .fold(0u64, u64::wrapping_add);
                (execs > 0).then_some((execs, insns))
            })
            .collect();
        let n = counts.len();
        encode_exact_blocks(out, width.bytes(), counts);
        n
    }
}
