//! Software prefetch. A packed product reads each block of columns' weights once per tile of
//! activation rows: the first tile waits for them from memory (a 4096-wide Q4_K block of 32
//! columns is 78 KB), the others find them in L2. Asking for the next block's weights a slice
//! per tile hides that first wait (5-8% of a step on a file that does not fit the caches).

/// Asks the CPU to bring `bytes` into the L2 cache (a hint; nothing where there is none).
#[inline]
pub fn prefetch_l2(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch never faults, and the address is inside `bytes`; SSE is part of
        // the x86-64 baseline.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(line.as_ptr() as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
