//! Matching a hooked call's return to its entry, per vCPU.
//!
//! At the entry the plugin knows the return address (at `[SP]` on x86) and what SP will be
//! once the call has returned. The vCPU's pending calls form a stack, newest last; the plugin
//! watches the newest one's return address (a conditional callback at every block that
//! compares the block's address with it), and when the vCPU gets there with that SP the call
//! has returned. Matching on both the address and SP keeps recursion (the same return address
//! deeper in the stack) and interrupts (a handler's calls push above and return first) apart.
//!
//! A call that never returns (a `longjmp` out of it, a reset) must not stay to be matched by
//! later code: it is given up, and reported, when a call below it returns (everything above a
//! match is dead), when a new call has its very return address and SP (its frame was reused),
//! when more than [`MAX_PENDING`] calls are pending (the oldest goes), and at exit.

/// The value the plugin's watch slot holds when nothing is pending: no block starts there.
pub const NOTHING: u64 = u64::MAX;

/// Pending calls kept per vCPU; beyond, the oldest are given up.
pub const MAX_PENDING: usize = 256;

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

    /// A call entered. Calls it proves dead (same return address and SP) and the oldest
    /// beyond the capacity go to `given_up`, oldest first.
    pub fn enter(&mut self, p: Pending<T>, given_up: &mut Vec<T>) {
        if let Some(i) = self
            .stack
            .iter()
            .rposition(|q| q.ret == p.ret && q.sp == p.sp)
        {
            given_up.push(self.stack.remove(i).call);
        }
        if self.stack.len() >= self.cap {
            given_up.push(self.stack.remove(0).call);
        }
        self.stack.push(p);
    }

    /// The vCPU reached `pc` with `sp`: the call that returned there, if any. The calls above
    /// it never returned: they go to `given_up`, oldest first.
    pub fn reached(&mut self, pc: u64, sp: u64, given_up: &mut Vec<T>) -> Option<T> {
        let i = self.stack.iter().rposition(|q| q.ret == pc && q.sp == sp)?;
        let above = self.stack.drain(i + 1..).map(|p| p.call);
        given_up.extend(above);
        self.stack.pop().map(|p| p.call)
    }

    /// The return address to watch: the newest pending call's, or [`NOTHING`].
    pub fn watch(&self) -> u64 {
        self.stack.last().map_or(NOTHING, |p| p.ret)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ret: u64, sp: u64, call: &'static str) -> Pending<&'static str> {
        Pending { ret, sp, call }
    }

    #[test]
    fn nesting_and_recursion_match_by_address_and_sp() {
        let mut m = Matcher::default();
        let mut gone = Vec::new();
        assert_eq!(m.watch(), NOTHING);
        // kmalloc calls kmalloc (recursion through one call site: same return address).
        m.enter(p(0x500, 0x9000, "outer"), &mut gone);
        m.enter(p(0x500, 0x8f00, "inner"), &mut gone);
        assert_eq!(m.watch(), 0x500);
        // The address alone is not enough: SP says which one returned.
        assert_eq!(m.reached(0x500, 0x8e00, &mut gone), None);
        assert_eq!(m.reached(0x500, 0x8f00, &mut gone), Some("inner"));
        assert_eq!(m.reached(0x500, 0x9000, &mut gone), Some("outer"));
        assert!(m.is_empty() && gone.is_empty());
        assert_eq!(m.watch(), NOTHING);
    }

    #[test]
    fn an_interrupt_handler_calls_and_returns_above() {
        let mut m = Matcher::default();
        let mut gone = Vec::new();
        m.enter(p(0x500, 0x9000, "task"), &mut gone);
        // The interrupt arrives inside the task's call; the handler allocates on its own.
        m.enter(p(0x700, 0x8000, "handler"), &mut gone);
        assert_eq!(m.watch(), 0x700);
        assert_eq!(m.reached(0x700, 0x8000, &mut gone), Some("handler"));
        assert_eq!(m.watch(), 0x500);
        assert_eq!(m.reached(0x500, 0x9000, &mut gone), Some("task"));
        assert!(gone.is_empty());
    }

    #[test]
    fn calls_that_never_return_are_given_up_not_matched_later() {
        let mut m = Matcher::default();
        let mut gone = Vec::new();
        m.enter(p(0x500, 0x9000, "a"), &mut gone);
        m.enter(p(0x600, 0x8f00, "longjmped out of"), &mut gone);
        // `a` returns: the call above it is dead.
        assert_eq!(m.reached(0x500, 0x9000, &mut gone), Some("a"));
        assert_eq!(gone, ["longjmped out of"]);
        gone.clear();
        // A call whose frame is reused by a new call at the same site and SP.
        m.enter(p(0x800, 0x9000, "reset"), &mut gone);
        m.enter(p(0x800, 0x9000, "again"), &mut gone);
        assert_eq!(gone, ["reset"]);
        assert_eq!(m.reached(0x800, 0x9000, &mut gone), Some("again"));
        // Nothing pending: reaching the address again matches nothing.
        assert_eq!(m.reached(0x800, 0x9000, &mut gone), None);
        assert_eq!(gone, ["reset"]);
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
    }
}
