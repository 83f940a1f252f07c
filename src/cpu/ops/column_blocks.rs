//! Disjoint blocks of columns of a row-major matrix, handed to parallel tasks. The packed GEMM
//! computes eight output features (columns) for every canvas row per task; writing them
//! straight into the row-major output, 32 bytes per row, replaces a feature-major buffer and a
//! transpose whose strided stores took 5% of a step.

use std::marker::PhantomData;

use rayon::prelude::*;

/// Columns `first_col..first_col + width` of every row of a row-major matrix. Blocks come only
/// from `par_column_blocks`, one per column range, so no two of them overlap.
pub struct ColumnBlock<'a> {
    base: *mut f32,
    n_rows: usize,
    row_len: usize,
    first_col: usize,
    width: usize,
    _matrix: PhantomData<&'a mut [f32]>,
}

// SAFETY: a block is the only access to its cells while it lives (see `par_column_blocks`), so
// moving it to another thread is like moving a `&mut` to them.
unsafe impl Send for ColumnBlock<'_> {}

impl ColumnBlock<'_> {
    pub fn first_col(&self) -> usize {
        self.first_col
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// The block's cells in row `r`.
    pub fn row_mut(&mut self, r: usize) -> &mut [f32] {
        assert!(r < self.n_rows, "row {r} of a {}-row matrix", self.n_rows);
        // SAFETY: `par_column_blocks` checked that every row's range lies inside the matrix;
        // this block is the only one with these columns and `&mut self` makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(r * self.row_len + self.first_col), self.width) }
    }
}

/// Splits columns `0..n_cols` of the row-major `[n_rows, row_len]` matrix `m` into blocks of
/// `width` columns (the last one narrower), as a parallel iterator.
pub fn par_column_blocks(
    m: &mut [f32],
    n_rows: usize,
    row_len: usize,
    n_cols: usize,
    width: usize,
) -> impl IndexedParallelIterator<Item = ColumnBlock<'_>> {
    assert!(width > 0 && n_cols <= row_len && n_rows * row_len <= m.len(), "column blocks outside the matrix");
    let base = SendPtr(m.as_mut_ptr());
    (0..n_cols.div_ceil(width)).into_par_iter().map(move |b| {
        let first_col = b * width;
        ColumnBlock {
            base: base.get(),
            n_rows,
            row_len,
            first_col,
            width: width.min(n_cols - first_col),
            _matrix: PhantomData,
        }
    })
}

/// The matrix's base pointer, shared by the closure that makes the blocks.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);

impl SendPtr {
    fn get(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: only used to build `ColumnBlock`s over disjoint columns (see above).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_every_column_once_and_leave_the_rest() {
        for (n_rows, row_len, n_cols, width) in [(5, 19, 19, 8), (3, 24, 16, 8), (1, 7, 7, 3), (4, 9, 0, 8)] {
            let mut m = vec![-1.0f32; n_rows * row_len + 3];
            par_column_blocks(&mut m, n_rows, row_len, n_cols, width).for_each(|mut b| {
                for r in 0..n_rows {
                    let first = b.first_col();
                    for (i, v) in b.row_mut(r).iter_mut().enumerate() {
                        assert_eq!(*v, -1.0, "written twice");
                        *v = (r * row_len + first + i) as f32;
                    }
                }
            });
            for (i, v) in m.iter().enumerate() {
                let (r, c) = (i / row_len, i % row_len);
                let want = if r < n_rows && c < n_cols { i as f32 } else { -1.0 };
                assert_eq!(*v, want, "cell {i} of {n_rows}x{row_len}, {n_cols} columns by {width}");
            }
        }
    }
}
