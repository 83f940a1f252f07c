// Runs the script of a dllm replay page (argv[2]) under Node.js with the few DOM pieces it
// uses, moves its slider to every step, then presses Play; prints what the page shows at each
// point as JSON. Used by tests/suite/export.rs.
"use strict";
const fs = require("fs");
const page = fs.readFileSync(process.argv[2], "utf8");
const scripts = [...page.matchAll(/<script[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]);
class Element {
  constructor() { this.children = []; this.style = {}; this.textContent = ""; this.title = ""; this.value = 0; }
  appendChild(child) { this.children.push(child); return child; }
}
const elements = {};
global.document = {
  getElementById: (id) => (id === "run" ? Object.assign(new Element(), { textContent: scripts[0] }) : (elements[id] ||= new Element())),
  createElement: () => new Element(),
};
// A timer that fires at once, until cleared.
let live = false;
global.setInterval = (tick) => { live = true; while (live) tick(); return 1; };
global.clearInterval = () => { live = false; };
(0, eval)(scripts[1]);
const { grid, step, label, play } = elements;
const shown = () => ({
  label: label.textContent,
  cells: grid.children.map((c) => c.textContent),
  outlined: grid.children.filter((c) => c.style.outline !== "none").length,
});
const views = [];
for (let s = 0; s <= Number(step.max); s++) {
  step.value = s;
  step.oninput();
  views.push(shown());
}
play.onclick();
console.log(JSON.stringify({ views, after_play: shown(), play_button: play.textContent }));
