//! A run as a self-contained HTML page: the canvas at every step, with a slider and a play
//! button, so that a demo of diffusion decoding can be shared and replayed without dllm. The
//! data, the style and the script are all inline; the page loads nothing.

use serde::Serialize;

use crate::engine::StepEvent;
use crate::tokenizer::Tokenizer;

/// What a page shows: the canvas before the first step and every step's events.
pub struct RunRecord<'a> {
    pub title: &'a str,
    pub prompt_len: usize,
    pub mask: u32,
    pub initial: &'a [u32],
    pub steps: &'a [StepEvent],
}

/// The page's data, read by its script.
#[derive(Serialize)]
struct PageData {
    prompt_len: usize,
    /// The text of each cell before the first step.
    initial: Vec<String>,
    steps: Vec<PageStep>,
}

#[derive(Serialize)]
struct PageStep {
    /// Forward plus sampling time.
    ms: f64,
    /// The cells this step changed: (position, text, confidence of the commit when known).
    changes: Vec<(usize, String, Option<f32>)>,
}

/// The HTML page for `run`; cell texts are as the app shows them (`Tokenizer::cell_text`).
pub fn html_page(tokenizer: &Tokenizer, run: &RunRecord) -> String {
    let text = |id: u32| tokenizer.cell_text(id, run.mask);
    let mut previous = run.initial;
    let steps = run
        .steps
        .iter()
        .map(|step| {
            let changes = step
                .canvas
                .iter()
                .enumerate()
                .filter(|&(pos, id)| previous.get(pos) != Some(id))
                .map(|(pos, &id)| {
                    let confidence = step.committed.iter().find(|c| c.0 == pos).map(|c| c.1);
                    (pos, text(id), confidence)
                })
                .collect();
            previous = &step.canvas;
            PageStep { ms: step.forward_ms + step.sample_ms, changes }
        })
        .collect();
    let data =
        PageData { prompt_len: run.prompt_len, initial: run.initial.iter().map(|&id| text(id)).collect(), steps };
    let json = serde_json::to_string(&data).expect("plain data serializes");
    TEMPLATE.replace("{{TITLE}}", &escape_html(run.title)).replace("{{DATA}}", &script_safe(&json))
}

/// Text for an HTML element or attribute.
fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// JSON that can sit inside a `<script>` element: a token's text could hold `</script>` or
/// `<!--`, so every `<` is written as its JSON escape.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

const TEMPLATE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{TITLE}}</title>
<style>
body { background: #1b1b1b; color: #ddd; font: 15px system-ui, sans-serif; margin: 24px; }
h1 { font-size: 18px; font-weight: 500; }
#controls { display: flex; gap: 12px; align-items: center; margin: 12px 0; }
#step { width: 420px; }
#grid { display: flex; flex-wrap: wrap; gap: 3px 2px; max-width: 1100px; }
.cell { font: 13px ui-monospace, monospace; padding: 2px 4px; border-radius: 3px; white-space: pre; }
footer { margin-top: 16px; color: #888; font-size: 12px; }
</style>
</head>
<body>
<h1>{{TITLE}}</h1>
<div id="controls">
<button id="play">Play</button>
<input id="step" type="range" min="0" value="0" aria-label="step">
<span id="label"></span>
</div>
<div id="grid"></div>
<footer>Prompt cells grey, masked cells dark, commits coloured from blue (early steps) to orange
(late), the step shown outlined. Hover a cell for its step and confidence. Written by dllm.</footer>
<script id="run" type="application/json">{{DATA}}</script>
<script>
"use strict";
const run = JSON.parse(document.getElementById("run").textContent);
const n = run.steps.length, len = run.initial.length;
const grid = document.getElementById("grid"), slider = document.getElementById("step");
const label = document.getElementById("label"), play = document.getElementById("play");
slider.max = n;
const cells = run.initial.map(() => grid.appendChild(document.createElement("span")));
function colour(k) {
  const t = n <= 1 ? 0 : k / (n - 1), mix = (a, b) => Math.round((a + (b - a) * t) * 0.55);
  return "rgb(" + mix(60, 235) + "," + mix(120, 150) + "," + mix(230, 50) + ")";
}
function show(s) {
  const text = run.initial.slice(), step = new Array(len).fill(-1), conf = new Array(len).fill(null);
  for (let k = 0; k < s; k++) {
    for (const [pos, t, c] of run.steps[k].changes) { text[pos] = t; step[pos] = k; conf[pos] = c; }
  }
  cells.forEach((cell, i) => {
    cell.className = "cell";
    cell.textContent = text[i];
    const masked = i >= run.prompt_len && step[i] < 0;
    cell.style.background = i < run.prompt_len ? "#373737" : masked ? "#232323" : colour(step[i]);
    cell.style.color = masked ? "#5a5a5a" : i < run.prompt_len ? "#c8c8c8" : "#fff";
    cell.style.outline = s > 0 && step[i] === s - 1 ? "2px solid #f0dc50" : "none";
    cell.title = "position " + i + (step[i] >= 0
      ? ", step " + (step[i] + 1) + (conf[i] === null ? "" : ", confidence " + conf[i].toFixed(3)) : "");
  });
  slider.value = s;
  label.textContent = "step " + s + " of " + n + (s > 0 ? " (" + run.steps[s - 1].ms.toFixed(0) + " ms)" : "");
}
let timer = null;
function stop() { clearInterval(timer); timer = null; play.textContent = "Play"; }
play.onclick = () => {
  if (timer) { stop(); return; }
  let s = Number(slider.value) >= n ? 0 : Number(slider.value);
  play.textContent = "Pause";
  timer = setInterval(() => { show(++s); if (s >= n) stop(); }, Math.max(30, 6000 / Math.max(n, 1)));
};
slider.oninput = () => { stop(); show(Number(slider.value)); };
show(n);
</script>
</body>
</html>
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_text_cannot_end_the_script_or_the_title() {
        let json = serde_json::to_string(&vec!["</script><script>alert(1)</script>", "<!--"]).unwrap();
        let safe = script_safe(&json);
        assert!(!safe.contains('<'));
        assert_eq!(serde_json::from_str::<Vec<String>>(&safe).unwrap()[0], "</script><script>alert(1)</script>");
        assert_eq!(escape_html("a <b> & \"c\""), "a &lt;b&gt; &amp; &quot;c&quot;");
    }
}
