// The runs: a page of 50 from /api/runs/search/, its filters, search, sort and page kept in the
// address (a link reproduces the view; back and forward work), the rows on screen kept live by
// the dashboard's websocket, a sparkline a row, and checkboxes that lead to /compare/.
"use strict";

(function () {
  const MOST_COMPARED = 10; // runs one comparison overlays: more lines than a chart can tell apart
  const PARAMS = ["q", "status", "org", "sort", "page"];
  const FILTERS = ["status", "org"]; // any of several values
  const DEFAULT_SORT = "-created";
  const SEARCH_PAUSE = 300; // ms of no typing before a search is made
  const SELECTED_KEY = "divergent.compare";

  const form = document.getElementById("filters");
  const body = document.querySelector("#runs tbody");
  const empty = document.getElementById("no-runs");
  const problem = document.getElementById("problem");
  const total = document.getElementById("total");
  const pager = document.getElementById("pager");
  const compare = document.getElementById("compare");
  const clear = document.getElementById("clear-selection");
  const sortSelect = form.elements.sort;
  const cardOptions = document.getElementById("card-sorts");

  let view = null; // the last page the server sent
  let rows = new Map(); // name -> { tr, run, at }: the rows on screen
  let asked = 0; // the latest request: an older answer arriving late is dropped
  let selected = loadSelected();

  // ---- the address ------------------------------------------------------------------------

  // The address read as /api/runs/search/ reads it (telemetry/listing.py's parse), so the page
  // shows what it lists: a filter is any of its values, repeated (?status=failed&status=lost)
  // or joined by commas, kept here joined by commas; any other parameter given twice is its
  // last value.
  function stateFromAddress() {
    const params = new URLSearchParams(location.search);
    const state = {};
    for (const name of PARAMS) {
      const values = params.getAll(name);
      state[name] = FILTERS.includes(name)
        ? values.flatMap((value) => value.split(",")).filter(Boolean).join(",")
        : values[values.length - 1] || "";
    }
    return state;
  }

  function addressOf(state) {
    const params = new URLSearchParams();
    for (const name of PARAMS) {
      const value = state[name];
      if (!value || (name === "page" && value === "1") || (name === "sort" && value === DEFAULT_SORT)) continue;
      params.set(name, value);
    }
    const query = params.toString();
    return query ? `?${query}` : location.pathname;
  }

  function go(changes, { replace = false } = {}) {
    const state = { ...stateFromAddress(), ...changes };
    if (!("page" in changes)) state.page = ""; // a new filter, search or sort starts at page 1
    const address = addressOf(state);
    if (replace) history.replaceState(null, "", address);
    else history.pushState(null, "", address);
    load();
  }

  // ---- the page ---------------------------------------------------------------------------

  async function load() {
    const state = stateFromAddress();
    showControls(state);
    const number = ++asked;
    const params = new URLSearchParams();
    for (const name of PARAMS) if (state[name]) params.set(name, state[name]);
    let answer;
    try {
      const r = await fetch(`/api/runs/search/?${params}`, { credentials: "same-origin", headers: { Accept: "application/json" } });
      answer = { ok: r.ok, status: r.status, body: await r.json().catch(() => null) };
    } catch (e) {
      answer = { ok: false, status: 0, body: null };
    }
    if (number !== asked) return; // the user has asked for another view since
    if (!answer.ok) {
      const why = answer.body && answer.body.error ? answer.body.error : `the server answered ${answer.status || "nothing"}`;
      showProblem(answer.status === 403 ? "You are logged out: log in again to see the runs." : why);
      return;
    }
    showProblem("");
    render(answer.body, state);
  }

  function showProblem(text) {
    problem.textContent = text;
    problem.hidden = !text;
    if (text) {
      body.replaceChildren();
      rows = new Map();
      pager.replaceChildren();
      total.textContent = "";
      watch();
    }
  }

  function showControls(state) {
    // The address wins (back, forward, a link), but what is being typed keeps its spaces.
    if (form.elements.q.value.trim() !== state.q) form.elements.q.value = state.q;
    setChoice(form.elements.status, state.status);
    setChoice(form.elements.org, state.org);
    setSort(state.sort || DEFAULT_SORT);
    for (const th of document.querySelectorAll("th[data-sort]")) {
      const sort = state.sort || DEFAULT_SORT;
      const column = th.dataset.sort;
      th.setAttribute("aria-sort", sort === column ? "ascending" : sort === `-${column}` ? "descending" : "none");
    }
  }

  // A filter's select shows the address's choice, one the select does not offer (several
  // values: "failed, lost or running") as an option of its own.
  function setChoice(select, value) {
    if (value && ![...select.options].some((o) => o.value === value)) {
      const shown = [...new Set(value.split(","))];
      const label = shown.length > 1 ? `${shown.slice(0, -1).join(", ")} or ${shown[shown.length - 1]}` : value;
      select.append(new Option(label, value));
    }
    select.value = value;
  }

  function setSort(sort) {
    if (![...sortSelect.options].some((o) => o.value === sort)) addCardOptions([sort.replace(/^-?stat:/, "")]);
    sortSelect.value = sort;
  }

  function addCardOptions(titles) {
    const known = new Set([...cardOptions.querySelectorAll("option")].map((o) => o.dataset.title));
    for (const title of titles) {
      if (known.has(title)) continue;
      known.add(title);
      for (const [prefix, words] of [["-", "highest first"], ["", "lowest first"]]) {
        const option = new Option(`${title}: ${words}`, `${prefix}stat:${title}`);
        option.dataset.title = title;
        cardOptions.append(option);
      }
    }
    cardOptions.hidden = cardOptions.children.length === 0;
  }

  function render(page, state) {
    view = page;
    const orgSelect = form.elements.org;
    for (const org of page.orgs) if (![...orgSelect.options].some((o) => o.value === org)) orgSelect.append(new Option(org, org));
    addCardOptions(page.cards);
    setSort(page.sort);
    document.body.classList.toggle("one-org", page.orgs.length < 2);

    const at = performance.now();
    rows = new Map();
    body.replaceChildren(...page.runs.map((run) => {
      const tr = row(run);
      rows.set(run.name, { tr, run, at });
      return tr;
    }));
    const filtered = state.q || state.status || state.org;
    empty.hidden = page.runs.length > 0;
    empty.textContent = page.total === 0
      ? (filtered ? "No runs match these filters." : "No runs yet. Start one with div run DIR -- COMMAND.")
      : `There is no page ${fmt.count(page.page)}: the runs fill ${fmt.count(page.pages)} page${page.pages === 1 ? "" : "s"}.`;
    total.textContent = `${fmt.count(page.total)} run${page.total === 1 ? "" : "s"}`;
    renderPager(page);
    showSelection();
    watch();
  }

  function row(run) {
    const tr = fmt.el("tr", { "data-run": run.name });
    const box = fmt.el("input", { type: "checkbox", class: "pick", "aria-label": `Compare ${run.name}` });
    box.checked = selected.includes(run.name);
    box.addEventListener("change", () => pick(run.name, box.checked));
    const stats = run.stats.map((s) => `${s.title} ${fmt.number(s.value)}`).join(" · ");
    const name = fmt.el("td", { class: "name" }, fmt.el("a", { href: `/runs/${run.name}/`, text: run.name }));
    const command = run.command.join(" ");
    name.append(fmt.el("div", { class: "command", title: command, text: command }));
    tr.append(
      fmt.el("td", { class: "pick-cell" }, box),
      name,
      fmt.el("td", { class: "org-cell", text: run.org }),
      fmt.el("td", { class: "status-cell" }, fmt.el("span", { class: `status status-${run.status}`, text: run.status })),
      fmt.el("td", { class: "created-cell", text: fmt.time(run.created) }),
      fmt.el("td", { class: "duration-cell", text: fmt.duration(run.duration) }),
      points(run),
      fmt.el("td", { class: "spark-cell" }, sparkline(run.sparkline)),
      fmt.el("td", { class: "stats-cell", text: stats }),
    );
    return tr;
  }

  function points(run) {
    const cell = fmt.el("td", { class: "num", text: fmt.count(run.points) });
    // Ended before its telemetry was read: its count is not final, and 0 is not "wrote none".
    if (run.unread) cell.append(fmt.el("span", { class: "unread", text: "unread", title: "Its telemetry is not all read yet: div serve or div ingest reads it." }));
    return cell;
  }

  // ---- sparklines -------------------------------------------------------------------------

  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 120, HEIGHT = 28, PAD = 2;

  function sparkline(line) {
    const figure = fmt.el("div", { class: "spark" });
    if (!line) {
      figure.append(fmt.el("span", { class: "muted", text: "no keys yet" }));
      return figure;
    }
    const against = line.x ? `against ${line.x}` : "by point";
    const drawn = [];
    for (let i = 0; i < line.xs.length; i++) if (line.xs[i] !== null && line.ys[i] !== null) drawn.push(i);
    figure.dataset.key = line.y;
    figure.dataset.points = String(drawn.length);
    if (!drawn.length) {
      // Honest about what is missing: never a flat line at zero.
      const why = line.count === 0 ? `${line.y}: no points yet` : `${line.y}: no points with ${line.x}`;
      figure.append(fmt.el("span", { class: "muted no-points", text: why }));
      return figure;
    }
    const xs = drawn.map((i) => line.xs[i]), ys = drawn.map((i) => line.ys[i]);
    const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    const sx = (x) => PAD + (x1 === x0 ? (WIDTH - 2 * PAD) / 2 : ((x - x0) / (x1 - x0)) * (WIDTH - 2 * PAD));
    const sy = (y) => HEIGHT - PAD - (y1 === y0 ? (HEIGHT - 2 * PAD) / 2 : ((y - y0) / (y1 - y0)) * (HEIGHT - 2 * PAD));
    // A null between two points is where the key went missing: the line breaks there.
    let d = "", move = true;
    for (let i = 0; i < line.xs.length; i++) {
      if (line.xs[i] === null || line.ys[i] === null) { move = true; continue; }
      d += `${move ? "M" : "L"}${sx(line.xs[i]).toFixed(1)},${sy(line.ys[i]).toFixed(1)}`;
      move = false;
    }
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
    svg.setAttribute("width", WIDTH);
    svg.setAttribute("height", HEIGHT);
    svg.setAttribute("role", "img");
    const last = ys[ys.length - 1];
    const label = `${line.y} ${against}: from ${fmt.number(ys[0])} to ${fmt.number(last)}, lowest ${fmt.number(y0)}, highest ${fmt.number(y1)}`;
    svg.setAttribute("aria-label", label);
    const title = document.createElementNS(SVG, "title");
    title.textContent = label;
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    path.setAttribute("class", "spark-line");
    svg.append(title, path);
    if (drawn.length === 1) {
      const dot = document.createElementNS(SVG, "circle");
      dot.setAttribute("cx", sx(xs[0]));
      dot.setAttribute("cy", sy(ys[0]));
      dot.setAttribute("r", 2);
      dot.setAttribute("class", "spark-dot");
      svg.append(dot);
    }
    figure.append(svg, fmt.el("span", { class: "spark-key", text: line.y }));
    return figure;
  }

  // ---- paging -----------------------------------------------------------------------------

  function renderPager(page) {
    const link = (number, text, rel) => {
      const state = { ...stateFromAddress(), page: String(number) };
      const a = fmt.el("a", { href: addressOf(state), text, "data-page": String(number) });
      if (rel) a.setAttribute("rel", rel);
      a.addEventListener("click", (event) => {
        if (event.metaKey || event.ctrlKey || event.shiftKey) return; // a new tab: let it
        event.preventDefault();
        go({ page: String(number) });
        window.scrollTo(0, 0);
      });
      return a;
    };
    const parts = [];
    parts.push(page.page > 1 ? link(Math.min(page.page - 1, page.pages), "‹ Previous", "prev") : fmt.el("span", { class: "muted", text: "‹ Previous" }));
    parts.push(fmt.el("span", { class: "where", text: `Page ${fmt.count(page.page)} of ${fmt.count(page.pages)}` }));
    parts.push(page.page < page.pages ? link(page.page + 1, "Next ›", "next") : fmt.el("span", { class: "muted", text: "Next ›" }));
    if (page.page > page.pages) parts.push(link(page.pages, "Last page", null));
    pager.replaceChildren(...parts);
  }

  // ---- comparing --------------------------------------------------------------------------

  function loadSelected() {
    try {
      const kept = JSON.parse(sessionStorage.getItem(SELECTED_KEY) || "[]");
      return Array.isArray(kept) ? kept.filter((n) => typeof n === "string" && /^run-[1-9][0-9]*$/.test(n)).slice(0, MOST_COMPARED) : [];
    } catch (e) {
      return [];
    }
  }

  function pick(name, on) {
    selected = selected.filter((n) => n !== name);
    if (on && selected.length < MOST_COMPARED) selected.push(name);
    sessionStorage.setItem(SELECTED_KEY, JSON.stringify(selected));
    showSelection();
  }

  // The runs to compare in the order the user sees them: this page's rows top to bottom, then
  // those checked on other pages or searches, in the order they were checked.
  function ordered() {
    const here = [...rows.keys()].filter((n) => selected.includes(n));
    return [...here, ...selected.filter((n) => !rows.has(n))];
  }

  function showSelection() {
    const names = ordered();
    const full = names.length >= MOST_COMPARED;
    for (const [name, { tr }] of rows) {
      const box = tr.querySelector("input.pick");
      box.checked = names.includes(name);
      box.disabled = full && !box.checked;
      box.title = box.disabled ? `Compare up to ${MOST_COMPARED} runs at once` : "";
    }
    const ready = names.length >= 2;
    compare.textContent = names.length ? `Compare ${names.length}` : "Compare";
    compare.setAttribute("aria-disabled", String(!ready));
    compare.classList.toggle("disabled", !ready);
    compare.title = ready ? names.join(", ") : `Check two runs or more (up to ${MOST_COMPARED}) to compare them`;
    if (ready) compare.setAttribute("href", `/compare/?runs=${names.join(",")}`);
    else compare.removeAttribute("href");
    clear.hidden = names.length === 0;
  }

  compare.addEventListener("click", (event) => {
    if (compare.getAttribute("aria-disabled") === "true") event.preventDefault();
  });
  clear.addEventListener("click", () => {
    selected = [];
    sessionStorage.removeItem(SELECTED_KEY);
    showSelection();
  });

  // ---- live rows --------------------------------------------------------------------------

  let socket = null;
  let retry = 1000;
  let stopped = false;

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}/ws/dashboard/`);
    socket = ws;
    ws.onopen = () => { retry = 1000; watch(); };
    ws.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type !== "runs") return;
      for (const state of message.runs) update(state);
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ ack: message.ack }));
      if (message.created && showsNewest()) load(); // a new run belongs at the top of this view
    };
    ws.onclose = (event) => {
      if (socket !== ws) return;
      socket = null;
      if (event.code === 4401) { stopped = true; live.textContent = "Logged out: log in again for live updates."; return; }
      // 4403: a row on screen is no longer the user's to see: read the view again, without it.
      if (event.code === 4403) load();
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 15000);
    };
  }

  const live = document.getElementById("live-note");

  function showsNewest() {
    const state = stateFromAddress();
    return (state.sort || DEFAULT_SORT) === DEFAULT_SORT && (state.page || "1") === "1";
  }

  function watch() {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ watch: [...rows.keys()] }));
  }

  function update(state) {
    const shown = rows.get(state.name);
    if (!shown) return;
    const { tr } = shown;
    Object.assign(shown.run, state);
    shown.at = performance.now();
    const badge = tr.querySelector(".status");
    badge.textContent = state.status;
    badge.className = `status status-${state.status}`;
    tr.querySelector("td.num").replaceWith(points(shown.run));
    tr.querySelector(".duration-cell").textContent = fmt.duration(state.duration);
  }

  // A running run's duration counts on between messages, from what the server last said.
  setInterval(() => {
    const now = performance.now();
    for (const { tr, run, at } of rows.values()) {
      if (run.status === "running" && run.duration !== null && run.duration !== undefined) {
        tr.querySelector(".duration-cell").textContent = fmt.duration(run.duration + (now - at) / 1000);
      }
    }
  }, 1000);

  // ---- the controls -----------------------------------------------------------------------

  let pause = null;
  form.elements.q.addEventListener("input", () => {
    clearTimeout(pause);
    pause = setTimeout(() => go({ q: form.elements.q.value.trim() }), SEARCH_PAUSE);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(pause);
    go({ q: form.elements.q.value.trim() });
  });
  form.elements.status.addEventListener("change", () => go({ status: form.elements.status.value }));
  form.elements.org.addEventListener("change", () => go({ org: form.elements.org.value }));
  sortSelect.addEventListener("change", () => go({ sort: sortSelect.value }));
  for (const th of document.querySelectorAll("th[data-sort]")) {
    const button = th.querySelector("button");
    button.addEventListener("click", () => {
      const column = th.dataset.sort;
      const sort = stateFromAddress().sort || DEFAULT_SORT;
      go({ sort: sort === `-${column}` ? column : `-${column}` }); // highest first, then lowest
    });
  }
  window.addEventListener("popstate", load);

  load();
  connect();
})();
