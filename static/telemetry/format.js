// Formatting shared by the pages: numbers as written, counts with separators, durations.
"use strict";

const fmt = {
  number(v) {
    if (v === null || v === undefined) return "—";
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-4 || a >= 1e6)) return v.toExponential(3).replace("e+", "e");
    return String(Number(v.toPrecision(6)));
  },
  count(n) { return Number(n).toLocaleString("en-US"); },
  duration(seconds) {
    if (seconds === null || seconds === undefined) return "—";
    const s = Math.round(seconds);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return h ? `${h}h ${m}m` : m ? `${m}m ${r}s` : `${r}s`;
  },
  // Every time on the pages is the reader's local time, formatted here and only here.
  time(iso, { seconds = false } = {}) {
    if (!iso) return "—";
    const d = new Date(iso);
    const p = (n) => String(n).padStart(2, "0");
    const hm = `${p(d.getHours())}:${p(d.getMinutes())}${seconds ? `:${p(d.getSeconds())}` : ""}`;
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${hm}`;
  },
  // A <time datetime> element showing that time; the server renders the same in its own zone.
  timeEl(iso) {
    if (!iso) return "—";
    return fmt.el("time", { datetime: iso, text: fmt.time(iso, { seconds: true }) });
  },
  async json(url) {
    const r = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(`${url}: ${r.status}`);
    return r.json();
  },
  el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  },
};
