//! The backbone's forward pass, once for every backend and architecture: the layer loop (dense
//! or mixture-of-experts FFN, optional q/k norms), the pass kinds (full, fill the K/V cache, a
//! window against it) and the cache's bookkeeping.

use std::sync::Arc;

use super::{Forward, Pass, check_pass};
use crate::backend::{Act, Backend, ExpertPart, Keys, PassShape, RowRule};
use crate::gguf::GgufFile;
use crate::model::weights::{Expert, Ffn, Weights};
use crate::model::{ModelConfig, ModelError};

/// A model on a backend: its weights in the backend's form, and the backend's buffers.
pub struct Transformer<B: Backend> {
    gguf: Arc<GgufFile>,
    config: ModelConfig,
    weights: Weights<B::Matrix, B::Vector>,
    backend: B,
    /// Canvas length of the pass that filled the K/V cache; 0 when it is empty.
    cached_len: usize,
    /// The LM head's rows within the window, reused between passes.
    head_rows: Vec<usize>,
}

impl<B: Backend> Transformer<B> {
    pub fn new(gguf: Arc<GgufFile>, config: ModelConfig, weights: Weights<B::Matrix, B::Vector>, backend: B) -> Self {
        Transformer { gguf, config, weights, backend, cached_len: 0, head_rows: Vec::new() }
    }

    pub fn gguf(&self) -> &Arc<GgufFile> {
        &self.gguf
    }

    /// The weights in the backend's form.
    pub fn weights(&self) -> &Weights<B::Matrix, B::Vector> {
        &self.weights
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Runs a pass up to the LM head, whose output for `rows` the backend holds in `Logits`.
    fn run(&mut self, tokens: &[u32], pass: &Pass, rows: &[usize]) -> Result<(), ModelError> {
        let Transformer { gguf, config: c, weights: w, backend: b, cached_len, head_rows } = self;
        let window = check_pass(c, tokens, pass, rows)?;
        let len = tokens.len();
        match pass {
            Pass::Full => {}
            Pass::FillCache => *cached_len = len,
            Pass::Window(_) if *cached_len != len => {
                return Err(ModelError::CacheMismatch { cached: *cached_len, canvas: len });
            }
            Pass::Window(_) => {}
        }
        // Every per-position operation runs on the window's n rows only.
        let (n, m) = (window.len(), rows.len());
        let (d, kv, eps) = (c.n_embd, c.kv_dim(), c.rms_eps);
        b.begin_pass(c, &PassShape { len, window: window.clone(), head_rows: m })?;
        b.embed(gguf, &w.token_embd, &tokens[window.clone()])?;
        for (l, layer) in w.layers.iter().enumerate() {
            b.rms_norm(Act::X, &layer.attn_norm, Act::H, n, eps)?;
            b.linear(&layer.wq, Act::H, Act::Q, n, false)?;
            b.linear(&layer.wk, Act::H, Act::K, n, true)?;
            b.linear(&layer.wv, Act::H, Act::V, n, true)?;
            for (x, bias) in [(Act::Q, &layer.bq), (Act::K, &layer.bk), (Act::V, &layer.bv)] {
                if let Some(bias) = bias {
                    b.add_bias(x, bias, n)?;
                }
            }
            // LLaDA-MoE and RND1 normalize each head of q and k before RoPE.
            if let Some(q_norm) = &layer.q_norm {
                b.rms_norm(Act::Q, q_norm, Act::Q, n * c.n_head, eps)?;
            }
            if let Some(k_norm) = &layer.k_norm {
                b.rms_norm(Act::K, k_norm, Act::K, n * c.n_head_kv, eps)?;
            }
            b.rope(c, Act::Q, n, c.n_head, window.start)?;
            b.rope(c, Act::K, n, c.n_head_kv, window.start)?;
            let keys = match pass {
                Pass::Full => Keys::Fresh,
                Pass::FillCache => {
                    b.cache_store(l, c.n_layer, len, kv)?;
                    Keys::Fresh
                }
                Pass::Window(_) => {
                    b.cache_assemble(l, &window, len, kv)?;
                    Keys::Assembled
                }
            };
            b.attention(c, keys, n, len)?;
            b.linear(&layer.wo, Act::Att, Act::H, n, false)?;
            b.add_into(Act::X, Act::H, n * d)?;
            b.rms_norm(Act::X, &layer.ffn_norm, Act::H, n, eps)?;
            match &layer.ffn {
                Ffn::Dense(ffn) => {
                    swiglu_ffn(b, ffn, Act::H, n, c.n_ff, Act::H)?;
                    b.add_into(Act::X, Act::H, n * d)?;
                }
                Ffn::Moe { router, experts } => {
                    let m = c.moe.as_ref().expect("a file with expert tensors has a MoE config");
                    b.linear(router, Act::H, Act::Router, n, false)?;
                    b.route(m, n)?;
                    // Every chosen (row, expert) pair once, grouped by expert: one product per
                    // expert over all of its rows.
                    b.gather_routed(Act::H, d, Act::Picked)?;
                    b.linear_experts(l, ExpertPart::Gate, experts, Act::Picked, Act::Gate, false)?;
                    b.linear_experts(l, ExpertPart::Up, experts, Act::Picked, Act::Up, true)?;
                    b.swiglu(n * m.n_expert_used * m.n_ff_exp)?;
                    b.linear_experts(l, ExpertPart::Down, experts, Act::Gate, Act::Picked, false)?;
                    b.combine_routed(Act::Picked, d, Act::Moe)?;
                    b.add_into(Act::X, Act::Moe, n * d)?;
                }
            }
        }
        // Final norm and LM head only for the requested rows.
        if m == 0 {
            return Ok(());
        }
        head_rows.clear();
        head_rows.extend(rows.iter().map(|&r| r - window.start));
        b.rms_norm_rows(head_rows, &w.output_norm, eps)?;
        b.linear(&w.output, Act::Head, Act::Logits, m, false)
    }
}

/// `output = down(silu(gate(input)) * up(input))` for `rows` rows, `ff` the hidden width.
fn swiglu_ffn<B: Backend>(
    b: &mut B,
    ffn: &Expert<B::Matrix>,
    input: Act,
    rows: usize,
    ff: usize,
    output: Act,
) -> Result<(), ModelError> {
    b.linear(&ffn.gate, input, Act::Gate, rows, false)?;
    b.linear(&ffn.up, input, Act::Up, rows, true)?;
    b.swiglu(rows * ff)?;
    b.linear(&ffn.down, Act::Gate, output, rows, false)
}

impl<B: Backend> Forward for Transformer<B> {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn forward_pass(
        &mut self,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        self.run(tokens, pass, rows)?;
        self.backend.logits_to_host(rows.len() * self.config.n_vocab, logits)
    }

    fn choose_rows(
        &mut self,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
        rule: &RowRule,
        uniforms: &[f64],
        out: &mut Vec<(u32, f64)>,
    ) -> Result<bool, ModelError> {
        if !self.backend.chooses_rows(rule) {
            return Ok(false);
        }
        self.run(tokens, pass, rows)?;
        self.backend.choose_rows(rows.len(), self.config.n_vocab, rule, uniforms, out)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    //! The loop's contract with every backend, on a backend that records the calls: what runs
    //! for each pass kind, in which order, on which rows. (The CPU backend's numbers are checked
    //! against the goldens; this is what the CUDA backend relies on as well.)

    use std::ops::Range;

    use super::*;
    use crate::model::weights::{Layer, MatrixRef};
    use crate::model::{Family, MoeConfig, RopeStyle};

    #[derive(Default)]
    struct Recorder {
        calls: Vec<String>,
    }

    impl Backend for Recorder {
        type Matrix = &'static str;
        type Vector = &'static str;

        fn begin_pass(&mut self, _: &ModelConfig, s: &PassShape) -> Result<(), ModelError> {
            self.calls.push(format!("begin {} {:?} {}", s.len, s.window, s.head_rows));
            Ok(())
        }
        fn embed(&mut self, _: &GgufFile, _: &MatrixRef, tokens: &[u32]) -> Result<(), ModelError> {
            self.calls.push(format!("embed {tokens:?}"));
            Ok(())
        }
        fn rms_norm(&mut self, i: Act, w: &&str, o: Act, rows: usize, _: f32) -> Result<(), ModelError> {
            self.calls.push(format!("norm {w} {i:?}->{o:?} {rows}"));
            Ok(())
        }
        fn rms_norm_rows(&mut self, rows: &[usize], w: &&str, _: f32) -> Result<(), ModelError> {
            self.calls.push(format!("norm rows {w} {rows:?}"));
            Ok(())
        }
        fn linear(&mut self, w: &&str, i: Act, o: Act, rows: usize, same: bool) -> Result<(), ModelError> {
            self.calls.push(format!("linear {w} {i:?}->{o:?} {rows}{}", if same { " same input" } else { "" }));
            Ok(())
        }
        fn add_bias(&mut self, x: Act, b: &&str, rows: usize) -> Result<(), ModelError> {
            self.calls.push(format!("bias {b} {x:?} {rows}"));
            Ok(())
        }
        fn rope(&mut self, _: &ModelConfig, x: Act, rows: usize, heads: usize, first: usize) -> Result<(), ModelError> {
            self.calls.push(format!("rope {x:?} {rows} x {heads} from {first}"));
            Ok(())
        }
        fn attention(&mut self, _: &ModelConfig, k: Keys, rows: usize, keys: usize) -> Result<(), ModelError> {
            self.calls.push(format!("attention {k:?} {rows} over {keys}"));
            Ok(())
        }
        fn swiglu(&mut self, n: usize) -> Result<(), ModelError> {
            self.calls.push(format!("swiglu {n}"));
            Ok(())
        }
        fn add_into(&mut self, x: Act, y: Act, n: usize) -> Result<(), ModelError> {
            self.calls.push(format!("add {y:?}->{x:?} {n}"));
            Ok(())
        }
        fn cache_store(&mut self, l: usize, n_layer: usize, len: usize, kv: usize) -> Result<(), ModelError> {
            self.calls.push(format!("store {l}/{n_layer} {len}x{kv}"));
            Ok(())
        }
        fn cache_assemble(&mut self, l: usize, w: &Range<usize>, len: usize, kv: usize) -> Result<(), ModelError> {
            self.calls.push(format!("assemble {l} {w:?} {len}x{kv}"));
            Ok(())
        }
        fn route(&mut self, m: &MoeConfig, rows: usize) -> Result<(), ModelError> {
            self.calls.push(format!("route {rows} to {} of {}", m.n_expert_used, m.n_expert));
            Ok(())
        }
        fn gather_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError> {
            self.calls.push(format!("gather {src:?}->{dst:?} {width}"));
            Ok(())
        }
        fn linear_experts(
            &mut self,
            layer: usize,
            part: ExpertPart,
            experts: &[Expert<&'static str>],
            i: Act,
            o: Act,
            same: bool,
        ) -> Result<(), ModelError> {
            let names: Vec<&str> = experts.iter().map(|e| *part.of(e)).collect();
            let same = if same { " same input" } else { "" };
            self.calls.push(format!("experts {layer} {part:?} {names:?} {i:?}->{o:?}{same}"));
            Ok(())
        }
        fn combine_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError> {
            self.calls.push(format!("combine {src:?}->{dst:?} {width}"));
            Ok(())
        }
        fn logits_to_host(&mut self, n: usize, out: &mut Vec<f32>) -> Result<(), ModelError> {
            self.calls.push(format!("logits {n}"));
            out.resize(n, 0.0);
            Ok(())
        }
    }

    fn model() -> Transformer<Recorder> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/models/llada-tiny-F32.gguf");
        let gguf = Arc::new(GgufFile::open(std::path::Path::new(path)).unwrap());
        let config = ModelConfig {
            family: Family::Dream,
            architecture: "dream".into(),
            n_vocab: 10,
            n_embd: 8,
            n_layer: 2,
            n_head: 2,
            n_head_kv: 1,
            head_dim: 4,
            n_ff: 16,
            context_length: 32,
            rope_base: 10_000.0,
            rope_dims: 4,
            rope_style: RopeStyle::Halves,
            rms_eps: 1e-6,
            shift_logits: true,
            moe: None,
        };
        let layer = |bias| Layer {
            attn_norm: "attn_norm",
            wq: "wq",
            wk: "wk",
            wv: "wv",
            wo: "wo",
            bq: bias,
            bk: None,
            bv: None,
            q_norm: None,
            k_norm: None,
            ffn_norm: "ffn_norm",
            ffn: Ffn::Dense(Expert { gate: "gate", up: "up", down: "down" }),
        };
        let table = MatrixRef { ty: crate::quant::GgmlType::F32, n_in: 8, n_out: 10, offset: 0, n_bytes: 320 };
        let weights = Weights {
            token_embd: table,
            layers: vec![layer(Some("bq")), layer(None)],
            output_norm: "out_norm",
            output: "head",
        };
        Transformer::new(gguf, config, weights, Recorder::default())
    }

    fn layer_calls(l: usize, n: usize, first: usize, kv: &[String], keys: &str) -> Vec<String> {
        let mut calls = vec![
            format!("norm attn_norm X->H {n}"),
            format!("linear wq H->Q {n}"),
            format!("linear wk H->K {n} same input"),
            format!("linear wv H->V {n} same input"),
        ];
        if l == 0 {
            calls.push(format!("bias bq Q {n}"));
        }
        calls.extend([format!("rope Q {n} x 2 from {first}"), format!("rope K {n} x 1 from {first}")]);
        calls.extend(kv.iter().cloned());
        calls.extend([
            keys.to_string(),
            format!("linear wo Att->H {n}"),
            format!("add H->X {}", n * 8),
            format!("norm ffn_norm X->H {n}"),
            format!("linear gate H->Gate {n}"),
            format!("linear up H->Up {n} same input"),
            format!("swiglu {}", n * 16),
            format!("linear down Gate->H {n}"),
            format!("add H->X {}", n * 8),
        ]);
        calls
    }

    fn run(
        m: &mut Transformer<Recorder>,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
    ) -> Result<Vec<String>, ModelError> {
        m.backend_mut().calls.clear();
        let mut logits = Vec::new();
        m.forward_pass(tokens, pass, rows, &mut logits)?;
        assert_eq!(logits.len(), rows.len() * 10);
        Ok(std::mem::take(&mut m.backend_mut().calls))
    }

    /// A MoE layer on the recorder: q/k norms per head before RoPE, then the router, the rows
    /// gathered by expert, each of the three expert products once over all experts' rows (the
    /// gate's quantized input serving the up product), and the weighted outputs combined.
    #[test]
    fn a_moe_layer_norms_q_and_k_and_runs_the_experts_over_the_gathered_rows() {
        let mut m = model();
        m.config.moe =
            Some(MoeConfig { n_expert: 4, n_expert_used: 2, n_ff_exp: 6, normalize_weights: true, weights_scale: 0.0 });
        let names = ["e0", "e1", "e2", "e3"];
        for layer in &mut m.weights.layers {
            layer.q_norm = Some("q_norm");
            layer.k_norm = Some("k_norm");
            layer.ffn = Ffn::Moe {
                router: "router",
                experts: names.iter().map(|&e| Expert { gate: e, up: e, down: e }).collect(),
            };
        }
        let calls = run(&mut m, &[1, 2, 3], &Pass::Full, &[0]).unwrap();
        let at = |c: &str| calls.iter().position(|x| x == c).unwrap_or_else(|| panic!("no call {c}: {calls:#?}"));
        assert!(at("norm q_norm Q->Q 6") < at("rope Q 3 x 2 from 0"), "q normed per head (3 rows x 2 heads) first");
        assert!(at("norm k_norm K->K 3") < at("rope K 3 x 1 from 0"));
        for l in 0..2 {
            let first = calls.iter().enumerate().filter(|(_, c)| *c == "linear router H->Router 3").nth(l).unwrap().0;
            let want = [
                "linear router H->Router 3".to_string(),
                "route 3 to 2 of 4".into(),
                "gather H->Picked 8".into(),
                format!("experts {l} Gate {names:?} Picked->Gate"),
                format!("experts {l} Up {names:?} Picked->Up same input"),
                // 3 rows x 2 experts x 6 hidden values.
                "swiglu 36".into(),
                format!("experts {l} Down {names:?} Gate->Picked"),
                "combine Picked->Moe 8".into(),
                "add Moe->X 24".into(),
            ];
            assert_eq!(calls[first..first + want.len()], want[..]);
        }
    }

    #[test]
    fn a_full_pass_runs_every_layer_on_every_row_and_the_head_on_the_asked_rows() {
        let mut m = model();
        let calls = run(&mut m, &[1, 2, 3, 4, 5], &Pass::Full, &[4, 2]).unwrap();
        let mut want = vec!["begin 5 0..5 2".to_string(), "embed [1, 2, 3, 4, 5]".to_string()];
        for l in 0..2 {
            want.extend(layer_calls(l, 5, 0, &[], "attention Fresh 5 over 5"));
        }
        want.extend(["norm rows out_norm [4, 2]".to_string(), "linear head Head->Logits 2".to_string()]);
        want.push("logits 20".into());
        assert_eq!(calls, want);
    }

    #[test]
    fn a_window_reads_the_cache_its_fill_left_and_only_the_window_runs() {
        let mut m = model();
        let tokens = [1, 2, 3, 4, 5, 6];
        let calls = run(&mut m, &tokens, &Pass::FillCache, &[]).unwrap();
        let store = |l: usize| vec![format!("store {l}/2 6x4")];
        let mut want = vec!["begin 6 0..6 0".to_string(), "embed [1, 2, 3, 4, 5, 6]".to_string()];
        for l in 0..2 {
            want.extend(layer_calls(l, 6, 0, &store(l), "attention Fresh 6 over 6"));
        }
        // No rows asked: no head, no logits.
        want.push("logits 0".into());
        assert_eq!(calls, want);

        let calls = run(&mut m, &tokens, &Pass::Window(2..4), &[3]).unwrap();
        let assemble = |l: usize| vec![format!("assemble {l} 2..4 6x4")];
        let mut want = vec!["begin 6 2..4 1".to_string(), "embed [3, 4]".to_string()];
        for l in 0..2 {
            want.extend(layer_calls(l, 2, 2, &assemble(l), "attention Assembled 2 over 6"));
        }
        // The head's rows are the window's own.
        want.extend(["norm rows out_norm [1]".to_string(), "linear head Head->Logits 1".to_string()]);
        want.push("logits 10".into());
        assert_eq!(calls, want);
    }

    #[test]
    fn a_window_against_another_canvas_is_refused_before_any_work() {
        let mut m = model();
        let e = run(&mut m, &[1, 2, 3], &Pass::Window(0..2), &[0]).unwrap_err();
        assert!(matches!(e, ModelError::CacheMismatch { cached: 0, canvas: 3 }), "{e}");
        run(&mut m, &[1, 2, 3, 4], &Pass::FillCache, &[]).unwrap();
        let e = run(&mut m, &[1, 2, 3], &Pass::Window(0..2), &[0]).unwrap_err();
        assert!(matches!(e, ModelError::CacheMismatch { cached: 4, canvas: 3 }), "{e}");
        assert!(m.backend().calls.is_empty());
        let e = run(&mut m, &[1, 2, 3, 4], &Pass::Window(1..3), &[0]).unwrap_err();
        assert!(matches!(e, ModelError::RowOutsideWindow { row: 0, .. }), "{e}");
        assert!(run(&mut m, &[1, 2, 3, 4], &Pass::Window(1..3), &[2]).is_ok());
    }
}
