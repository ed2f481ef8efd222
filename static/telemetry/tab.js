// The Telemetry tab: the stored layout's panels and stats, drawn with Plotly, kept live by a
// websocket that resumes from the last seq the tab has.
"use strict";

const TelemetryTab = (function () {
  const COLORS = ["#3559e0", "#e0562f", "#16a34a", "#a855f7"];
  const RETRY_MIN = 500, RETRY_MAX = 15000;
  const TAIL_REFETCH = 4000; // live points appended past a downsampled view before it is re-read

  let name, hooks, detail;
  let panels = []; // {spec, el, plot, note, empty, traces: {key: {x, y, total, drawn, ...}}, last, range}
  let stats = [];
  let written = {}; // key -> how many points carry it: "no points yet" is for a key at 0
  let sent = 0; // the last seq the tab has: the websocket resumes after it
  let socket = null, retry = RETRY_MIN, ended = false;
  let smoothing = 0;
  let syncing = false;
  let refetchTimer = null;
  let revision = 0; // Plotly redraws arrays grown in place only when this changes
  let recent = []; // points received live, replayed onto a panel re-read from an older snapshot
  const RECENT_MAX = 20000;

  let seriesRequests = null;

  function prefetch(runName) {
    // Runs before Plotly.js is parsed, from the run the page embeds: the top panel's data and
    // the library arrive together. The others follow one at a time, since the server works on
    // requests side by side and four at once would all answer late.
    name = runName;
    detail = JSON.parse(document.getElementById("run-detail").textContent);
    let previous = null;
    seriesRequests = detail.panels.map((spec) => {
      const ask = () => fmt.json(seriesUrl({ spec, range: null }));
      previous = previous ? previous.then(ask, ask) : ask();
      return previous;
    });
  }

  async function start(callbacks) {
    hooks = callbacks;
    const slider = document.getElementById("smoothing");
    const shown = () => (Number(slider.value) ? Number(slider.value).toFixed(2) : "off");
    slider.addEventListener("input", () => { document.getElementById("smoothing-value").textContent = shown(); });
    slider.addEventListener("change", () => {
      smoothing = Number(slider.value);
      panels.forEach((p) => load(p));
    });
    sent = detail.points;
    ended = detail.closed;
    countWritten(detail.keys);
    renderStats(detail.stats);
    const added = detail.panels.map(addPanel);
    await Promise.all(added.map((panel, i) => seriesRequests[i].then((data) => apply(panel, data))));
    if (!ended) connect();
    else note("This run has ended: what it wrote is all drawn.");
  }

  function note(text) { document.getElementById("live-note").textContent = text; }

  function countWritten(keys) {
    // The server's counts, or the tab's own when live points have taken it further.
    for (const k of keys) written[k.name] = Math.max(written[k.name] || 0, k.count);
  }

  // ---- stats -------------------------------------------------------------------------------
  function renderStats(list) {
    const box = document.getElementById("stats");
    stats = list.map((s) => {
      const value = fmt.el("div", { class: "value", text: fmt.number(s.value) });
      const card = fmt.el("div", { class: "stat", "data-key": s.y },
        fmt.el("div", { class: "title", text: s.title }), value,
        fmt.el("div", { class: "reduce", text: `${s.reduce} of ${s.y}` }));
      box.append(card);
      return { ...s, el: value };
    });
  }

  function updateStats(points) {
    for (const s of stats) {
      for (const p of points) {
        const v = p.data[s.y];
        if (v === undefined) continue;
        s.value = TabRules.reduce(s.reduce, s.value, v);
      }
      s.el.textContent = fmt.number(s.value);
    }
  }

  // ---- panels ------------------------------------------------------------------------------
  function addPanel(spec) {
    const plot = fmt.el("div", { class: "plot" });
    const noteEl = fmt.el("div", { class: "note" });
    const empty = fmt.el("div", { class: "empty", text: "no points yet" });
    const el = fmt.el("section", { class: spec.wide ? "panel wide" : "panel", "data-title": spec.title },
      fmt.el("h2", { text: spec.title }), noteEl, plot, empty);
    document.getElementById("panels").append(el);
    const panel = { spec, el, plot, note: noteEl, empty, traces: {}, last: 0, range: null, drawn: false, tail: 0 };
    panels.push(panel);
    return panel;
  }

  function seriesUrl(panel) {
    const q = new URLSearchParams();
    for (const y of panel.spec.y) q.append("y", y);
    if (panel.spec.x) q.set("x", panel.spec.x);
    if (panel.range) { q.set("low", panel.range[0]); q.set("high", panel.range[1]); }
    if (panel.spec.scale === "log") q.set("scale", "log");
    if (smoothing) q.set("smooth", smoothing);
    return `/api/runs/${name}/series/?${q}`;
  }

  async function load(panel) {
    apply(panel, await fmt.json(seriesUrl(panel)));
  }

  function apply(panel, data) {
    panel.last = data.last;
    panel.tail = 0;
    panel.traces = {};
    for (const s of data.series) panel.traces[s.key] = s;
    const newer = recent.filter((p) => p.seq > data.last);
    if (newer.length) extend(panel, newer);
    draw(panel);
  }

  function traceList(panel) {
    const out = [];
    panel.spec.y.forEach((key, i) => {
      const s = panel.traces[key];
      if (!s || !s.y.length) return;
      const color = COLORS[i % COLORS.length];
      const sparse = s.y.length < 60;
      out.push({
        type: "scatter", mode: sparse ? "lines+markers" : "lines", name: key, x: s.x, y: s.y,
        line: { color, width: 1.5 }, marker: { size: 5, color }, opacity: s.smoothed ? 0.25 : 1,
        // Each value with its own x: a sparse key's nearest point may sit elsewhere than the cursor.
        hovertemplate: `${key}: %{y} at %{x}<extra></extra>`, showlegend: !s.smoothed,
      });
      if (s.smoothed) {
        out.push({
          type: "scatter", mode: "lines", name: key, x: s.smoothed.x, y: s.smoothed.y,
          line: { color, width: 2 }, hovertemplate: `${key} (smoothed): %{y} at %{x}<extra></extra>`,
        });
      }
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
      showlegend: spec.y.length > 1,
      legend: { orientation: "h", y: 1.12, x: 0 },
      xaxis: { title: { text: spec.x || "place in the run", font: { size: 11 } }, gridcolor: "#eef0f4", zeroline: false },
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
    panel.note.textContent = TabRules.panelNote({
      keys: spec.y, x: spec.x, range: panel.range, traces: panel.traces, written,
    });
    // Axes stay while any key of the panel has points, even none in view: a double-click
    // zooms back out. Only a panel of keys never written says "no points yet" instead.
    const anything = TabRules.hasPoints({ keys: spec.y, written });
    panel.empty.hidden = anything;
    panel.plot.hidden = !anything;
    panel.el.dataset.points = String(spec.y.reduce((n, k) => n + ((panel.traces[k] || {}).drawn || 0), 0));
  }

  function draw(panel) {
    describe(panel);
    const config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
    Plotly.react(panel.plot, traceList(panel), layoutOf(panel), config);
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
      for (const other of panels) {
        if (other.spec.x !== panel.spec.x) continue;
        other.range = range;
        load(other);
      }
    } finally {
      syncing = false;
    }
  }

  // ---- live ---------------------------------------------------------------------------------
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/runs/${name}/`);
    socket.onopen = () => {
      retry = RETRY_MIN;
      note(detail.unread ? "Ended; its telemetry is still being read: points appear as they are." : "Live");
      socket.send(JSON.stringify({ after: sent }));
    };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "points") {
        receive(message.points);
        // Drawn: the server holds back what it has not heard we have (docs/api.md).
        if (event.target.readyState === WebSocket.OPEN) event.target.send(JSON.stringify({ ack: message.ack }));
      } else if (message.type === "status") status(message);
    };
    socket.onclose = (event) => {
      socket = null;
      if (ended) return;
      if (event.code === 4403) { note("This run is not yours to see."); return; }
      if (event.code === 4401) { note("You are logged out: log in again to follow this run."); return; }
      if (event.code === 4413) { note("Catching up…"); resume(); return; }
      note(`Reconnecting in ${Math.round(retry / 1000)} s…`);
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, RETRY_MAX);
    };
  }

  // Closed as too far behind (4413): read what the socket held back from the REST API, as the
  // tab does when it opens (downsampled, a fraction of the bytes), then follow on after it.
  async function resume() {
    try {
      await addNewKeyPanels(); // the run read again: its stats, and any panel a new key needs
      stats.forEach((s, i) => { s.value = detail.stats[i].value; s.el.textContent = fmt.number(s.value); });
      await Promise.all(panels.map((p) => load(p)));
      // Every panel has its points up to its last; a point after the lowest comes on the
      // socket, and a panel passes over the ones it has (extend).
      sent = Math.min(detail.points, ...panels.map((p) => p.last));
      connect();
    } catch (e) {
      note(`Reconnecting in ${Math.round(retry / 1000)} s…`);
      setTimeout(resume, retry);
      retry = Math.min(retry * 2, RETRY_MAX);
    }
  }

  function status(message) {
    hooks.onStatus(message.status, message.closed);
    if (message.closed) {
      ended = true;
      note("This run has ended: what it wrote is all drawn.");
      if (socket) socket.close();
    }
  }

  function receive(points) {
    if (!points.length) return;
    const fresh = points.filter((p) => p.seq > sent);
    if (!fresh.length) return;
    sent = fresh[fresh.length - 1].seq;
    TabRules.tally(written, fresh);
    recent = recent.concat(fresh);
    if (recent.length > RECENT_MAX) recent = recent.slice(-RECENT_MAX);
    updateStats(fresh);
    if (detail.layout.default && fresh.some((p) => Object.keys(p.data).some((k) => !panels.some((pa) => pa.spec.y.includes(k) || pa.spec.x === k)))) {
      addNewKeyPanels();
    }
    for (const panel of panels) extend(panel, fresh);
  }

  async function addNewKeyPanels() {
    // The server lays out the default panels, as it does for the CLI: ask it, add what is new.
    detail = await fmt.json(`/api/runs/${name}/`);
    countWritten(detail.keys);
    for (const spec of detail.panels) {
      if (!panels.some((p) => p.spec.title === spec.title && p.spec.y.join() === spec.y.join())) {
        await load(addPanel(spec));
      }
    }
  }

  function extend(panel, points) {
    const spec = panel.spec;
    let added = 0, changed = false;
    for (const p of points) {
      if (p.seq <= panel.last) continue;
      const x = TabRules.pointX(spec.x, p);
      if (x === null) continue; // no x: nowhere to go on this panel
      if (panel.range && (x < panel.range[0] || x > panel.range[1])) continue;
      for (const key of spec.y) {
        const v = p.data[key];
        if (v === undefined) continue;
        const s = panel.traces[key] || (panel.traces[key] = { key, x: [], y: [], total: 0, drawn: 0, passed_over: 0, gap: null, off_log_scale: 0 });
        changed = true;
        if (!TabRules.drawable(spec.scale, v)) { s.off_log_scale = (s.off_log_scale || 0) + 1; continue; }
        // The server says how far apart the key's points may be and still be joined.
        if (s.x.length && TabRules.breaksBetween(s.gap, s.x[s.x.length - 1], x)) { s.x.push(null); s.y.push(null); }
        s.x.push(x); s.y.push(v); s.total += 1; s.drawn += 1;
        added += 1;
      }
    }
    const last = points[points.length - 1].seq;
    if (last > panel.last) panel.last = last;
    if (!changed) {
      // A key of the panel may have been written out of view: its note says so.
      if (points.some((p) => spec.y.some((k) => p.data[k] !== undefined))) describe(panel);
      return;
    }
    panel.tail += added;
    if (smoothing || panel.tail > TAIL_REFETCH) scheduleRefetch();
    draw(panel);
  }

  function scheduleRefetch() {
    if (refetchTimer) return;
    refetchTimer = setTimeout(() => { refetchTimer = null; panels.forEach((p) => load(p)); }, 2000);
  }

  return { prefetch, start, panels: () => panels };
})();

TelemetryTab.prefetch(document.getElementById("run").dataset.name);
