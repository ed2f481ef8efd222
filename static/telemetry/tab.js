// The Telemetry tab: the stored layout's panels and stats, the panels drawn by a board
// (charts.js) as they come near the view, kept live by a websocket that resumes from the last
// seq the tab has.
"use strict";

const TelemetryTab = (function () {
  let name, hooks, detail, board;
  let stats = [];
  let sent = 0; // the last seq the tab has: the websocket resumes after it
  let socket = null, ended = false;
  let adding = Promise.resolve(); // panels for new keys, added one look at the run at a time

  function prefetch(runName) {
    // Runs before Plotly.js is parsed, from the run the page embeds: the page is laid out, and
    // the panels near the view are asked for in one request, so that their data and the
    // library arrive together. The others are asked for as they come near the view.
    name = runName;
    detail = JSON.parse(document.getElementById("run-detail").textContent);
    renderStats(detail.stats);
    board = Charts.board({
      container: document.getElementById("panels"),
      runs: [{ name }],
      single: true,
      grouped: detail.layout.default,
      url: panelsUrl,
      part: (line) => ({ panel: line.panel, x: line.x, runs: [{ run: name, last: line.last, series: line.series }] }),
      alone: seriesUrl,
    });
    board.count(name, detail.keys);
    board.add(detail.panels);
    board.prefetch();
  }

  function start(callbacks) {
    hooks = callbacks;
    const slider = document.getElementById("smoothing");
    const shown = () => (Number(slider.value) ? Number(slider.value).toFixed(2) : "off");
    slider.addEventListener("input", () => { document.getElementById("smoothing-value").textContent = shown(); });
    slider.addEventListener("change", () => board.smooth(Number(slider.value)));
    sent = detail.points;
    ended = detail.closed;
    board.start();
    socket = follow();
    if (!ended) socket.connect();
    else note("This run has ended: what it wrote is all drawn.");
  }

  function note(text) { document.getElementById("live-note").textContent = text; }

  function view(query, { range, smooth }) {
    if (range) { query.set("low", range[0]); query.set("high", range[1]); }
    if (smooth) query.set("smooth", smooth);
    return query;
  }

  function panelsUrl(numbers, at) {
    const query = new URLSearchParams();
    for (const number of numbers) query.append("panel", number);
    return `/api/runs/${name}/panels/?${view(query, at)}`;
  }

  function seriesUrl(panel, at) {
    const query = new URLSearchParams();
    for (const y of panel.spec.y) query.append("y", y);
    if (panel.spec.x) query.set("x", panel.spec.x);
    if (panel.spec.scale === "log") query.set("scale", "log");
    return `/api/runs/${name}/series/?${view(query, at)}`;
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

  // ---- live ---------------------------------------------------------------------------------
  function follow() {
    return Charts.live({
      path: () => `/ws/runs/${name}/`,
      after: () => sent,
      opened: () => note(detail.unread ? "Ended; its telemetry is still being read: points appear as they are." : "Live"),
      points: (message) => receive(message.points),
      status,
      note,
      over: () => ended,
      behind: resume,
      notYours: "This run is not yours to see.",
      loggedOut: "You are logged out: log in again to follow this run.",
    });
  }

  // Closed as too far behind (4413): read what the socket held back from the REST API, as the
  // tab does when it opens (downsampled, a fraction of the bytes), then follow on after it.
  async function resume() {
    try {
      await addNewKeyPanels(); // the run read again: its stats, and any panel a new key needs
      stats.forEach((s, i) => { s.value = detail.stats[i].value; s.el.textContent = fmt.number(s.value); });
      await board.reload();
      // Every panel read so far has its points up to its last; a point after the lowest comes on
      // the socket, and a panel passes over the ones it has.
      sent = board.lastOf(name, detail.points);
      socket.connect();
    } catch (e) {
      socket.later(resume);
    }
  }

  function status(message) {
    hooks.onStatus(message.status, message.closed);
    if (message.closed) {
      ended = true;
      note("This run has ended: what it wrote is all drawn.");
      socket.close();
    }
  }

  function receive(points) {
    const fresh = points.filter((p) => p.seq > sent);
    if (!fresh.length) return;
    sent = fresh[fresh.length - 1].seq;
    updateStats(fresh);
    board.receive(name, fresh);
    if (detail.layout.default && board.unknownKeys(fresh)) addNewKeyPanels();
  }

  function addNewKeyPanels() {
    // The server lays out the default panels, as it does for the CLI: ask it, add what is new.
    adding = adding.catch(() => {}).then(async () => {
      detail = await fmt.json(`/api/runs/${name}/`);
      board.count(name, detail.keys);
      const have = (spec) => board.panels.some((p) => p.spec.title === spec.title && p.spec.y.join() === spec.y.join());
      board.add(detail.panels.filter((spec) => !have(spec)));
    });
    return adding;
  }

  return { prefetch, start, panels: () => board.panels };
})();

TelemetryTab.prefetch(document.getElementById("run").dataset.name);
