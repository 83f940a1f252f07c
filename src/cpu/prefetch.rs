//! Software prefetch. A packed product reads each block of columns' weights once per tile of
//! activation rows: the first tile waits for them from memory (a 4096-wide Q4_K block of 32
//! columns is 78 KB), the others find them in L2. Asking for the next block's weights a slice
//! per tile hides that first wait (5-8% of a step on a file that does not fit the caches). The
//! packed kernels spread their slice over their loop (`SpreadPrefetch`): issued in a burst before
//! each call, 50 prefetches filled the CPU's miss buffers and the loop issuing them took 5% of a
//! step's samples (spread: the step 2% faster).

use std::marker::PhantomData;

/// Prefetches of a byte range spread over the `slots` iterations of a kernel's loop: `at(s)`
/// asks for slot s's share of the cache lines.
pub struct SpreadPrefetch<'a> {
    start: *const u8,
    lines: usize,
    per_slot: usize,
    _bytes: PhantomData<&'a [u8]>,
}

impl<'a> SpreadPrefetch<'a> {
    pub fn new(bytes: &'a [u8], slots: usize) -> Self {
        let lines = bytes.len().div_ceil(64);
        SpreadPrefetch { start: bytes.as_ptr(), lines, per_slot: lines.div_ceil(slots.max(1)), _bytes: PhantomData }
    }

    /// Slot `slot`'s lines (none past the range).
    #[inline(always)]
    pub fn at(&self, slot: usize) {
        #[cfg(target_arch = "x86_64")]
        for line in slot * self.per_slot..((slot + 1) * self.per_slot).min(self.lines) {
            // SAFETY: a prefetch never faults; the address is inside the range (line < lines).
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                    self.start.wrapping_add(64 * line) as *const i8,
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }
}
