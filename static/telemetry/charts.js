// The panels of a run's Telemetry tab and of a comparison, drawn with Plotly: a panel holds
// traces, a trace being one run's key. A board asks for the panels in or near view only, those
// of a batch in one request whose answer streams a line a panel, and draws each as its line
// arrives; it zooms the panels drawn against the same x together, smooths, says on each panel
// what is true of its traces, and takes in live points. tab.js (one run) and compare.js (several)
// are the two pages on it; the rules it follows are pure, in rules.js.
"use strict";

const Charts = (function () {
  const KEY_COLORS = ["#3559e0", "#e0562f", "#16a34a", "#a855f7"]; // a run's tab: one a key
  const TAIL_REFETCH = 4000; // live points appended past a downsampled view before it is re-read
  const RECENT_MAX = 20000; // live points kept to replay onto a panel read from an older snapshot
  // A panel this close to the view (a screen above or below) is asked for before it is in it.
  const NEAR = "100% 0px";
  const RETRY = 3000;
  const RETRY_MIN = 500, RETRY_MAX = 15000; // a socket's wait before it reconnects

  // Reads a response of one JSON value a line (application/x-ndjson), handing each to onLine
  // the moment its line is in: the first panel is drawn while the server makes the others.
  async function stream(url, onLine) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/x-ndjson, application/json" } });
    if (!response.ok) throw new Error(`${url}: ${response.status}`);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (value) buffered += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 1);
        if (line) onLine(JSON.parse(line));
      }
      if (done) return;
    }
  }

  // One websocket of points, kept open (docs/api.md): acknowledges each points message once it
  // is handled, says why it closed, and reconnects after a growing wait. options:
  //   path()      the socket's path; after() what to say once open: the seq, or seqs, the page has
  //   opened(), points(message), status(message), note(text)
  //   over()      whether nothing more is to come (the telemetry is all here)
  //   behind()    the socket closed with 4413: read the rest from the API, then connect again
  //   notYours, loggedOut   what the page says when closed with 4403, with 4401
  function live(options) {
    let socket = null;
    let wait = RETRY_MIN;

    function connect() {
      const scheme = location.protocol === "https:" ? "wss" : "ws";
      socket = new WebSocket(`${scheme}://${location.host}${options.path()}`);
      socket.onopen = () => {
        wait = RETRY_MIN;
        options.opened();
        socket.send(JSON.stringify({ after: options.after() }));
      };
      socket.onmessage = (event) => {
        const message = JSON.parse(event.data);
        if (message.type === "points") {
          options.points(message);
          // Drawn: the server holds back what it has not heard we have.
          if (event.target.readyState === WebSocket.OPEN) event.target.send(JSON.stringify({ ack: message.ack }));
        } else if (message.type === "status") options.status(message);
      };
      socket.onclose = (event) => {
        socket = null;
        if (options.over()) return;
        if (event.code === 4403) { options.note(options.notYours); return; }
        if (event.code === 4401) { options.note(options.loggedOut); return; }
        if (event.code === 4413) { options.note("Catching up…"); options.behind(); return; }
        later(connect);
      };
    }

    // Tries again after a wait that doubles each time, up to RETRY_MAX.
    function later(again) {
      options.note(`Reconnecting in ${Math.round(wait / 1000)} s…`);
      setTimeout(again, wait);
      wait = Math.min(wait * 2, RETRY_MAX);
    }

    return { connect, later, close: () => socket && socket.close() };
  }

  // options:
  //   container   the element the panels go in (#panels)
  //   runs        [{name, color}]: the runs whose keys the panels draw; one, on a run's tab
  //   single      true on a run's tab: a trace is called by its key, coloured by its place
  //   grouped     whether the panels are grouped into sections by their key's prefix (the
  //               default layout's)
  //   x           the key every panel is drawn against (a comparison aligned); else each its own
  //   url(numbers, view)   the address that answers these panels (their places in the run's
  //               panels) at view {range, smooth, x}, a line each
  //   part(line)  a line of that answer as {panel, x, runs: [{run, last, series}]}
  //   alone(panel, view)   optional: the address that answers one panel as the page has it
  //               (its keys against its x), a line in the same form
  function board(options) {
    const { container, single, grouped } = options;
    const runs = options.runs;
    const panels = [];
    const written = new Map(runs.map((r) => [r.name, Object.create(null)])); // run -> key -> points
    const recent = new Map(runs.map((r) => [r.name, []])); // run -> its latest live points
    const known = new Set(); // every key a panel draws or is drawn against
    const sectionEls = new Map();
    const byElement = new Map(); // a panel's element -> the panel
    let smoothing = 0;
    let alignedX = options.x || null; // every panel's x when the page aligns them; null: each its own
    let ready = false; // Plotly has loaded
    let observer = null;
    let syncing = false;
    let refetchTimer = null;
    let revision = 0; // Plotly redraws arrays grown in place only when this changes

    const idOf = (run, key) => (single ? key : `${run}\u0000${key}`);
    const xOf = (panel) => (alignedX !== null ? alignedX : panel.spec.x);

    // ---- panels on the page ----------------------------------------------------------------
    function add(specs) {
      const added = specs.map((spec) => {
        const plot = fmt.el("div", { class: "plot" });
        const note = fmt.el("div", { class: "note" });
        const empty = fmt.el("div", { class: "empty", text: "no points yet" });
        const el = fmt.el("section", { class: spec.wide ? "panel wide" : "panel", "data-title": spec.title },
          fmt.el("h2", { text: spec.title }), note, plot, empty);
        const panel = {
          number: panels.length, spec, el, plot, note, empty, traces: Object.create(null), last: {}, range: null,
          loaded: false, waiting: false, asked: 0, drawn: false, stale: false, near: false, tail: 0,
        };
        panels.push(panel);
        byElement.set(el, panel);
        for (const key of spec.y) known.add(key);
        if (spec.x) known.add(spec.x);
        return panel;
      });
      arrange();
      if (observer) for (const panel of added) observer.observe(panel.el);
      return added;
    }

    function arrange() {
      if (!grouped) {
        for (const panel of panels) if (panel.el.parentNode !== container) container.append(panel.el);
        return;
      }
      for (const group of TabRules.sections(panels.map((p) => p.spec.y[0]))) {
        if (group.section === null) {
          container.append(panels[group.panels[0]].el);
          continue;
        }
        const section = sectionEl(group.section);
        container.append(section.el);
        for (const i of group.panels) section.grid.append(panels[i].el);
        section.count.textContent = `${group.panels.length} panels`;
      }
    }

    function sectionEl(name) {
      if (!sectionEls.has(name)) {
        const grid = fmt.el("div", { class: "panels" });
        const count = fmt.el("span", { class: "count" });
        const el = fmt.el("details", { class: "section", "data-section": name, open: "" },
          fmt.el("summary", {}, fmt.el("span", { class: "name", text: name }), count), grid);
        sectionEls.set(name, { el, grid, count });
      }
      return sectionEls.get(name);
    }

    // The panels within a screen of the view, as laid out now: asked for before Plotly.js has
    // even loaded, so the data and the library arrive together.
    function nearView() {
      const height = window.innerHeight;
      return panels.filter((panel) => {
        const box = panel.el.getBoundingClientRect();
        return box.height > 0 && box.bottom > -height && box.top < 2 * height;
      });
    }

    // ---- asking the server -------------------------------------------------------------------
    // The panels in one request a view: panels zoomed to one range go together. Only the latest
    // request for a panel counts (its ticket): a zoom or a smoothing overtakes the one before.
    function ask(list) {
      const groups = new Map();
      for (const panel of list) {
        panel.asked += 1;
        panel.waiting = true;
        const view = { range: panel.range, smooth: smoothing, x: alignedX };
        const at = JSON.stringify(view);
        if (!groups.has(at)) groups.set(at, { view, panels: [] });
        groups.get(at).panels.push(panel);
      }
      return Promise.all([...groups.values()].map(({ view, panels: group }) => {
        const tickets = new Map(group.map((panel) => [panel.number, panel.asked]));
        const current = (panel) => panel && tickets.get(panel.number) === panel.asked;
        const url = options.url(group.map((p) => p.number), view);
        return stream(url, (line) => {
          const part = options.part(line);
          const panel = panels[part.panel];
          if (current(panel)) apply(panel, part, view);
        }).catch((error) => {
          console.warn(error);
          // What did not come is asked for again while it is still near the view.
          for (const panel of group) if (current(panel) && panel.waiting) panel.waiting = false;
          setTimeout(askNear, RETRY);
        });
      }));
    }

    function askNear() {
      const wanted = panels.filter((p) => p.near && !p.loaded && !p.waiting);
      if (wanted.length) ask(wanted);
    }

    function apply(panel, part, view) {
      panel.waiting = false;
      // A panel's place names the same panel while the run's panels only grow. A run that wrote
      // its x late has them laid out again: the panel is then read alone, as the page has it.
      const keys = part.runs.length ? part.runs[0].series.map((s) => s.key) : panel.spec.y;
      if (part.x !== xOf(panel) || keys.join("\u0000") !== panel.spec.y.join("\u0000")) {
        if (options.alone) {
          panel.waiting = true;
          const ticket = panel.asked;
          fmt.json(options.alone(panel, view))
            .then((answer) => { if (ticket === panel.asked) apply(panel, options.part({ ...answer, panel: panel.number }), view); })
            .catch((error) => { console.warn(error); panel.waiting = false; });
        }
        return;
      }
      panel.traces = Object.create(null); // by key: a key may be called __proto__
      panel.tail = 0;
      for (const { run, last, series } of part.runs) {
        panel.last[run] = last;
        for (const s of series) panel.traces[idOf(run, s.key)] = s;
        const newer = recent.get(run).filter((p) => p.seq > last);
        if (newer.length) extend(panel, run, newer, { quiet: true });
      }
      panel.loaded = true;
      show(panel);
    }

    // Drawn when Plotly is there and the panel near the view; else once it is. A panel in the
    // view is drawn at once; one only near it after the view has been painted, so that it never
    // holds up the panels a person is looking at.
    function show(panel) {
      panel.stale = true;
      if (!ready || !panel.near) return;
      if (inView(panel)) draw(panel);
      else later(panel);
    }

    function inView(panel) {
      const box = panel.el.getBoundingClientRect();
      return box.height > 0 && box.bottom > 0 && box.top < window.innerHeight;
    }

    const queued = new Set();
    function later(panel) {
      if (!queued.size) requestAnimationFrame(() => setTimeout(drawQueued, 0));
      queued.add(panel);
    }

    function drawQueued() {
      const due = [...queued];
      queued.clear();
      for (const panel of due) if (panel.stale && panel.near) draw(panel);
    }

    // ---- drawing -------------------------------------------------------------------------------
    function plotTraces(panel) {
      const out = [];
      const x = xOf(panel) || "place in the run";
      runs.forEach((run) => {
        panel.spec.y.forEach((key, k) => {
          const s = panel.traces[idOf(run.name, key)];
          if (!s || !s.y.length) return;
          const name = TabRules.legendName(single ? null : run.name, key);
          const color = single ? KEY_COLORS[k % KEY_COLORS.length] : run.color;
          const dash = single ? "solid" : TabRules.keyDash(k);
          const sparse = s.y.length < 60;
          // Each value with its own x: a sparse key's nearest point may sit elsewhere than the cursor.
          const at = single ? "%{x}" : `${x} %{x}`;
          out.push({
            type: "scatter", mode: sparse ? "lines+markers" : "lines", name, x: s.x, y: s.y,
            line: { color, width: 1.5, dash }, marker: { size: 5, color }, opacity: s.smoothed ? 0.25 : 1,
            hovertemplate: `${name}: %{y} at ${at}<extra></extra>`, showlegend: !s.smoothed,
            legendgroup: name,
          });
          if (s.smoothed) {
            out.push({
              type: "scatter", mode: "lines", name, x: s.smoothed.x, y: s.smoothed.y, legendgroup: name,
              line: { color, width: 2, dash }, hovertemplate: `${name} (smoothed): %{y} at ${at}<extra></extra>`,
            });
          }
        });
      });
      return out;
    }

    function layoutOf(panel) {
      const spec = panel.spec;
      const yaxis = { type: spec.scale === "log" ? "log" : "linear", automargin: true, gridcolor: "#eef0f4" };
      // Plotly labels a log axis's 2s and 5s with a bare digit: 1, 2 and 5 of each decade, in full.
      if (spec.scale === "log") Object.assign(yaxis, { dtick: "D2", tickformat: "~g" });
      const values = Object.values(panel.traces).flatMap((s) => s.y).filter((v) => v !== null);
      const flat = values.length && values.every((v) => v === values[0]) && values[0] !== 0;
      if (flat && spec.min === null && spec.max === null && spec.scale !== "log") {
        // Plotly pads a constant line by ±1, which draws 0.0003 on top of the zero line:
        // centre the axis on the value instead.
        const v = values[0], pad = Math.abs(v) / 2;
        yaxis.range = [v - pad, v + pad];
        yaxis.autorange = false;
      } else if (spec.min !== null || spec.max !== null) {
        const lo = spec.min !== null ? spec.min : values.reduce((a, b) => Math.min(a, b), Infinity);
        const hi = spec.max !== null ? spec.max : values.reduce((a, b) => Math.max(a, b), -Infinity);
        if (Number.isFinite(lo) && Number.isFinite(hi)) {
          yaxis.range = spec.scale === "log" ? [Math.log10(lo), Math.log10(hi)] : [lo, hi];
          yaxis.autorange = false;
        }
      }
      const layout = {
        datarevision: ++revision,
        margin: { l: 56, r: 12, t: 8, b: 36 },
        hovermode: "x unified",
        showlegend: single ? spec.y.length > 1 : true,
        legend: single ? { orientation: "h", y: 1.12, x: 0 } : { orientation: "h", x: 0, y: -0.2, yanchor: "top" },
        xaxis: { title: { text: xOf(panel) || "place in the run", font: { size: 11 } }, gridcolor: "#eef0f4", zeroline: false },
        yaxis,
        shapes: [],
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "rgba(0,0,0,0)",
      };
      if (panel.range) { layout.xaxis.range = panel.range.slice(); layout.xaxis.autorange = false; }
      if (spec.rule !== null && spec.rule !== undefined) {
        layout.shapes.push({
          type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: spec.rule, y1: spec.rule,
          line: { color: "#b42318", width: 1, dash: "dash" }, name: "rule",
        });
      }
      return layout;
    }

    function describe(panel) {
      const spec = panel.spec;
      const traces = [];
      for (const run of runs) {
        const wrote = written.get(run.name);
        for (const key of spec.y) {
          traces.push({
            label: TabRules.traceLabel(single ? null : run.name, key, spec.y),
            written: wrote[key],
            series: panel.traces[idOf(run.name, key)],
          });
        }
      }
      const shown = { x: xOf(panel), range: panel.range, traces };
      panel.note.textContent = TabRules.traceNotes(shown);
      const anything = TabRules.hasPoints(shown);
      panel.empty.hidden = anything;
      panel.plot.hidden = !anything;
      panel.el.dataset.points = String(Object.values(panel.traces).reduce((n, s) => n + (s.drawn || 0), 0));
    }

    function draw(panel) {
      panel.stale = false;
      describe(panel);
      const config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
      Plotly.react(panel.plot, plotTraces(panel), layoutOf(panel), config);
      if (!panel.drawn) {
        panel.drawn = true;
        panel.plot.on("plotly_relayout", (ev) => zoomed(panel, ev));
      }
    }

    // ---- zoom: panels drawn against the same x move together; a zoom re-reads that range ------
    function zoomed(panel, ev) {
      if (syncing) return;
      let range = null;
      if (ev["xaxis.range[0]"] !== undefined) range = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
      else if (ev["xaxis.range"]) range = ev["xaxis.range"].slice();
      else if (!ev["xaxis.autorange"]) return;
      syncing = true;
      try {
        const together = panels.filter((other) => xOf(other) === xOf(panel));
        for (const other of together) other.range = range;
        // Those not read yet are read at this range once they come near the view.
        reread(together.filter((p) => p.loaded || p.waiting));
      } finally {
        syncing = false;
      }
    }

    function reread(list) {
      return list.length ? ask(list) : Promise.resolve();
    }

    // ---- live ---------------------------------------------------------------------------------
    // A run's new points: counted, kept to replay, and added to the panels read so far. A panel
    // not read yet costs nothing: it reads them from the server when it comes near the view.
    function receive(run, points) {
      TabRules.tally(written.get(run), points);
      let kept = recent.get(run).concat(points);
      if (kept.length > RECENT_MAX) kept = kept.slice(-RECENT_MAX);
      recent.set(run, kept);
      for (const panel of panels) if (panel.loaded) extend(panel, run, points);
    }

    // Whether a point carries a key no panel draws or is drawn against: a default layout then
    // has a panel to add.
    function unknownKeys(points) {
      return points.some((p) => Object.keys(p.data).some((k) => !known.has(k)));
    }

    function extend(panel, run, points, { quiet = false } = {}) {
      const spec = panel.spec;
      const x = xOf(panel);
      const seen = panel.last[run] || 0;
      let added = 0, changed = false;
      for (const p of points) {
        if (p.seq <= seen) continue;
        const at = TabRules.pointX(x, p);
        if (at === null || at === undefined) continue; // no x: nowhere to go on this panel
        if (panel.range && (at < panel.range[0] || at > panel.range[1])) continue;
        for (const key of spec.y) {
          const v = p.data[key];
          if (v === undefined) continue;
          const id = idOf(run, key);
          const s = panel.traces[id] || (panel.traces[id] = { key, x: [], y: [], total: 0, drawn: 0, passed_over: 0, gap: null, off_log_scale: 0 });
          changed = true;
          if (!TabRules.drawable(spec.scale, v)) { s.off_log_scale = (s.off_log_scale || 0) + 1; continue; }
          // The server says how far apart the key's points may be and still be joined.
          if (s.x.length && TabRules.breaksBetween(s.gap, s.x[s.x.length - 1], at)) { s.x.push(null); s.y.push(null); }
          s.x.push(at); s.y.push(v); s.total += 1; s.drawn += 1;
          added += 1;
        }
      }
      const last = points[points.length - 1].seq;
      if (last > seen) panel.last[run] = last;
      if (quiet) return;
      if (!changed) {
        // A key of the panel may have been written out of view: its note says so.
        if (points.some((p) => spec.y.some((k) => p.data[k] !== undefined))) {
          if (ready && panel.near && !panel.stale) describe(panel);
          else panel.stale = true;
        }
        return;
      }
      panel.tail += added;
      if (smoothing || panel.tail > TAIL_REFETCH) scheduleRefetch();
      show(panel);
    }

    function scheduleRefetch() {
      if (refetchTimer) return;
      refetchTimer = setTimeout(() => { refetchTimer = null; reload(); }, 2000);
    }

    // Every panel read so far, read again (one request): after smoothing changes, after a socket
    // fell too far behind, after many live points.
    function reload() {
      return reread(panels.filter((p) => p.loaded));
    }

    // The last seq of the run that every panel read so far has: a socket resumes after it.
    function lastOf(run, fallback) {
      const lasts = panels.filter((p) => p.loaded && p.last[run] !== undefined).map((p) => p.last[run]);
      return Math.min(fallback, ...lasts);
    }

    // ---- the page's controls -------------------------------------------------------------------
    function smooth(weight) {
      smoothing = weight;
      reload();
    }

    function align(x) {
      alignedX = x;
      for (const panel of panels) {
        Object.assign(panel, { range: null, traces: Object.create(null), last: {}, loaded: false, waiting: false });
        panel.asked += 1; // what is on its way was asked against the x before
      }
      // Read again as they come near the view: the ones near it now, at once.
      const near = panels.filter((p) => p.near);
      return near.length ? ask(near) : Promise.resolve();
    }

    // ---- starting ------------------------------------------------------------------------------
    // Before Plotly.js loads: the panels near the view are asked for at once.
    function prefetch() {
      const near = nearView();
      for (const panel of near) panel.near = true;
      return near.length ? ask(near) : Promise.resolve();
    }

    // Once Plotly.js has loaded: what has arrived is drawn, and every panel is watched, to be
    // asked for as it comes near the view and drawn as it does.
    function start() {
      ready = true;
      for (const panel of panels) if (panel.loaded && panel.stale) show(panel);
      observer = new IntersectionObserver((entries) => {
        const wanted = [];
        for (const entry of entries) {
          const panel = byElement.get(entry.target);
          if (!panel) continue;
          panel.near = entry.isIntersecting;
          if (!panel.near) continue;
          if (panel.loaded && panel.stale) show(panel);
          else if (!panel.loaded && !panel.waiting) wanted.push(panel);
        }
        if (wanted.length) ask(wanted);
      }, { rootMargin: NEAR });
      for (const panel of panels) observer.observe(panel.el);
    }

    function count(run, keys) {
      const wrote = written.get(run);
      for (const k of keys) wrote[k.name] = Math.max(wrote[k.name] || 0, k.count);
    }

    return { panels, add, prefetch, start, receive, unknownKeys, reload, lastOf, smooth, align, count };
  }

  return { board, stream, live };
})();

