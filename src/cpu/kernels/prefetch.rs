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

    /// The cache lines (64-byte steps from the start) slot `slot` asks for: none past the range.
    #[inline(always)]
    fn lines_of(&self, slot: usize) -> std::ops::Range<usize> {
        (slot * self.per_slot).min(self.lines)..((slot + 1) * self.per_slot).min(self.lines)
    }

    /// Asks for slot `slot`'s lines.
    #[inline(always)]
    pub fn at(&self, slot: usize) {
        for line in self.lines_of(slot) {
            // SAFETY: a prefetch never faults; the address is inside the range (line < lines).
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                    self.start.wrapping_add(64 * line) as *const i8,
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots together ask for every line of the range once, in order, whatever the
    /// range's length and the slot count (more slots than lines, fewer, a ragged last line).
    #[test]
    fn slots_cover_every_line_once() {
        let bytes = vec![0u8; 5000];
        for (len, slots) in [(0, 8), (1, 8), (64, 1), (640, 8), (4999, 16), (5000, 7), (3000, 128)] {
            let spread = SpreadPrefetch::new(&bytes[..len], slots);
            let asked: Vec<usize> = (0..slots).flat_map(|s| spread.lines_of(s)).collect();
            assert_eq!(asked, (0..len.div_ceil(64)).collect::<Vec<_>>(), "{len} bytes over {slots} slots");
        }
    }
}
