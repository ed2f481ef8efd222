// The Telemetry tab's rules, pure: no page, no Plotly, no requests. Each mirrors a rule of the
// server's, named beside it; tests/js/rules.test.js and tests/test_tab_rules.py check the two
// sides on the same cases (tests/cases/tab_rules.json). The page loads this as a script; node
// loads it as a module.
"use strict";

const TabRules = (function () {
  // The x a panel uses for a point: its value of the panel's x key, or its seq when the panel
  // is drawn against the point's place in the run; null when it has no such key, and it is left
  // off the panel. Mirrors layout.point_x.
  function pointX(x, point) {
    if (!x) return point.seq;
    const value = point.data[x];
    return value === undefined ? null : value;
  }

  // Which value a stat card shows once a new value arrives: the last, the lowest or the
  // highest. Mirrors tally.KeyStats.take, whose last, min and max the API sends.
  function reduce(kind, shown, value) {
    if (shown === null || shown === undefined) return value;
    if (kind === "min") return value < shown ? value : shown;
    if (kind === "max") return value > shown ? value : shown;
    return value;
  }

  // Where a key's line breaks: between two neighbouring points further apart in x than the
  // key's gap (the server says how far: five times its usual spacing). Mirrors downsample.gaps.
  function breaksBetween(gap, before, x) {
    if (gap === null || gap === undefined || before === null || before === undefined) return false;
    return x - before > gap;
  }

  // Whether a value can be drawn on a panel: a log scale has no place for 0 and below, so they
  // are left off and counted. Mirrors downsample.on_log_scale.
  function drawable(scale, value) {
    return scale !== "log" || value > 0;
  }

  // A number as written: an integer as an integer, a float in its shortest form. Mirrors
  // lines.format_number for the numbers a run writes (Python writes 1e-07 where this writes 1e-7).
  function asWritten(value) {
    return String(value);
  }

  // A count with thousands separators, as Python's f"{n:,}".
  function count(n) {
    return Number(n).toLocaleString("en-US");
  }

  function plural(n, one, many) {
    return `${count(n)} ${n === 1 ? one : many}`;
  }

  // What a key's NaN and Infinity values come to. Mirrors tables.passed_over_note, which
  // `div telemetry` prints: the tab and the CLI say the same.
  function passedOver(key, n, x, at) {
    const where = at === null || at === undefined ? "" : `, first at ${x || "point"} ${asWritten(at)}`;
    return `${key}: ${plural(n, "value", "values")} passed over as NaN or Infinity${where}`;
  }

  // What a panel's note says about each of its keys:
  // - "no points yet" only for a key no point has written (written[key] is 0);
  // - "no points in this range" for a key with points, none of them where the panel is zoomed;
  // - "no points with <x>" for a key with points, none of them carrying the panel's x;
  // - "n of N points" when the points are downsampled;
  // - "n points ≤ 0 not shown on a log scale";
  // - what it passed over as NaN or Infinity (passedOver).
  // panel: {keys, x, range, traces: {key: {total, drawn, passed_over, first_passed_x,
  // off_log_scale}}, written: {key: points that carry it}}
  function panelNote(panel) {
    return traceNotes(panelTraces(panel));
  }

  // A run's panel as traceNotes and hasPoints take it: a trace a key.
  function panelTraces(panel) {
    return {
      x: panel.x,
      range: panel.range,
      traces: panel.keys.map((key) => ({ label: key, written: panel.written[key], series: panel.traces[key] })),
    };
  }

  // The same note for any traces, a trace being one run's key: each part is said of the trace's
  // label (traceLabel), so a comparison's panel says "run-7: no points yet" of a key run-7 never
  // wrote. panel: {x, range, traces: [{label, written: points of the run that carry the key,
  // series: {total, drawn, passed_over, first_passed_x, off_log_scale} or undefined}]}
  function traceNotes(panel) {
    const parts = [];
    for (const t of panel.traces) {
      const label = t.label;
      const s = t.series || { total: 0, drawn: 0, passed_over: 0, off_log_scale: 0 };
      if (!t.written) {
        parts.push(`${label}: no points yet`);
        continue;
      }
      if (!s.total && !s.off_log_scale) {
        parts.push(panel.range ? `${label}: no points in this range` : `${label}: no points with ${panel.x}`);
      }
      if (s.drawn < s.total) parts.push(`${label}: ${count(s.drawn)} of ${count(s.total)} points`);
      if (s.off_log_scale) {
        parts.push(`${label}: ${plural(s.off_log_scale, "point", "points")} ≤ 0 not shown on a log scale`);
      }
      if (s.passed_over) parts.push(passedOver(label, s.passed_over, panel.x, s.first_passed_x));
    }
    return parts.join(" · ");
  }

  // What a trace is called in its panel's note: its key on a run's tab (run null); on a
  // comparison its run, and the key too when the panel draws more than one.
  function traceLabel(run, key, keys) {
    if (run === null) return key;
    return keys.length > 1 ? `${run} ${key}` : run;
  }

  // What a trace is called in the legend and on hover: its key on a run's tab, its run and its
  // key on a comparison.
  function legendName(run, key) {
    return run === null ? key : `${run} ${key}`;
  }

  // A comparison gives each run one colour on every panel, in the order the runs are listed
  // (telemetry/comparison.py: MOST_RUNS, so no two runs of one comparison share one); a panel's
  // keys are told apart by their dash.
  const RUN_COLORS = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3",
    "#8ca252", "#bd9e39", "#ad494a", "#a55194",
  ];
  const KEY_DASHES = ["solid", "dash", "dot", "dashdot"];

  function runColor(i) {
    return RUN_COLORS[i % RUN_COLORS.length];
  }

  function keyDash(i) {
    return KEY_DASHES[i % KEY_DASHES.length];
  }

  // ---- sections: the default layout's panels grouped by the first dotted part of their key --

  // A key's section: the part before its first dot ("layer03" of "layer03.attn.grad_norm"); null
  // for a key without a dot.
  function sectionOf(key) {
    const dot = key.indexOf(".");
    return dot > 0 ? key.slice(0, dot) : null;
  }

  // The default layout's panels, one key each, as the page groups them, in order of first
  // arrival: [{section: "layer03", panels: [2, 3, ...]}, {section: null, panels: [0]}, ...].
  // The panels of a prefix that two or more keys share make a section, placed where its first
  // panel was; a key without a dot, or the only key of its prefix, is a panel on its own
  // (section null), as the panels of a run without sections are.
  function sections(keys) {
    const counts = new Map();
    for (const key of keys) {
      const name = sectionOf(key);
      if (name !== null) counts.set(name, (counts.get(name) || 0) + 1);
    }
    const out = [];
    const open = new Map();
    keys.forEach((key, i) => {
      const name = sectionOf(key);
      if (name === null || counts.get(name) < 2) {
        out.push({ section: null, panels: [i] });
        return;
      }
      if (!open.has(name)) {
        open.set(name, { section: name, panels: [] });
        out.push(open.get(name));
      }
      open.get(name).panels.push(i);
    });
    return out;
  }

  // ---- a comparison's address ----------------------------------------------------------------

  // The query of a comparison's address: its runs, then the run whose layout it shows and the x
  // every panel is drawn against when they are not the default (the first run's layout; each
  // panel's own x). telemetry/comparison.py reads it back.
  function compareQuery({ runs, layout, x }) {
    const parts = [`runs=${runs.join(",")}`];
    if (layout && layout !== runs[0]) parts.push(`layout=${layout}`);
    if (x) parts.push(`x=${encodeURIComponent(x)}`);
    return `?${parts.join("&")}`;
  }

  // Whether a panel has anything to draw axes for: a trace of it (a run's key) that some point
  // has written, even with none in view, so a double-click zooms back out. A panel of keys no
  // point has written shows "no points yet" instead of a plot. panel: as traceNotes takes it.
  function hasPoints(panel) {
    return panel.traces.some((t) => t.written);
  }

  // Counts each key of the points into written: how many points carry each key.
  function tally(written, points) {
    for (const p of points) for (const key of Object.keys(p.data)) written[key] = (written[key] || 0) + 1;
    return written;
  }

  return {
    pointX, reduce, breaksBetween, drawable, asWritten, count, passedOver, panelNote, panelTraces,
    hasPoints, tally, traceNotes, traceLabel, legendName, runColor, keyDash, sectionOf, sections, compareQuery,
  };
})();

if (typeof module !== "undefined") module.exports = TabRules;
