//! Matching a hooked call's return to its entry, per vCPU.
//!
//! At the entry the plugin knows the return address (at `[SP]` on x86) and what SP will be
//! once the call has returned. The vCPU's pending calls are kept newest last. The plugin
//! watches the return addresses of the newest few ([`WATCH_SLOTS`] distinct addresses, see
//! [`Matcher::watch`]): one scoreboard slot each, and conditional callbacks that compare a
//! block's address with them (slot 0 at every block, all the slots at blocks that start at a
//! return address some hooked call has had). When the vCPU gets to a watched
//! address with a pending call's SP, that call has returned. Matching on both the address and
//! SP keeps recursion (the same return address deeper in the stack) and interrupts (a
//! handler's calls push below and return first) apart. Watching more than the newest call
//! means that a call that never returns does not hide the returns of the calls below it.
//!
//! A call that never returns (a `longjmp` out of it, a task that sleeps in it while another
//! task runs, a reset) must not stay to be matched by later code. It is given up, and
//! reported, when:
//!
//! - a call below it returns: a call entered after the returning one whose SP lies in
//!   `S - STACK_WINDOW ..= S` (`S` the returning call's SP) was deeper on that stack, inside
//!   the returning call, so it was left when the stack unwound past it. A call entered after
//!   it whose SP is above `S`, or far below, is taken to be on another stack (another task's,
//!   an interrupt stack) and stays pending;
//! - a new call has the very SP of a pending one: its return address has just overwritten
//!   the pending call's (on x86) or its caller's frame is the same one (elsewhere). The
//!   calls entered after that one and deeper on its stack go with it, as for a return;
//! - more than [`MAX_PENDING`] calls are pending (the oldest goes);
//! - the vCPU is reset, and at exit ([`Matcher::drain`]).

/// The value a watch slot holds when it watches nothing: no block starts there.
pub const NOTHING: u64 = u64::MAX;

/// Pending calls kept per vCPU; beyond, the oldest are given up.
pub const MAX_PENDING: usize = 256;

/// Return addresses watched per vCPU: the plugin's scoreboard slots, each a conditional
/// callback (slot 0 at every block, the others at return sites).
pub const WATCH_SLOTS: usize = 4;

/// How far below a returning call's SP another pending call is taken to be on the same stack
/// (and so dead): a kernel stack's size. Further below, it is taken to be on another stack.
pub const STACK_WINDOW: u64 = 16 * 1024;

/// A call that has not returned yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending<T> {
    /// Where the call returns to.
    pub ret: u64,
    /// SP once it has returned.
    pub sp: u64,
    pub call: T,
}

/// One vCPU's pending calls.
#[derive(Debug, Clone)]
pub struct Matcher<T> {
    stack: Vec<Pending<T>>,
    cap: usize,
}

impl<T> Default for Matcher<T> {
    fn default() -> Self {
        Self::with_capacity(MAX_PENDING)
    }
}

impl<T> Matcher<T> {
    /// A matcher that keeps at most `cap` (at least 1) pending calls.
    pub fn with_capacity(cap: usize) -> Self {
        Matcher {
            stack: Vec::new(),
            cap: cap.max(1),
        }
    }

    /// A call entered. A pending call with the same SP (its frame is reused: it is dead), the
    /// calls entered after that one deeper on its stack, and the oldest beyond the capacity
    /// go to `given_up`, oldest first.
    pub fn enter(&mut self, p: Pending<T>, given_up: &mut Vec<T>) {
        if let Some(i) = self.stack.iter().position(|q| q.sp == p.sp) {
            given_up.push(self.stack.remove(i).call);
            self.unwind(i, p.sp, given_up);
        }
        if self.stack.len() >= self.cap {
            given_up.push(self.stack.remove(0).call);
        }
        self.stack.push(p);
    }

    /// The vCPU entered a block at `pc` with `sp` (the plugin calls it when `pc` is one of
    /// the [`watch`](Self::watch) slots): the newest call that returned there, if any. The
    /// calls entered after it and deeper on its stack never returned: they go to `given_up`,
    /// oldest first. Those entered after it on another stack (another task's) stay pending.
    pub fn reached(&mut self, pc: u64, sp: u64, given_up: &mut Vec<T>) -> Option<T> {
        let i = self.stack.iter().rposition(|q| q.ret == pc && q.sp == sp)?;
        let returned = self.stack.remove(i).call;
        self.unwind(i, sp, given_up);
        Some(returned)
    }

    /// The stack was unwound to `sp`: of the calls from index `from` on (entered after the
    /// one that returned there), those deeper on that stack were inside it and are dead.
    fn unwind(&mut self, from: usize, sp: u64, given_up: &mut Vec<T>) {
        let mut j = from;
        while j < self.stack.len() {
            if same_stack_below(self.stack[j].sp, sp) {
                given_up.push(self.stack.remove(j).call);
            } else {
                j += 1;
            }
        }
    }

    /// The return addresses to watch: those of the newest pending calls, newest first, each
    /// once (a recursion's calls share one slot); [`NOTHING`] in the slots left over.
    pub fn watch(&self) -> [u64; WATCH_SLOTS] {
        let mut slots = [NOTHING; WATCH_SLOTS];
        let mut n = 0;
        for p in self.stack.iter().rev() {
            if n == WATCH_SLOTS {
                break;
            }
            if !slots[..n].contains(&p.ret) {
                slots[n] = p.ret;
                n += 1;
            }
        }
        slots
    }

    pub fn len(&self) -> usize {
        self.stack.len()
    }

    /// The pending calls, oldest first.
    pub fn pending(&self) -> impl Iterator<Item = &Pending<T>> + '_ {
        self.stack.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// Every pending call, oldest first (at exit: none of them returned).
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.stack.drain(..).map(|p| p.call)
    }
}

/// Whether a pending call with SP `sp` was deeper on the stack a call returned to with SP
/// `at` (so it was left): at or below `at`, by at most [`STACK_WINDOW`].
fn same_stack_below(sp: u64, at: u64) -> bool {
    sp <= at && at - sp <= STACK_WINDOW
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ret: u64, sp: u64, call: &'static str) -> Pending<&'static str> {
        Pending { ret, sp, call }
    }

    /// One vCPU as the plugin drives it: entries, and blocks whose callback fires only when
    /// their address is in a watch slot (QEMU's `COND_EQ` against each slot).
    #[derive(Default)]
    struct Cpu {
        m: Matcher<&'static str>,
        gone: Vec<&'static str>,
        returned: Vec<&'static str>,
        slots: [u64; WATCH_SLOTS],
    }

    impl Cpu {
        fn new() -> Self {
            Cpu {
                slots: [NOTHING; WATCH_SLOTS],
                ..Cpu::default()
            }
        }

        fn call(&mut self, ret: u64, sp: u64, call: &'static str) {
            self.m.enter(p(ret, sp, call), &mut self.gone);
            self.slots = self.m.watch();
        }

        /// The vCPU enters a block at `pc` with `sp`.
        fn block(&mut self, pc: u64, sp: u64) {
            if self.slots.contains(&pc) {
                let r = self.m.reached(pc, sp, &mut self.gone);
                self.returned.extend(r);
                self.slots = self.m.watch();
            }
        }
    }

    #[test]
    fn nesting_and_recursion_match_by_address_and_sp() {
        let mut c = Cpu::new();
        assert_eq!(c.m.watch(), [NOTHING; WATCH_SLOTS]);
        // kmalloc calls kmalloc (recursion through one call site: same return address).
        c.call(0x500, 0x9000, "outer");
        c.call(0x500, 0x8f00, "inner");
        // One slot for both.
        assert_eq!(c.slots[..2], [0x500, NOTHING]);
        // The address alone is not enough: SP says which one returned.
        c.block(0x500, 0x8e00);
        assert!(c.returned.is_empty());
        c.block(0x500, 0x8f00);
        c.block(0x500, 0x9000);
        assert_eq!(c.returned, ["inner", "outer"]);
        assert!(c.m.is_empty() && c.gone.is_empty());
        assert_eq!(c.slots, [NOTHING; WATCH_SLOTS]);
    }

    #[test]
    fn an_interrupt_handler_calls_and_returns_below() {
        let mut c = Cpu::new();
        c.call(0x500, 0x9000, "task");
        // The interrupt arrives inside the task's call; the handler allocates on its own.
        c.call(0x700, 0x8000, "handler");
        assert_eq!(c.slots[..2], [0x700, 0x500]);
        c.block(0x700, 0x8000);
        assert_eq!(c.slots[..2], [0x500, NOTHING]);
        c.block(0x500, 0x9000);
        assert_eq!(c.returned, ["handler", "task"]);
        assert!(c.gone.is_empty());
    }

    #[test]
    fn a_longjmp_out_of_the_newest_call_does_not_hide_the_older_ones_return() {
        let mut c = Cpu::new();
        c.call(0x500, 0x9000, "outer");
        c.call(0x600, 0x8f00, "longjmped out of");
        // Nothing returns to 0x600; the outer call's return is still watched.
        c.block(0x600, 0x8800);
        c.block(0x500, 0x9000);
        assert_eq!(c.returned, ["outer"]);
        assert_eq!(c.gone, ["longjmped out of"]);
        assert!(c.m.is_empty());
        assert_eq!(c.slots, [NOTHING; WATCH_SLOTS]);
    }

    #[test]
    fn a_recursive_call_left_by_a_longjmp_dies_when_the_outer_one_returns() {
        let mut c = Cpu::new();
        c.call(0x500, 0x9000, "outer");
        c.call(0x500, 0x8f00, "inner, left");
        c.call(0x500, 0x8e00, "innermost, left");
        c.block(0x500, 0x9000);
        assert_eq!(c.returned, ["outer"]);
        assert_eq!(c.gone, ["inner, left", "innermost, left"]);
        assert!(c.m.is_empty());
    }

    #[test]
    fn a_task_sleeping_in_the_allocator_leaves_another_tasks_calls_pending() {
        let mut c = Cpu::new();
        // Task A (stack at 0x9000) sleeps inside its call; task B runs on the vCPU.
        c.call(0x500, 0x9000, "A sleeps");
        // B's stacks: far below A's, and above it.
        c.call(0x500, 0x2_9000, "B above");
        c.call(0x540, 0x1000, "B far below");
        c.block(0x500, 0x2_9000);
        assert_eq!(c.returned, ["B above"]);
        // A wakes up and returns: B's call far below stays pending (another stack).
        c.block(0x500, 0x9000);
        assert_eq!(c.returned, ["B above", "A sleeps"]);
        assert!(c.gone.is_empty());
        assert_eq!(c.m.len(), 1);
        c.block(0x540, 0x1000);
        assert_eq!(c.returned, ["B above", "A sleeps", "B far below"]);
        assert!(c.gone.is_empty() && c.m.is_empty());
    }

    #[test]
    fn older_calls_below_a_dead_one_are_watched_up_to_the_slots() {
        let mut c = Cpu::new();
        c.call(0x100, 0x9000, "live");
        // Calls left by longjmps, each at its own site, each deeper.
        let left = ["left 1", "left 2", "left 3", "left 4"];
        for (k, name) in left.iter().enumerate().take(WATCH_SLOTS - 1) {
            c.call(0x200 + k as u64, 0x8000 - 0x100 * k as u64, name);
        }
        // A recursion's calls share one slot, however deep.
        for k in 0..10 {
            c.call(0x900, 0x7000 - 0x10 * k, "recursion, left");
        }
        assert_eq!(c.m.len(), WATCH_SLOTS + 10);
        assert!(!c.slots.contains(&0x100));
        // The recursion's outermost call returns: the nine inside it are dead, and `live` is
        // watched again.
        c.block(0x900, 0x7000);
        assert_eq!(c.returned, ["recursion, left"]);
        assert_eq!(c.gone.len(), 9);
        assert!(c.slots.contains(&0x100));
        c.block(0x100, 0x9000);
        assert_eq!(c.returned, ["recursion, left", "live"]);
        assert_eq!(c.gone.len(), WATCH_SLOTS - 1 + 9);
        assert!(c.m.is_empty());
    }

    #[test]
    fn beyond_the_slots_a_call_can_be_missed_but_is_not_kept() {
        let mut c = Cpu::new();
        c.call(0x100, 0x9000, "live");
        for k in 0..WATCH_SLOTS as u64 {
            c.call(0x200 + k, 0x8000 - 0x100 * k, "left");
        }
        // `live` returns while unwatched: missed.
        c.block(0x100, 0x9000);
        assert!(c.returned.is_empty());
        // The next call from the same frame gives it up, and those left inside it.
        c.call(0x300, 0x9000, "next");
        assert_eq!(c.gone, ["live", "left", "left", "left", "left"]);
        c.block(0x300, 0x9000);
        assert_eq!(c.returned, ["next"]);
        assert!(c.m.is_empty());
    }

    #[test]
    fn a_new_call_in_a_pending_calls_frame_gives_it_up() {
        let mut c = Cpu::new();
        c.call(0x800, 0x9000, "reset");
        c.call(0x800, 0x9000, "again");
        assert_eq!(c.gone, ["reset"]);
        c.call(0x840, 0x9000, "another site, same frame");
        assert_eq!(c.gone, ["reset", "again"]);
        c.block(0x840, 0x9000);
        assert_eq!(c.returned, ["another site, same frame"]);
        // Nothing pending: reaching the address again matches nothing.
        c.block(0x800, 0x9000);
        assert_eq!(c.returned.len(), 1);
        assert_eq!(c.gone.len(), 2);
    }

    #[test]
    fn capacity_and_exit() {
        let mut m = Matcher::with_capacity(2);
        let mut gone = Vec::new();
        m.enter(p(1, 30, "x"), &mut gone);
        m.enter(p(2, 20, "y"), &mut gone);
        m.enter(p(3, 10, "z"), &mut gone);
        assert_eq!(gone, ["x"]);
        assert_eq!(m.len(), 2);
        assert_eq!(m.drain().collect::<Vec<_>>(), ["y", "z"]);
        assert!(m.is_empty());
        assert_eq!(m.watch(), [NOTHING; WATCH_SLOTS]);
    }
}
