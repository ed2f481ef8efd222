// A run's page: its tabs, the Log tab following the log, the Telemetry tab started.
"use strict";

(function () {
  const LOST = "This run was lost: its supervisor went without recording how the command ended (killed, or its machine restarted).";
  const head = document.getElementById("run");
  const name = head.dataset.name;
  for (const t of head.querySelectorAll("time[datetime]")) t.textContent = fmt.time(t.getAttribute("datetime"), { seconds: true });

  for (const button of document.querySelectorAll(".tabs button")) {
    button.addEventListener("click", () => {
      for (const b of document.querySelectorAll(".tabs button")) {
        b.setAttribute("aria-selected", String(b === button));
        document.getElementById(`tab-${b.dataset.tab}`).hidden = b !== button;
      }
      window.dispatchEvent(new Event("resize")); // Plotly sizes panels to their shown width
    });
  }

  // The Log tab draws the log as a terminal would: the server sends styled spans, a line being
  // rewritten (a progress bar) as its last state only, which the next page replaces.
  const log = document.getElementById("log");
  let offset = 0;
  let partial = null;

  function lineEl(spans) {
    const line = document.createElement("span");
    for (const [text, style] of spans) {
      const span = document.createElement("span");
      span.textContent = text;
      if (style) styled(span, style);
      line.append(span);
    }
    return line;
  }

  function styled(span, style) {
    // 0 to 15 are the terminal's own palette (app.css); anything else is a colour of its own.
    if (typeof style.fg === "number") span.classList.add(`fg${style.fg}`);
    else if (style.fg) span.style.color = style.fg;
    if (typeof style.bg === "number") span.classList.add(`bg${style.bg}`);
    else if (style.bg) span.style.backgroundColor = style.bg;
    for (const flag of ["b", "d", "i", "u"]) if (style[flag]) span.classList.add(flag);
  }

  async function followLog() {
    try {
      const page = await fmt.json(`/api/runs/${name}/log/screen/?offset=${offset}`);
      const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      const added = document.createDocumentFragment();
      for (const spans of page.lines) added.append(lineEl(spans), "\n");
      if (partial) partial.remove();
      partial = page.partial ? lineEl(page.partial) : null;
      if (partial) added.append(partial);
      log.append(added);
      if (atBottom) log.scrollTop = log.scrollHeight;
      offset = page.offset;
      if (page.more) followLog();
      else if (page.live) setTimeout(followLog, 1000);
    } catch (e) {
      setTimeout(followLog, 3000);
    }
  }
  followLog();

  async function showEnd() {
    const run = await fmt.json(`/api/runs/${name}/`);
    document.getElementById("exit-code").textContent = run.exit_code === null ? "—" : run.exit_code;
    document.getElementById("ended").replaceChildren(fmt.timeEl(run.ended));
    document.getElementById("drops").replaceChildren(...run.drops.map((d) => fmt.el("li", { text: d.notice })));
    const banner = document.getElementById("ended-banner");
    if (run.status === "lost") banner.textContent = LOST;
    else banner.textContent = run.exit_code === null ? "This run has ended." : `This run has ended (exit code ${run.exit_code}).`;
    banner.hidden = false;
    document.getElementById("unread-banner").hidden = !run.unread;
  }

  TelemetryTab.start({
    onStatus(status, closed) {
      const badge = document.getElementById("status");
      badge.textContent = status;
      badge.className = `status status-${status}`;
      head.dataset.status = status;
      head.dataset.closed = String(closed);
      if (status !== "running") showEnd();
      else document.getElementById("ended-banner").hidden = true; // a lost run heard from again
    },
  });
})();
