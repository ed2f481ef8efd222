// What a panel says of traces of several runs (static/telemetry/rules.js): a comparison's
// panel names each trace by its run, and its key when it draws more than one.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");

const R = require("../../static/telemetry/rules.js");

const series = (over) => ({ total: 10, drawn: 10, passed_over: 0, first_passed_x: null, off_log_scale: 0, ...over });

test("a run's tab calls a trace by its key; a comparison by its run, and its key when it must", () => {
  assert.equal(R.traceLabel(null, "loss", ["loss"]), "loss");
  assert.equal(R.traceLabel("run-7", "loss", ["loss"]), "run-7");
  assert.equal(R.traceLabel("run-7", "eval_loss", ["loss", "eval_loss"]), "run-7 eval_loss");
  assert.equal(R.legendName(null, "loss"), "loss");
  assert.equal(R.legendName("run-7", "loss"), "run-7 loss");
});

test("a key one run never wrote says so of that run, never a line at zero", () => {
  const note = R.traceNotes({
    x: "step",
    range: null,
    traces: [
      { label: "run-3", written: 412, series: series() },
      { label: "run-7", written: undefined, series: undefined },
    ],
  });
  assert.equal(note, "run-7: no points yet");
});

test("each part of a comparison's note names its trace", () => {
  const note = R.traceNotes({
    x: "epoch",
    range: [2, 3],
    traces: [
      { label: "run-3 loss", written: 5, series: series({ total: 0, drawn: 0 }) },
      { label: "run-7 loss", written: 9, series: series({ total: 8000, drawn: 400, passed_over: 2, first_passed_x: 2.5 }) },
    ],
  });
  assert.equal(note, "run-3 loss: no points in this range · run-7 loss: 400 of 8,000 points · run-7 loss: 2 values passed over as NaN or Infinity, first at epoch 2.5");
});

test("a run's tab's note is the same note of traces called by their keys", () => {
  const panel = { keys: ["loss", "eval_loss"], x: "step", range: null, written: { loss: 3 }, traces: { loss: series({ total: 0, drawn: 0 }) } };
  assert.equal(R.panelNote(panel), "loss: no points with step · eval_loss: no points yet");
});

test("the runs of a comparison get colours of their own, and a panel's keys dashes of their own", () => {
  const colours = Array.from({ length: 20 }, (_, i) => R.runColor(i));
  assert.equal(new Set(colours).size, 20);
  assert.ok(colours.every((c) => /^#[0-9a-f]{6}$/.test(c)));
  assert.equal(new Set([0, 1, 2, 3].map(R.keyDash)).size, 4);
});
