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
    const parts = [];
    for (const key of panel.keys) {
      const s = panel.traces[key] || { total: 0, drawn: 0, passed_over: 0, off_log_scale: 0 };
      if (!panel.written[key]) {
        parts.push(`${key}: no points yet`);
        continue;
      }
      if (!s.total && !s.off_log_scale) {
        parts.push(panel.range ? `${key}: no points in this range` : `${key}: no points with ${panel.x}`);
      }
      if (s.drawn < s.total) parts.push(`${key}: ${count(s.drawn)} of ${count(s.total)} points`);
      if (s.off_log_scale) {
        parts.push(`${key}: ${plural(s.off_log_scale, "point", "points")} ≤ 0 not shown on a log scale`);
      }
      if (s.passed_over) parts.push(passedOver(key, s.passed_over, panel.x, s.first_passed_x));
    }
    return parts.join(" · ");
  }

  // Whether a panel has anything to draw axes for: a key of it that some point has written.
  // A panel of keys no point has written shows "no points yet" instead of a plot.
  function hasPoints(panel) {
    return panel.keys.some((key) => panel.written[key]);
  }

  // Counts each key of the points into written: how many points carry each key.
  function tally(written, points) {
    for (const p of points) for (const key of Object.keys(p.data)) written[key] = (written[key] || 0) + 1;
    return written;
  }

  return { pointX, reduce, breaksBetween, drawable, asWritten, count, passedOver, panelNote, hasPoints, tally };
})();

if (typeof module !== "undefined") module.exports = TabRules;
