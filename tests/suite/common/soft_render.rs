//! A software renderer for egui_kittest snapshots: egui's tessellated triangles rasterized on
//! the CPU, so that the images are the same on every machine, with no GPU, Vulkan or GL driver
//! (kittest's own renderer needs wgpu and a Vulkan or GL implementation).
//!
//! Triangles are filled at pixel centres with barycentric interpolation of the vertex colours
//! and texture coordinates, the texture sampled at the nearest texel, and blended as egui's
//! premultiplied colours are (`src + dst * (1 - src.a)`), all in egui's gamma space. egui's
//! tessellator already feathers edges for anti-aliasing, so nothing is supersampled. A shared
//! edge belongs to exactly one of its two triangles, so translucent shapes show no seams.

use std::collections::HashMap;

use egui::epaint::{Primitive, Vertex};
use egui::{Color32, ImageData, Pos2, TextureId, TexturesDelta};
use egui_kittest::TestRenderer;
use image::RgbaImage;

#[derive(Default)]
pub struct SoftRenderer {
    textures: HashMap<TextureId, Texture>,
}

struct Texture {
    width: usize,
    height: usize,
    pixels: Vec<Color32>,
}

impl Texture {
    fn texel(&self, u: f32, v: f32) -> Color32 {
        let x = ((u * self.width as f32) as isize).clamp(0, self.width as isize - 1) as usize;
        let y = ((v * self.height as f32) as isize).clamp(0, self.height as isize - 1) as usize;
        self.pixels[y * self.width + x]
    }
}

impl TestRenderer for SoftRenderer {
    fn handle_delta(&mut self, delta: &mut TexturesDelta) {
        for (id, image_delta) in delta.set.iter().flat_map(|(id, deltas)| deltas.iter().map(move |d| (id, d))) {
            let ImageData::Color(image) = &image_delta.image;
            let [w, h] = image.size;
            match image_delta.pos {
                None => {
                    self.textures.insert(*id, Texture { width: w, height: h, pixels: image.pixels.clone() });
                }
                Some([x0, y0]) => {
                    let tex = self.textures.get_mut(id).expect("a partial update of a known texture");
                    for y in 0..h {
                        let row = &image.pixels[y * w..(y + 1) * w];
                        tex.pixels[(y0 + y) * tex.width + x0..][..w].copy_from_slice(row);
                    }
                }
            }
        }
        for id in &delta.free {
            self.textures.remove(id);
        }
        // Applied: egui insists that a delta is consumed before it is dropped.
        delta.clear();
    }

    fn render(&mut self, ctx: &egui::Context, output: &egui::FullOutput) -> Result<RgbaImage, String> {
        let ppp = output.pixels_per_point;
        let primitives = ctx.tessellate(output.shapes.clone(), ppp);
        let screen = ctx.content_rect();
        let (width, height) = ((screen.width() * ppp).round() as usize, (screen.height() * ppp).round() as usize);
        let mut target = Target { width, pixels: vec![[0.0; 4]; width * height] };
        for p in primitives {
            let Primitive::Mesh(mesh) = p.primitive else {
                return Err("paint callbacks cannot be rendered in software".into());
            };
            let tex = self.textures.get(&mesh.texture_id).ok_or("a mesh uses an unknown texture")?;
            let clip = [
                (p.clip_rect.min.x * ppp).round().max(0.0) as usize,
                (p.clip_rect.min.y * ppp).round().max(0.0) as usize,
                ((p.clip_rect.max.x * ppp).round().max(0.0) as usize).min(width),
                ((p.clip_rect.max.y * ppp).round().max(0.0) as usize).min(height),
            ];
            for tri in mesh.indices.chunks_exact(3) {
                let v = [0, 1, 2].map(|i| mesh.vertices[tri[i] as usize]);
                target.fill(v, ppp, clip, tex);
            }
        }
        let bytes = target.pixels.iter().flat_map(|p| p.map(|c| c.round().clamp(0.0, 255.0) as u8)).collect();
        RgbaImage::from_raw(width as u32, height as u32, bytes).ok_or_else(|| "image size".to_string())
    }
}

struct Target {
    width: usize,
    /// Premultiplied RGBA, 0..255.
    pixels: Vec<[f32; 4]>,
}

/// Twice the signed area of (a, b, p): which side of the edge a -> b the point p is on.
fn edge(a: Pos2, b: Pos2, p: Pos2) -> f32 {
    (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
}

/// Whether a pixel centre lying exactly on the edge a -> b belongs to this triangle: of the two
/// triangles sharing an edge (which run it in opposite directions), exactly one says yes.
fn owns_edge(a: Pos2, b: Pos2) -> bool {
    let (dx, dy) = (b.x - a.x, b.y - a.y);
    dy > 0.0 || (dy == 0.0 && dx < 0.0)
}

impl Target {
    fn fill(&mut self, mut v: [Vertex; 3], ppp: f32, clip: [usize; 4], tex: &Texture) {
        for vert in &mut v {
            vert.pos = Pos2::new(vert.pos.x * ppp, vert.pos.y * ppp);
        }
        let mut area = edge(v[0].pos, v[1].pos, v[2].pos);
        if area == 0.0 || !area.is_finite() {
            return;
        }
        if area < 0.0 {
            v.swap(1, 2);
            area = -area;
        }
        let (p0, p1, p2) = (v[0].pos, v[1].pos, v[2].pos);
        let lo = |a: f32, b: f32, c: f32| a.min(b).min(c).floor().max(0.0) as usize;
        let hi = |a: f32, b: f32, c: f32| a.max(b).max(c).ceil().max(0.0) as usize;
        let (x0, y0) = (lo(p0.x, p1.x, p2.x).max(clip[0]), lo(p0.y, p1.y, p2.y).max(clip[1]));
        let (x1, y1) = (hi(p0.x, p1.x, p2.x).min(clip[2]), hi(p0.y, p1.y, p2.y).min(clip[3]));
        let owns = [owns_edge(p1, p2), owns_edge(p2, p0), owns_edge(p0, p1)];
        for y in y0..y1 {
            for x in x0..x1 {
                let p = Pos2::new(x as f32 + 0.5, y as f32 + 0.5);
                let w = [edge(p1, p2, p), edge(p2, p0, p), edge(p0, p1, p)];
                if !(0..3).all(|i| w[i] > 0.0 || (w[i] == 0.0 && owns[i])) {
                    continue;
                }
                let b = w.map(|wi| wi / area);
                let u = b[0] * v[0].uv.x + b[1] * v[1].uv.x + b[2] * v[2].uv.x;
                let t = b[0] * v[0].uv.y + b[1] * v[1].uv.y + b[2] * v[2].uv.y;
                let texel = tex.texel(u, t).to_array();
                let src: [f32; 4] = std::array::from_fn(|c| {
                    let vc = b[0] * v[0].color[c] as f32 + b[1] * v[1].color[c] as f32 + b[2] * v[2].color[c] as f32;
                    vc * texel[c] as f32 / 255.0
                });
                let dst = &mut self.pixels[y * self.width + x];
                let keep = 1.0 - src[3] / 255.0;
                for c in 0..4 {
                    dst[c] = src[c] + dst[c] * keep;
                }
            }
        }
    }
}
