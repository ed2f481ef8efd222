// A comparison of runs (/compare/?runs=run-3,run-7): one run's stored layout, each panel drawing
// its keys for every run, each run in one colour on every panel; the stats as a table, a row a
// run; every panel's x alignable on a key all the runs wrote; the runs still running kept live on
// one websocket. The panels are drawn by the board the run's tab draws with (charts.js).
"use strict";

const Comparison = (function () {
  let detail, board, names, runs;
  let x = null; // every panel's x, when aligned
  const sent = {}; // run -> the last seq the page has: the websocket resumes after it
  const closed = new Set(); // the runs whose telemetry is all here
  let columns = []; // the stats table's cells: [{stat, cells: {run: td}, values: {run: value}}]
  let socket = null;
  let adding = Promise.resolve();

  // Runs before Plotly.js is parsed, from the comparison the page embeds: the page is laid out
  // and the panels near the view asked for in one request, as the run's tab does.
  function open() {
    detail = JSON.parse(document.getElementById("compare-detail").textContent);
    names = detail.runs.map((run) => run.name);
    runs = names.map((name, i) => ({ name, color: TabRules.runColor(i) }));
    x = detail.x;
    for (const run of detail.runs) {
      sent[run.name] = run.points;
      if (run.closed) closed.add(run.name);
    }
    paint();
    renderStats();
    names.forEach(showPoints);
    board = Charts.board({
      container: document.getElementById("panels"),
      runs,
      single: false,
      grouped: detail.default,
      x,
      url: panelsUrl,
      part: (line) => line,
    });
    for (const run of detail.runs) board.count(run.name, run.keys);
    board.add(detail.panels);
    board.prefetch();
    // The address says what is on screen, each run once and by its full name: shareable.
    history.replaceState(null, "", location.pathname + address());
  }

  function start() {
    board.start();
    controls();
    socket = follow();
    connect();
  }

  function address(changes = {}) {
    return TabRules.compareQuery({ runs: names, layout: detail.layout, x, ...changes });
  }

  function note(text) { document.getElementById("live-note").textContent = text; }

  function panelsUrl(numbers, view) {
    const query = new URLSearchParams({ runs: names.join(",") });
    if (detail.layout !== names[0]) query.set("layout", detail.layout);
    if (view.x) query.set("x", view.x);
    for (const number of numbers) query.append("panel", number);
    if (view.range) { query.set("low", view.range[0]); query.set("high", view.range[1]); }
    if (view.smooth) query.set("smooth", view.smooth);
    return `/api/compare/panels/?${query}`;
  }

  // ---- the runs, and their stats as a table --------------------------------------------------
  function paint() {
    runs.forEach((run) => {
      for (const swatch of document.querySelectorAll(`[data-run='${run.name}'] .swatch`)) swatch.style.backgroundColor = run.color;
    });
  }

  function renderStats() {
    const head = document.querySelector("#stats thead tr");
    const body = document.querySelector("#stats tbody");
    columns = detail.stats.map((stat) => {
      head.append(fmt.el("th", { class: "num", "data-key": stat.y, title: `${stat.reduce} of ${stat.y}` }, stat.title,
        fmt.el("div", { class: "reduce", text: `${stat.reduce} of ${stat.y}` })));
      return { stat, cells: {}, values: {} };
    });
    detail.runs.forEach((run, i) => {
      const row = body.querySelector(`tr[data-run='${run.name}']`);
      for (const column of columns) {
        column.values[run.name] = column.stat.values[i];
        column.cells[run.name] = fmt.el("td", { class: "num", "data-key": column.stat.y, text: fmt.number(column.stat.values[i]) });
        row.append(column.cells[run.name]);
      }
    });
  }

  function showPoints(run) {
    for (const cell of document.querySelectorAll(`tr[data-run='${run}'] .points`)) cell.textContent = fmt.count(sent[run]);
  }

  function updateStats(run, points) {
    for (const column of columns) {
      for (const p of points) {
        const v = p.data[column.stat.y];
        if (v !== undefined) column.values[run] = TabRules.reduce(column.stat.reduce, column.values[run], v);
      }
      column.cells[run].textContent = fmt.number(column.values[run]);
    }
  }

  function showStatus(run, status) {
    for (const badge of document.querySelectorAll(`[data-run='${run}'] .status`)) {
      badge.textContent = status;
      badge.className = `status status-${status}`;
    }
  }

  // ---- the controls: the layout shown, the x of every panel, smoothing ---------------------------
  function controls() {
    const layout = document.getElementById("layout");
    // Another run's layout is other panels: the page for it, at its own address.
    layout.addEventListener("change", () => location.assign(location.pathname + address({ layout: layout.value })));

    const align = document.getElementById("align");
    const choices = detail.align.filter((key) => key !== x);
    align.append(fmt.el("option", { value: "", text: "each panel's own" }));
    for (const key of x ? [x, ...choices] : choices) align.append(fmt.el("option", { value: key, text: key }));
    align.value = x || "";
    align.addEventListener("change", () => {
      x = align.value || null;
      history.replaceState(null, "", location.pathname + address());
      board.align(x);
    });

    const slider = document.getElementById("smoothing");
    const shown = () => (Number(slider.value) ? Number(slider.value).toFixed(2) : "off");
    slider.addEventListener("input", () => { document.getElementById("smoothing-value").textContent = shown(); });
    slider.addEventListener("change", () => board.smooth(Number(slider.value)));
  }

  // ---- live: the runs still running, on one socket ----------------------------------------------
  const following = () => names.filter((name) => !closed.has(name));

  function connect() {
    if (!following().length) {
      note("These runs have ended: what they wrote is all drawn.");
      return;
    }
    socket.connect();
  }

  function follow() {
    return Charts.live({
      path: () => `/ws/compare/${following().join(",")}/`,
      after: () => Object.fromEntries(following().map((name) => [name, sent[name]])),
      opened: () => note("Live"),
      points: (message) => receive(message.run, message.points),
      status,
      note,
      over: () => !following().length,
      behind: resume,
      notYours: "One of these runs is not yours to see any more.",
      loggedOut: "You are logged out: log in again to follow these runs.",
    });
  }

  // Closed as too far behind (4413): every run read again from the API, then followed on after.
  async function resume() {
    try {
      await reread();
      for (const run of detail.runs) {
        columns.forEach((column, i) => { column.values[run.name] = detail.stats[i].values[names.indexOf(run.name)]; });
        updateStats(run.name, []);
      }
      await board.reload();
      for (const run of detail.runs) sent[run.name] = board.lastOf(run.name, run.points);
      connect();
    } catch (e) {
      socket.later(resume);
    }
  }

  function status(message) {
    showStatus(message.run, message.status);
    if (!message.closed) return;
    closed.add(message.run);
    if (!following().length) {
      note("These runs have ended: what they wrote is all drawn.");
      socket.close();
    }
  }

  function receive(run, points) {
    const fresh = points.filter((p) => p.seq > sent[run]);
    if (!fresh.length) return;
    sent[run] = fresh[fresh.length - 1].seq;
    showPoints(run);
    updateStats(run, fresh);
    board.receive(run, fresh);
    // The default layout of the run shown has a panel a key: one it writes now adds a panel.
    if (detail.default && run === detail.layout && board.unknownKeys(fresh)) reread();
  }

  // The comparison read again: its runs' keys and stats, and the panels new keys need.
  function reread() {
    adding = adding.catch(() => {}).then(async () => {
      detail = await fmt.json(`/api/compare/${address()}`);
      for (const run of detail.runs) board.count(run.name, run.keys);
      const have = (spec) => board.panels.some((p) => p.spec.title === spec.title && p.spec.y.join() === spec.y.join());
      board.add(detail.panels.filter((spec) => !have(spec)));
    });
    return adding;
  }

  return { open, start, panels: () => board.panels };
})();

Comparison.open();
// Once every script has run, Plotly.js included.
document.addEventListener("DOMContentLoaded", Comparison.start);
