// The tab's pure rules (static/telemetry/rules.js), on the cases the Python side is tested on
// too (tests/cases/tab_rules.json, tests/test_tab_rules.py), and the panel's note.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const fs = require("node:fs");

const R = require("../../static/telemetry/rules.js");

const CASES = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "cases", "tab_rules.json"), "utf8"));

test("the x a panel uses is layout.point_x's", () => {
  for (const c of CASES.point_x) {
    assert.equal(R.pointX(c.x, { seq: c.seq, data: c.data }), c.want, JSON.stringify(c));
  }
});

test("which value a stat card shows is what the key stats keep", () => {
  for (const c of CASES.reduce) {
    let shown = null;
    for (const v of c.values) shown = R.reduce(c.reduce, shown, v);
    assert.equal(shown, c.want, JSON.stringify(c));
  }
});

test("a line breaks where downsample.gaps says", () => {
  for (const c of CASES.breaks) {
    const holes = [];
    for (let i = 1; i < c.xs.length; i++) {
      if (R.breaksBetween(c.gap, c.xs[i - 1], c.xs[i])) holes.push([c.xs[i - 1], c.xs[i]]);
    }
    assert.deepEqual(holes, c.want, JSON.stringify(c));
  }
});

test("a log scale leaves off what downsample.on_log_scale leaves off", () => {
  for (const c of CASES.log_scale) {
    const kept = c.xs.filter((_, i) => R.drawable("log", c.ys[i]));
    const off = c.xs.filter((_, i) => !R.drawable("log", c.ys[i]));
    assert.deepEqual([kept, off], [c.want_xs, c.left_off], JSON.stringify(c));
    assert.ok(c.ys.every((y) => R.drawable("linear", y)));
  }
});

test("a panel note says of NaN what div telemetry says", () => {
  for (const c of CASES.passed_over) {
    assert.equal(R.passedOver(c.key, c.count, c.x, c.at), c.want);
  }
});

// ---- the rest of the panel's note: the tab's own --------------------------------------------

const panel = (over) => ({ keys: ["loss"], x: "step", range: null, traces: {}, written: {}, ...over });
const trace = (over) => ({ total: 10, drawn: 10, passed_over: 0, first_passed_x: null, off_log_scale: 0, ...over });

test("no points yet is only for a key no point has written", () => {
  assert.equal(R.panelNote(panel({})), "loss: no points yet");
  assert.equal(R.hasPoints(R.panelTraces(panel({}))), false);
  assert.equal(R.panelNote(panel({ written: { loss: 97999 }, traces: { loss: trace() } })), "");
});

test("a key with points but none in view says so, and the panel keeps its axes", () => {
  const zoomed = panel({
    keys: ["loss", "gnorm"],
    range: [60, 90],
    written: { loss: 200000, gnorm: 97999 },
    traces: { loss: trace({ total: 31, drawn: 31 }), gnorm: trace({ total: 0, drawn: 0 }) },
  });
  assert.equal(R.panelNote(zoomed), "gnorm: no points in this range");
  assert.equal(R.hasPoints(R.panelTraces(zoomed)), true);
});

test("a comparison's panel keeps its axes while any run's key has points", () => {
  const traces = [{ label: "run-3", written: 0 }, { label: "run-7", written: 5 }];
  assert.equal(R.hasPoints({ x: "step", range: null, traces }), true);
  assert.equal(R.hasPoints({ x: "step", range: null, traces: traces.slice(0, 1) }), false);
});

test("a key whose points all lack the panel's x says so", () => {
  const note = R.panelNote(panel({ written: { loss: 3 }, traces: { loss: trace({ total: 0, drawn: 0 }) } }));
  assert.equal(note, "loss: no points with step");
});

test("a log panel counts what it leaves off, and not among its n of N", () => {
  const one = panel({ written: { loss: 5 }, traces: { loss: trace({ total: 4, drawn: 4, off_log_scale: 1 }) } });
  assert.equal(R.panelNote(one), "loss: 1 point ≤ 0 not shown on a log scale");
  const many = panel({ written: { loss: 9000 }, traces: { loss: trace({ total: 8000, drawn: 4000, off_log_scale: 1000 }) } });
  assert.equal(R.panelNote(many), "loss: 4,000 of 8,000 points · loss: 1,000 points ≤ 0 not shown on a log scale");
  const all = panel({ written: { loss: 2 }, traces: { loss: trace({ total: 0, drawn: 0, off_log_scale: 2 }) } });
  assert.equal(R.panelNote(all), "loss: 2 points ≤ 0 not shown on a log scale");
});

test("a panel note joins its keys' parts", () => {
  const note = R.panelNote(panel({
    keys: ["loss", "eval_loss"],
    written: { loss: 100 },
    traces: { loss: trace({ total: 100, drawn: 100, passed_over: 2, first_passed_x: 300 }) },
  }));
  assert.equal(note, "loss: 2 values passed over as NaN or Infinity, first at step 300 · eval_loss: no points yet");
});

test("tally counts the points that carry each key", () => {
  const written = R.tally({ loss: 2 }, [{ seq: 3, data: { step: 3, loss: 1 } }, { seq: 4, data: { step: 4 } }]);
  assert.deepEqual(written, { loss: 3, step: 2 });
});

// A rule tested here says what the page does only if the page calls it, never a copy of it.
test("every rule is called by a page's script or by another rule", () => {
  const dir = path.join(__dirname, "..", "..", "static", "telemetry");
  const read = (name) => fs.readFileSync(path.join(dir, name), "utf8");
  const pages = fs.readdirSync(dir).filter((f) => f.endsWith(".js") && f !== "rules.js").map(read).join("\n");
  const rules = read("rules.js");
  const uncalled = Object.keys(R).filter((name) => {
    if (name === "panelNote") return false; // a run's panel as the cases write it: traceNotes says it
    const byPage = new RegExp(`\\bTabRules\\.${name}\\(`).test(pages);
    const byRule = (rules.match(new RegExp(`(?<!function )\\b${name}\\(`, "g")) || []).length > 0;
    return !byPage && !byRule;
  });
  assert.deepEqual(uncalled, []);
});
