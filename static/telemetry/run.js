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

  const log = document.getElementById("log");
  let offset = 0;
  async function followLog() {
    try {
      const part = await fmt.json(`/api/runs/${name}/log/?offset=${offset}`);
      if (part.text) {
        const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        log.append(part.text);
        if (atBottom) log.scrollTop = log.scrollHeight;
      }
      offset = part.offset;
      if (part.live || part.text) setTimeout(followLog, 1000);
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
