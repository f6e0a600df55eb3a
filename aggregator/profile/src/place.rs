//! Where a sample was taken (kernel with paging on, user, boot or firmware), for the text
//! report's unwind stops by place: user code without frame pointers and boot code with
//! paging off end their walks in ways that say nothing about kernel stacks.

use kern_profile_format::{CpuMode, StopCounts};

use crate::unnamed::CpuState;

/// Where a sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Kernel privilege with address translation on, the walk within the kernel's stacks.
    Kernel,
    /// Kernel privilege with address translation on, the walk gone on past a kernel entry
    /// or a stack switch into the context the kernel interrupted (a user program's stack
    /// after a system call): its stop ends that context's stack.
    KernelBeyondEntry,
    /// Kernel privilege in a recording without CPU modes (raw format version 1): boot time
    /// is not told apart there.
    KernelModeUnrecorded,
    /// User privilege.
    User,
    /// Firmware privilege, real mode, or address translation off (a decompressor, early
    /// boot, the BIOS).
    BootOrFirmware,
}

impl Place {
    /// Every place, in the order the report lists them.
    pub const ALL: [Place; 5] = [
        Place::Kernel,
        Place::KernelBeyondEntry,
        Place::KernelModeUnrecorded,
        Place::User,
        Place::BootOrFirmware,
    ];

    /// The place of a sample taken in `cpu`, in user mode with `user`; `crossed` when its
    /// walk went on past a kernel entry or a stack switch (a boundary marker).
    pub fn of(user: bool, cpu: CpuState, crossed: bool) -> Place {
        if user {
            return Place::User;
        }
        if cpu.firmware {
            return Place::BootOrFirmware;
        }
        match cpu.mode {
            CpuMode::Real | CpuMode::PagingOff => Place::BootOrFirmware,
            CpuMode::Paging | CpuMode::Long if crossed => Place::KernelBeyondEntry,
            CpuMode::Paging | CpuMode::Long => Place::Kernel,
            CpuMode::Unknown => Place::KernelModeUnrecorded,
        }
    }

    /// The samples of this place, in the report's words.
    pub fn samples(self) -> &'static str {
        match self {
            Place::Kernel => "kernel samples (paging on) walked within the kernel",
            Place::KernelBeyondEntry => {
                "kernel samples (paging on) walked on past a kernel entry (their stops end \
                 the interrupted context's stack, e.g. a program's after a system call)"
            }
            Place::User => "user samples",
            Place::BootOrFirmware => "boot and firmware samples (paging off or real mode)",
            Place::KernelModeUnrecorded => {
                "kernel samples (CPU mode not recorded: boot time included)"
            }
        }
    }
}

/// Unwind stops counted per place.
#[derive(Debug, Clone, Default)]
pub struct StopsByPlace([StopCounts; 5]);

impl StopsByPlace {
    /// Counts the stop `stop` of `samples` samples taken at `place`.
    pub fn add(&mut self, place: Place, stop: u8, samples: u64) {
        self.0[place as usize].add_n(stop, samples);
    }

    /// The stops of `place`.
    pub fn of(&self, place: Place) -> &StopCounts {
        &self.0[place as usize]
    }

    /// The places with at least one sample, with their stops, in [`Place::ALL`] order.
    pub fn nonempty(&self) -> impl Iterator<Item = (Place, &StopCounts)> + '_ {
        Place::ALL
            .into_iter()
            .map(|p| (p, self.of(p)))
            .filter(|(_, s)| s.total() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(mode: CpuMode, firmware: bool) -> CpuState {
        CpuState { mode, firmware }
    }

    #[test]
    fn places_follow_privilege_and_mode() {
        let of = |user, mode, firmware| Place::of(user, cpu(mode, firmware), false);
        assert_eq!(of(true, CpuMode::Paging, false), Place::User);
        assert_eq!(of(false, CpuMode::Paging, false), Place::Kernel);
        assert_eq!(of(false, CpuMode::Long, false), Place::Kernel);
        for m in [CpuMode::PagingOff, CpuMode::Real] {
            assert_eq!(of(false, m, false), Place::BootOrFirmware);
        }
        assert_eq!(of(false, CpuMode::Paging, true), Place::BootOrFirmware);
        assert_eq!(
            of(false, CpuMode::Unknown, false),
            Place::KernelModeUnrecorded
        );
        let crossed = |user, mode| Place::of(user, cpu(mode, false), true);
        assert_eq!(crossed(false, CpuMode::Paging), Place::KernelBeyondEntry);
        assert_eq!(crossed(false, CpuMode::Long), Place::KernelBeyondEntry);
        assert_eq!(crossed(true, CpuMode::Paging), Place::User);
        assert_eq!(crossed(false, CpuMode::PagingOff), Place::BootOrFirmware);
    }

    #[test]
    fn counts_per_place() {
        let mut s = StopsByPlace::default();
        s.add(Place::Kernel, 0, 1);
        s.add(Place::Kernel, 0, 3);
        s.add(Place::User, 2, 1);
        let places: Vec<_> = s.nonempty().map(|(p, c)| (p, c.total())).collect();
        assert_eq!(places, [(Place::Kernel, 4), (Place::User, 1)]);
    }
}
