// The address a comparison's page writes (static/telemetry/rules.js, compareQuery), on the cases
// tests/test_comparison.py reads back with telemetry/comparison.py (tests/cases/compare.json).
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const fs = require("node:fs");

const R = require("../../static/telemetry/rules.js");

const CASES = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "cases", "compare.json"), "utf8"));

test("a comparison's address names its runs, and its layout and x when not the default", () => {
  for (const c of CASES.query) {
    assert.equal(R.compareQuery({ runs: c.runs, layout: c.layout, x: c.x }), c.query, JSON.stringify(c));
  }
});
