// The tab's sections (static/telemetry/rules.js): the default layout's panels grouped by the
// first dotted part of their key, as a run of many keys shows them.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");

const R = require("../../static/telemetry/rules.js");

test("a key's section is the part before its first dot", () => {
  assert.equal(R.sectionOf("layer03.attn.grad_norm"), "layer03");
  assert.equal(R.sectionOf("eval.loss"), "eval");
  assert.equal(R.sectionOf("loss"), null);
});

test("the panels of a prefix two keys share make a section where its first key arrived", () => {
  const keys = ["loss", "layer00.grad_norm", "lr", "layer00.act_mean", "layer01.grad_norm", "layer01.act_mean"];
  assert.deepEqual(R.sections(keys), [
    { section: null, panels: [0] },
    { section: "layer00", panels: [1, 3] },
    { section: null, panels: [2] },
    { section: "layer01", panels: [4, 5] },
  ]);
});

test("a key alone under its prefix stays a panel of its own", () => {
  assert.deepEqual(R.sections(["loss", "eval.loss"]), [
    { section: null, panels: [0] },
    { section: null, panels: [1] },
  ]);
  // Once a second eval key arrives, the two make a section where the first was.
  assert.deepEqual(R.sections(["loss", "eval.loss", "lr", "eval.acc"]), [
    { section: null, panels: [0] },
    { section: "eval", panels: [1, 3] },
    { section: null, panels: [2] },
  ]);
});

test("a prefix that is a name objects have is a prefix like any other", () => {
  assert.deepEqual(R.sections(["__proto__.a", "__proto__.b", "constructor.c"]), [
    { section: "__proto__", panels: [0, 1] },
    { section: null, panels: [2] },
  ]);
});

test("250 keys of 25 layers make 25 sections of 10 panels", () => {
  const keys = [];
  for (let layer = 0; layer < 25; layer++) for (let m = 0; m < 10; m++) keys.push(`layer${String(layer).padStart(2, "0")}.m${m}`);
  const groups = R.sections(keys);
  assert.equal(groups.length, 25);
  assert.ok(groups.every((g, i) => g.section === `layer${String(i).padStart(2, "0")}` && g.panels.length === 10));
});
