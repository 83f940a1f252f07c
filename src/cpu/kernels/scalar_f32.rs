//! What the f32 kernels of every path share: the strided-rows view they read, and the scalar
//! SwiGLU that is both the reference and the SIMD forms' tail. Kept apart from the dispatch
//! (`vec_f32`) so that the SIMD modules depend on it and not on the dispatch that calls them.

/// Rows of a strided matrix: row j is `data[j * stride + offset..][..width]`.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    pub data: &'a [f32],
    pub stride: usize,
    pub offset: usize,
    pub width: usize,
    pub count: usize,
}

impl Rows<'_> {
    pub(super) fn check(&self) {
        assert!(
            self.count == 0 || (self.count - 1) * self.stride + self.offset + self.width <= self.data.len(),
            "rows past the end of their matrix"
        );
    }

    pub(super) fn row(&self, j: usize) -> &[f32] {
        &self.data[j * self.stride + self.offset..][..self.width]
    }
}

/// `swiglu_f32`'s reference (libm's expf).
pub(super) fn swiglu_scalar(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}
