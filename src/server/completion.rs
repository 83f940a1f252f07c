//! One completion: the engine's run of a request, answered whole or streamed as Server-Sent
//! Events, one per denoising step.
//!
//! A streamed step carries a `diffusion` object (the step, the planned steps, the masked
//! count, the answer as it stands with `░` for masked positions) and, OpenAI-shaped, the
//! `delta` of text that became final: the answer's committed prefix up to its first masked
//! position (committed tokens never change), up to the first end-of-text token. Writing to a
//! client that has gone fails, and the run is cancelled; it stops after the step in progress.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::Shared;
use super::api::{ApiError, CompletionRequest};
use crate::decoding::{GenerateParams, answer_ids};
use crate::engine::{Event, FinalText, Finished};

/// Chat or text completion: their object names and where the text goes.
#[derive(Clone, Copy)]
pub enum Kind {
    Chat,
    Text,
}

impl Kind {
    fn object(self, chunk: bool) -> &'static str {
        match (self, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Text, _) => "text_completion",
        }
    }

    /// A choice holding `text`: a message, a delta or a text.
    fn choice(self, text: &str, finish: Option<&str>, chunk: bool) -> Value {
        match (self, chunk) {
            (Kind::Chat, false) => {
                json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish})
            }
            (Kind::Chat, true) if text.is_empty() => json!({"index": 0, "delta": {}, "finish_reason": finish}),
            (Kind::Chat, true) => json!({"index": 0, "delta": {"content": text}, "finish_reason": finish}),
            (Kind::Text, _) => json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish}),
        }
    }
}

/// What a request runs: its prompt ids, settings and the turns dropped to fit it.
pub struct Job {
    pub kind: Kind,
    pub id: String,
    pub prompt: Vec<u32>,
    pub params: GenerateParams,
    pub request: CompletionRequest,
    pub dropped_turns: usize,
}

/// Cuts `text` at the first stop sequence; whether one was found.
fn apply_stop(text: &mut String, stop: &[String]) -> bool {
    match stop.iter().filter_map(|s| text.find(s.as_str())).min() {
        Some(at) => {
            text.truncate(at);
            true
        }
        None => false,
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Job {
    fn observe(&self, shared: &Shared, step: &crate::engine::StepEvent, steps: usize, prompt_len: usize) {
        if let Some(observer) = &shared.observer {
            observer(&super::ServedStep {
                request: self.id.clone(),
                step: step.index + 1,
                steps,
                prompt_len,
                canvas: step.canvas.clone(),
            });
        }
    }

    fn envelope(&self, shared: &Shared, chunk: bool, choice: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.kind.object(chunk),
            "created": now(),
            "model": shared.model_name,
            "choices": [choice],
        })
    }

    fn usage(&self, finished: &Finished, special: &crate::decoding::SpecialTokens) -> Value {
        let completion = answer_ids(finished.generated.answer(), special).len();
        json!({
            "prompt_tokens": self.prompt.len(),
            "completion_tokens": completion,
            "total_tokens": self.prompt.len() + completion,
        })
    }

    /// The final text and finish reason of a finished run.
    fn finish(&self, finished: &Finished, special: &crate::decoding::SpecialTokens) -> (String, &'static str) {
        let mut text = finished.text.clone();
        let answer = finished.generated.answer();
        let ended = answer_ids(answer, special).len() < answer.len();
        let stopped = apply_stop(&mut text, &self.request.stop);
        (text, if ended || stopped { "stop" } else { "length" })
    }

    /// Runs to the end and answers with one JSON body.
    pub fn answer_whole(self, shared: &Shared) -> Result<Value, ApiError> {
        let session = &shared.session;
        let generation = session.generate(self.prompt.clone(), self.params.clone()).map_err(super::engine_error)?;
        let (prompt_len, steps) = (self.prompt.len(), self.params.steps);
        let finished =
            generation.wait(|step| self.observe(shared, step, steps, prompt_len)).map_err(super::engine_error)?;
        let special = &session.info().special;
        let (text, reason) = self.finish(&finished, special);
        let mut body = self.envelope(shared, false, self.kind.choice(&text, Some(reason), false));
        body["usage"] = self.usage(&finished, special);
        body["dllm"] =
            json!({"steps": finished.generated.steps, "dropped_turns": self.dropped_turns, "ms": finished.total_ms});
        Ok(body)
    }

    /// Streams the run to `out` as Server-Sent Events; returns whether the client stayed to the
    /// end (false: it went, and the run was cancelled).
    pub fn stream(self, shared: &Shared, out: &mut dyn Write) -> Result<bool, ApiError> {
        let session = &shared.session;
        let (tk, special) = (session.tokenizer(), &session.info().special);
        let generation = session.generate(self.prompt.clone(), self.params.clone()).map_err(super::engine_error)?;
        let send = |out: &mut dyn Write, value: &Value| -> std::io::Result<()> {
            write!(out, "data: {value}\n\n")?;
            out.flush()
        };
        let (mut planned, mut prompt_len) = (self.params.steps, self.prompt.len());
        // The answer's final text, and what of it was sent.
        let (mut final_text, mut sent, mut stopped) = (FinalText::default(), String::new(), false);
        if let Kind::Chat = self.kind {
            let first = self.envelope(
                shared,
                true,
                json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}),
            );
            if send(out, &first).is_err() {
                generation.cancel();
                return Ok(false);
            }
        }
        for event in generation.events().iter() {
            let step = match event {
                Event::Started(started) => {
                    planned = started.plan.max_steps;
                    prompt_len = started.plan.prompt_len;
                    continue;
                }
                Event::Step(step) => step,
                Event::Failed(e) => return Err(super::engine_error(e)),
                Event::Done(finished) => {
                    // A stop sequence ended the answer (and cancelled the run): it is what was sent.
                    let (text, reason) = if stopped { (sent.clone(), "stop") } else { self.finish(&finished, special) };
                    let rest = text.strip_prefix(sent.as_str()).unwrap_or("");
                    let mut last = self.envelope(shared, true, self.kind.choice(rest, Some(reason), true));
                    last["usage"] = self.usage(&finished, special);
                    let ok = send(out, &last).and_then(|()| {
                        out.write_all(b"data: [DONE]\n\n")?;
                        out.flush()
                    });
                    return Ok(ok.is_ok());
                }
            };
            self.observe(shared, &step, planned, prompt_len);
            let answer = &step.canvas[prompt_len..];
            let masked = answer.iter().filter(|&&t| t == special.mask).count();
            let mut delta = String::new();
            if !stopped {
                delta = final_text.advance(answer, tk, special);
                let mut whole = sent.clone() + &delta;
                if apply_stop(&mut whole, &self.request.stop) {
                    // The answer ends here: say the rest when the run ends, stop it now.
                    stopped = true;
                    generation.cancel();
                    delta = whole[sent.len().min(whole.len())..].to_string();
                }
                sent.push_str(&delta);
            }
            let shown = tk.canvas_text(answer, special.mask);
            let mut chunk = self.envelope(shared, true, self.kind.choice(&delta, None, true));
            chunk["diffusion"] = json!({"step": step.index + 1, "steps": planned, "masked": masked, "answer": shown});
            if send(out, &chunk).is_err() {
                generation.cancel();
                shared.status.cancelled.fetch_add(1, Ordering::Relaxed);
                eprintln!("[{}] the client went at step {}; its run is cancelled", self.id, step.index + 1);
                return Ok(false);
            }
        }
        Ok(false)
    }
}
