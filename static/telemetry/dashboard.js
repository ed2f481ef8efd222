// The runs: polled every two seconds, so statuses and stats update while runs go on.
"use strict";

(function () {
  const body = document.querySelector("#runs tbody");
  const empty = document.getElementById("no-runs");

  function row(run) {
    const stats = run.stats.map((s) => `${s.title} ${fmt.number(s.value)}`).join(" · ");
    const tr = fmt.el("tr", { "data-run": run.name });
    tr.append(
      fmt.el("td", {}, fmt.el("a", { href: `/runs/${run.name}/`, text: run.name })),
      fmt.el("td", {}, fmt.el("span", { class: `status status-${run.status}`, text: run.status })),
      fmt.el("td", { text: fmt.time(run.started) }),
      fmt.el("td", { text: fmt.duration(run.duration) }),
      points(run),
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

  async function refresh() {
    try {
      const { runs } = await fmt.json("/api/runs/");
      body.replaceChildren(...runs.map(row));
      empty.hidden = runs.length > 0;
    } catch (e) {
      console.warn(e);
    }
  }

  refresh();
  setInterval(refresh, 2000);
})();
