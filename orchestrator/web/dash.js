// orch dashboard: one page, views chosen by the URL (state lives in the URL: reload and back/forward work).
//   /                          runs table; filters ?suite=&host=&label=&status=&since=&until= in the URL
//   /runs/{ref}?with=a,b       a run's headline views (rooflines), other runs overlaid; ref: id, short id, prefix
//   /compare?base=&head=       the API's /compare (the function `orch runs compare` prints), flags marked
//   /hosts/{name}              a host's facts and its runs
//   /series?suite=&metric=&x=  a metric over a case parameter, latest run per host (or per run)
// Numbers, verdicts and plot data come from the API; nothing here recomputes them.
"use strict";
const API = "/api/v1";
const TOKEN_KEY = "orch-read-token";  // sessionStorage: kept for this tab only, never in the URL
const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#4b5563"];
const $ = (id) => document.getElementById(id);
let renderSeq = 0;  // a slower answer for a previous view must not draw over the current one
let fetchedAt = 0;  // when the current view's API answers were all in (performance.now())
window.orchTimings = [];  // per rendered view: {path, ms} from the route's start to the last plot drawn

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) if (c != null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
const link = (href, text, attrs) => el("a", { href, "data-nav": true, ...(attrs || {}) }, text);
const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");  // Plotly text is HTML-ish
const shortId = (id) => id.replace(/-/g, "").slice(-8);

class NeedToken extends Error {}

// JSON.parse rounds an integer past 2**53 (a case parameter such as n=9007199254740993 shows as ...992): such a
// number is kept as the digits the server wrote, read from the reviver's source text (TC39 "JSON.parse source
// text access", Chromium 114+; where a browser lacks it, the number is parsed as before).
const exactInts = (_k, v, ctx) => typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v) &&
  ctx && typeof ctx.source === "string" && /^-?[0-9]+$/.test(ctx.source) ? ctx.source : v;

async function get(path, params) {
  const url = new URL(API + path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    for (const item of Array.isArray(v) ? v : [v]) if (item !== "" && item != null) url.searchParams.append(k, item);
  }
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  const r = await fetch(url, { headers: token ? { Authorization: "Bearer " + token } : {} });
  let body = null;
  try { body = JSON.parse(await r.text(), exactInts); } catch (_) { /* a non-JSON answer: reported below */ }
  if (r.status === 401) throw new NeedToken(token ? "the read token was refused" : "this server needs a read token");
  if (!r.ok) {
    const d = body && body.detail;
    throw new Error(typeof d === "string" ? d : d ? d.map((x) => x.msg || JSON.stringify(x)).join("; ") : `HTTP ${r.status}`);
  }
  return body;
}

const NUMBER_FORMATS = {};  // one Intl.NumberFormat per precision: toLocaleString builds one per call (slow)
function fmt(x, digits) {
  if (x == null || Number.isNaN(x)) return "-";
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e7)) return x.toExponential(2);
  const d = digits || 4;
  return (NUMBER_FORMATS[d] ||= new Intl.NumberFormat("en-US", { maximumSignificantDigits: d })).format(x);
}
// head/base: 3 decimals (1.001) while that keeps 3 significant figures, else fmt's (a ratio is never shown as 0.000)
const ratioText = (x) => x == null ? "-" : (x === 0 || Math.abs(x) >= 0.1 ? x.toFixed(3) : fmt(x, 3));
const caseText = (c) => Object.entries(c || {}).filter(([n]) => n !== "seed").map(([n, v]) => `${n}=${v}`).join(" ");

function go(href) { history.pushState(null, "", href); route(); }
function setQuery(params, replace) {
  const u = new URL(location.href);
  for (const [k, v] of Object.entries(params)) { if (v === "" || v == null) u.searchParams.delete(k); else u.searchParams.set(k, v); }
  if (replace) history.replaceState(null, "", u); else history.pushState(null, "", u);
}

function tokenForm(message) {
  const input = el("input", { id: "token", type: "password", size: 32, autocomplete: "off" });
  const use = () => { sessionStorage.setItem(TOKEN_KEY, input.value.trim()); route(); };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") use(); });
  return el("section", { id: "token-box", class: "notice" },
    el("h2", {}, "Read token needed"),
    el("p", { id: "token-msg" }, `${message}: set ORCH_API_READ_TOKEN on the server means every read needs it. ` +
      "Enter the read token (or the write token) once; it is kept for this browser tab only (sessionStorage)."),
    el("label", {}, "token ", input), " ", el("button", { id: "token-use", onclick: use }, "Use token"));
}

async function route() {
  const seq = ++renderSeq;
  const t0 = performance.now();
  const u = new URL(location.href);
  const view = $("view");
  for (const p of view.querySelectorAll(".plot")) if (window.Plotly) Plotly.purge(p);
  view.replaceChildren(el("p", { class: "muted" }, "loading…"));
  const stale = () => seq !== renderSeq;
  try {
    let m;
    if (u.pathname === "/") await runsPage(u.searchParams, stale);
    else if ((m = u.pathname.match(/^\/runs\/([^/]+)$/))) await runPage(decodeURIComponent(m[1]), u.searchParams, stale);
    else if (u.pathname === "/compare") await comparePage(u.searchParams, stale);
    else if ((m = u.pathname.match(/^\/hosts\/([^/]+)$/))) await hostPage(decodeURIComponent(m[1]), stale);
    else if (u.pathname === "/series") await seriesPage(u.searchParams, stale);
    else view.replaceChildren(el("p", { class: "err" }, `no page ${u.pathname}`));
    if (!stale()) window.orchTimings.push({ path: u.pathname + u.search, ms: performance.now() - t0, fetched_ms: fetchedAt - t0 });
  } catch (e) {
    if (stale()) return;
    if (e instanceof NeedToken) view.replaceChildren(tokenForm(e.message));
    else view.replaceChildren(el("p", { class: "err", id: "error" }, e.message));
  } finally {
    if (!stale()) document.body.dataset.ready = String(seq);  // tests wait on this
  }
}

// ---------------------------------------------------------------------------------------------- runs table
const FILTERS = ["suite", "host", "label", "status", "since", "until"];
const DATES = ["since", "until"];  // the API takes ISO dates (UTC): since = started on or after, until = before
const PAGE = 50;

async function runsPage(q, stale) {
  const offset = Number(q.get("offset") || 0);
  const params = { limit: PAGE, offset };
  for (const f of FILTERS) params[f] = q.get(f) || "";
  const page = await get("/runs", params);
  if (stale()) return;
  const ticked = [];
  const status = el("span", { id: "ticked", class: "muted" });
  const cmp = el("button", { id: "compare-ticked", disabled: true }, "Compare");
  const overlay = el("button", { id: "overlay-ticked", disabled: true }, "Plot together");
  const onTick = () => {
    cmp.disabled = ticked.length !== 2;
    overlay.disabled = ticked.length < 2;
    status.textContent = ticked.length === 2 ? `base ${shortId(ticked[0])}, head ${shortId(ticked[1])}`
      : ticked.length ? `${ticked.length} run(s) ticked: tick exactly two to compare` : "";
  };
  cmp.addEventListener("click", () => go(`/compare?base=${shortId(ticked[0])}&head=${shortId(ticked[1])}`));
  overlay.addEventListener("click", () => go(`/runs/${shortId(ticked[0])}?with=${ticked.slice(1).map(shortId).join(",")}`));
  const filters = el("form", { id: "filters", class: "filters" }, FILTERS.map((f) =>
    el("label", {}, f + " ", f === "status"
      ? el("select", { name: f }, ["", "completed", "partial", "failed", "cancelled", "running", "pending"]
        .map((s) => el("option", { value: s, selected: (q.get(f) || "") === s }, s || "any")))
      : el("input", { name: f, value: q.get(f) || "", size: DATES.includes(f) ? 10 : 12, type: DATES.includes(f) ? "date" : "text",
        placeholder: DATES.includes(f) ? "" : "any" }))),
    el("button", { type: "submit" }, "Filter"));
  filters.addEventListener("submit", (e) => {
    e.preventDefault();
    const data = new FormData(filters);
    const next = {}; for (const f of FILTERS) next[f] = (data.get(f) || "").trim();
    next.offset = "";
    setQuery(next); route();
  });
  const body = el("tbody", { id: "runs" });
  for (const r of page.items) {
    const box = el("input", { type: "checkbox", "aria-label": "tick " + shortId(r.id) });
    box.addEventListener("change", () => {
      const i = ticked.indexOf(r.id);
      if (box.checked && i < 0) ticked.push(r.id);
      if (!box.checked && i >= 0) ticked.splice(i, 1);
      onTick();
    });
    const copy = el("button", { class: "copy", title: "copy the full id " + r.id, "aria-label": "copy id" }, "copy");
    copy.addEventListener("click", () => copyText(r.id, copy));
    const hosts = el("td", { class: "hosts", title: r.hosts.join(", ") }, r.hosts.map((h, i) => [i ? ", " : "", link(`/hosts/${encodeURIComponent(h)}`, h)]));
    body.append(el("tr", { class: "run" }, el("td", {}, box),
      el("td", { class: "id" }, link(`/runs/${shortId(r.id)}`, shortId(r.id)), " ", copy),
      el("td", {}, r.started_at.slice(0, 16).replace("T", " ")), el("td", {}, r.suite), el("td", { class: "label" }, r.label || "-"),
      el("td", { class: "st-" + r.status }, r.status), hosts,
      el("td", { class: "num" }, r.results + (r.errors ? ` (+${r.errors} err)` : ""))));
  }
  if (!page.items.length) body.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "no runs match")));
  const pager = el("div", { class: "pager" },
    offset > 0 ? el("button", { id: "prev", onclick: () => { setQuery({ offset: Math.max(0, offset - PAGE) || "" }); route(); } }, "← newer") : null,
    el("span", { class: "muted" }, ` ${page.total ? offset + 1 : 0}–${offset + page.items.length} of ${page.total} `),
    offset + PAGE < page.total ? el("button", { id: "next", onclick: () => { setQuery({ offset: offset + PAGE }); route(); } }, "older →") : null);
  $("view").replaceChildren(el("section", {},
    el("h2", {}, "Runs"), filters,
    el("p", { class: "actions" }, cmp, " ", overlay, " ", status),
    el("table", { class: "runs" }, el("colgroup", {}, ["c-tick", "c-id", "c-time", "c-suite", "c-label", "c-status", "c-hosts", "c-num"].map((c) => el("col", { class: c }))),
      el("thead", {}, el("tr", {}, ["", "run", "started (UTC)", "suite", "label", "status", "hosts", "results"].map((h, i) => el("th", { class: i === 7 ? "num" : null }, h)))), body),
    pager));
}

async function copyText(text, button) {
  try { await navigator.clipboard.writeText(text); button.textContent = "✓"; }
  catch (_) { window.prompt("copy the run id", text); }
}

// ---------------------------------------------------------------------------------------------- plots
function plotView(v, opts) {
  const data = [];
  v.traces.forEach((t, i) => {
    const color = COLORS[i % COLORS.length];
    const group = "t" + i;
    const params = (p) => Object.entries(p.case).filter(([n]) => n !== "seed" && n !== v.x).map(([n, val]) => `${esc(n)}=${esc(val)}`).join(" ");
    const banded = t.points.filter((p) => p.p10 != null && p.p90 != null);
    if (banded.length) {  // the p10-p90 band: two paths, cheaper to draw than an error bar per point
      data.push({ type: "scatter", mode: "lines", meta: "band", legendgroup: group, showlegend: false, hoverinfo: "skip",
        x: banded.map((p) => p.x), y: banded.map((p) => p.p10), line: { width: 0, color } });
      data.push({ type: "scatter", mode: "lines", meta: "band", legendgroup: group, showlegend: false, hoverinfo: "skip",
        x: banded.map((p) => p.x), y: banded.map((p) => p.p90), line: { width: 0, color }, fill: "tonexty", fillcolor: color + "26" });
    }
    data.push({
      type: "scatter", mode: t.points.length > 200 ? "lines" : "lines+markers", name: esc(t.name), meta: "data", legendgroup: group,
      x: t.points.map((p) => p.x), y: t.points.map((p) => p.y),
      line: { color, width: 2 }, marker: { color, size: 6 },
      text: t.points.map((p) => `<b>${esc(t.name)}</b><br>${esc(v.x)}=${fmt(p.x)}: ${fmt(p.y)} ${esc(v.unit || "")}` +
        `<br>p10 ${fmt(p.p10)} · p90 ${fmt(p.p90)}<br>${params(p)}` + p.flags.map((f) => `<br><b>⚠ ${esc(f)}</b>`).join("")),
      hovertemplate: "%{text}<extra></extra>",
    });
    const hot = t.points.filter((p) => p.flags.length);
    if (hot.length) {
      data.push({ type: "scatter", mode: "markers", meta: "flag", name: esc(t.name) + ": throttled / shared GPU", legendgroup: group,
        x: hot.map((p) => p.x), y: hot.map((p) => p.y), marker: { color: "#b42318", size: 11, symbol: "x" },
        text: hot.map((p) => p.flags.map(esc).join("<br>")), hovertemplate: "%{text}<extra></extra>" });
    }
  });
  const xs = v.traces.flatMap((t) => t.points.map((p) => p.x));
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  v.refs.forEach((r) => {
    data.push({ type: "scatter", mode: "lines", name: esc(r.label), meta: "ref", x: [x0, x1], y: [r.y, r.y],
      line: { color: r.kind === "measured" ? "#111827" : "#6b7280", width: 1.5, dash: r.kind === "measured" ? "dash" : "dot" },
      hovertemplate: `${esc(r.label)}<br>source: ${esc(r.source)}<extra></extra>` });
  });
  const layout = {
    title: { text: esc(v.title), font: { size: 15 }, x: 0.01, xanchor: "left" },
    height: 420, margin: { l: 70, r: 20, t: 40, b: 60 },
    xaxis: { title: { text: esc(v.x_axis.title) }, type: v.x_axis.log ? "log" : "linear", automargin: true,
      ...(v.x_axis.log ? { tickmode: "array", tickvals: v.x_axis.tickvals, ticktext: v.x_axis.ticktext } : {}) },
    yaxis: { title: { text: esc(v.y_title) }, rangemode: "tozero", tickformat: ",~r", automargin: true },
    legend: { orientation: "h", x: 0, xanchor: "left", y: -0.18, yanchor: "top" },  // outside the data, below
    hovermode: "closest",
  };
  const div = el("div", { class: "plot", "data-metric": v.metric, ...(opts || {}) });
  return [div, () => Plotly.newPlot(div, data, layout, { responsive: true, displaylogo: false })];
}

async function drawAll(box, views) {
  const draws = [];
  for (const v of views) {
    const [div, draw] = plotView(v);
    box.append(div);
    draws.push(draw);
  }
  for (const d of draws) await d();
}

function flagsBox(flags, who) {
  const out = [];
  const diffs = flags.fleet_differences || [];
  if (diffs.length) {
    out.push(el("div", { class: "notice warn fleet" }, el("b", {}, `${who}fleet at start: ${diffs.length} difference(s) between hosts`),
      el("ul", {}, diffs.map((d) => el("li", {}, `${d.group}: ${d.host} has ${d.field} ${d.value} (others ${d.majority})`)))));
  }
  if (flags.cases.length) {
    out.push(el("div", { class: "notice warn flagged" },
      el("b", {}, `${who}${flags.cases.length} case(s) ran throttled or on a shared GPU (marked ✕ in the plots)`),
      el("ul", {}, flags.cases.slice(0, 20).map((c) => el("li", {},
        `${c.throttled ? "throttled" : "shared GPU"} · ${c.host} ${caseText(c.case)}: ${c.reason || ""}`)))));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------- run page
async function runPage(ref, q, stale) {
  const others = (q.get("with") || "").split(",").map((s) => s.trim()).filter(Boolean);
  const metric = q.get("metric") || "";
  const [summary, views] = await Promise.all([get("/resolve", { ref }), get("/views", { run: [ref, ...others], metric })]);
  const [run, flags] = await Promise.all([get(`/runs/${summary.id}`), get(`/runs/${summary.id}/flags`)]);
  fetchedAt = performance.now();
  if (stale()) return;
  const hostLinks = run.host_runs.map((h, i) => [i ? ", " : "", link(`/hosts/${encodeURIComponent(h.host)}`, h.host),
    ` (${h.status}${h.facts && h.facts.gpu_name ? ", " + h.facts.gpu_name : ""})`]);
  const copy = el("button", { class: "copy", title: "copy the full id" }, "copy");
  copy.addEventListener("click", () => copyText(run.id, copy));
  const picker = el("select", { id: "metric" }, el("option", { value: "" }, "headline metrics"),
    views.metrics.map((m) => el("option", { value: m, selected: m === metric }, m)));
  picker.addEventListener("change", () => { setQuery({ metric: picker.value }); route(); });
  const plots = el("div", { id: "plots", class: "plots" });
  const overlaid = views.runs.slice(1);
  $("view").replaceChildren(el("section", {},
    el("h2", { id: "title" }, `${run.suite} — ${run.label || shortId(run.id)}`),
    el("p", { id: "meta", class: "muted" }, `run ${run.id} `, copy, ` · ${run.status} · started ${run.started_at.slice(0, 19).replace("T", " ")} UTC by ${run.started_by}` +
      ` · preset ${run.preset || "-"} · ${run.results} results` + (run.errors ? `, ${run.errors} failed cases` : ""), el("br"), "hosts: ", hostLinks),
    overlaid.length ? el("p", { id: "overlay" }, "overlaid: ", overlaid.map((r, i) => [i ? ", " : "", link(`/runs/${shortId(r.id)}`, r.label || shortId(r.id))])) : null,
    flagsBox(flags, ""),
    el("p", {}, el("label", {}, "plot ", picker)),
    views.note ? el("p", { class: "muted", id: "note" }, views.note) : null,
    plots, resultsTable(views)));
  await drawAll(plots, views.views);
}

function resultsTable(views) {
  const v = views.views[0];
  if (!v) return null;
  const rows = v.traces.flatMap((t) => t.points.map((p) => [t, p]));
  const shown = rows.slice(0, 200);
  return el("details", { class: "results" }, el("summary", {}, `${v.metric} per case (${rows.length}${rows.length > shown.length ? ", first 200 shown" : ""})`),
    el("table", {}, el("thead", {}, el("tr", {}, ["trace", "case", `median (${v.unit || ""})`, "p10", "p90", "flags"].map((h) => el("th", {}, h)))),
      el("tbody", {}, shown.map(([t, p]) => el("tr", {}, el("td", {}, t.name), el("td", {}, caseText(p.case)), el("td", { class: "num" }, fmt(p.y)),
        el("td", { class: "num" }, fmt(p.p10)), el("td", { class: "num" }, fmt(p.p90)), el("td", { class: p.flags.length ? "worse" : "" }, p.flags.join("; ")))))));
}

// ---------------------------------------------------------------------------------------------- compare
const VERDICT_CLASS = { regression: "worse", improvement: "better" };

async function comparePage(q, stale) {
  const baseRef = q.get("base") || "", headRef = q.get("head") || "";
  if (!baseRef || !headRef) {
    $("view").replaceChildren(el("p", { class: "err", id: "error" }, "give two runs: /compare?base=RUN&head=RUN (ids, short ids or prefixes); tick two runs on the runs page"));
    return;
  }
  const [base, head] = await Promise.all([get("/resolve", { ref: baseRef }), get("/resolve", { ref: headRef })]);
  const [c, fb, fh, first] = await Promise.all([get("/compare", { base: base.id, head: head.id, metric: q.get("metric") || "" }),
    get(`/runs/${base.id}/flags`), get(`/runs/${head.id}/flags`), get(`/runs/${base.id}/results`, { limit: 1, status: "ok" })]);
  if (stale()) return;
  // the selection (base, head, metric) is the URL: changing it recomputes through the API
  const pick = el("form", { id: "compare-form", class: "filters" },
    el("label", {}, "base ", el("input", { name: "base", value: baseRef, size: 12 })),
    el("label", {}, "head ", el("input", { name: "head", value: headRef, size: 12 })),
    el("label", {}, "metric ", el("select", { name: "metric" }, Object.keys((first.items[0] || {}).metrics || {})
      .map((m) => el("option", { value: m, selected: m === c.metric }, m)))),
    el("button", { type: "submit" }, "Compare"),
    el("button", { type: "button", id: "swap", onclick: () => { setQuery({ base: headRef, head: baseRef }); route(); } }, "swap base/head"));
  pick.addEventListener("submit", (e) => {
    e.preventDefault();
    const d = new FormData(pick);
    setQuery({ base: d.get("base").trim(), head: d.get("head").trim(), metric: d.get("metric") }); route();
  });
  const byHost = c.paired_on === "host+case";
  const marks = (flags, side) => {
    const m = new Map();
    for (const f of flags.cases) m.set((byHost ? f.host : "*") + "\u0000" + f.case_key, `${side}: ${f.throttled ? "throttled" : "shared GPU"}${f.reason ? " (" + f.reason + ")" : ""}`);
    return m;
  };
  const mb = marks(fb, "base"), mh = marks(fh, "head");
  // the case column names the parameters that differ between cases; the common ones are said once
  const keys = [...new Set(c.cases.flatMap((k) => Object.keys(k.case)))].filter((n) => n !== "seed");
  const varying = keys.filter((n) => new Set(c.cases.map((k) => JSON.stringify(k.case[n]))).size > 1);
  const shownKeys = varying.length ? varying : keys;
  const common = keys.filter((n) => !shownKeys.includes(n)).map((n) => `${n}=${(c.cases[0] || { case: {} }).case[n]}`).join(" ");
  let marked = 0;
  const tb = el("tbody");
  for (const k of c.cases) {
    const key = (byHost ? k.host : "*") + "\u0000" + k.case_key;
    const flags = [mb.get(key), mh.get(key), ...(k.warnings || []), (k.wide || []).length ? `noisy ${k.wide.join(" and ")}: p10–p90 spread over 20% of the median` : null].filter(Boolean);
    if (mb.has(key) || mh.has(key)) marked++;
    tb.append(el("tr", { class: mb.has(key) || mh.has(key) ? "flagged" : k.noisy ? "noisy" : null }, el("td", {}, k.host || "*"),
      el("td", { title: caseText(k.case) }, shownKeys.map((n) => `${n}=${k.case[n]}`).join(" ")),
      el("td", { class: "num" }, fmt(k.base)), el("td", { class: "num" }, fmt(k.head)),
      el("td", { class: "num" }, ratioText(k.ratio)),
      el("td", { class: VERDICT_CLASS[k.verdict] || "" }, k.verdict),
      el("td", { class: "stats" }, k.stats ? `q ${fmt(k.stats.q_value, 2)} · 95% CI ${fmt(k.stats.ci_low)}–${fmt(k.stats.ci_high)} · ` +
        `n ${k.stats.n_base}/${k.stats.n_head}` : ""),
      el("td", { class: "marks" }, flags.length ? "⚠ " + flags.join("; ") : "")));
  }
  const name = (r) => `${r.label ? r.label + " " : ""}(${shortId(r.id)})`;
  $("view").replaceChildren(el("section", {}, pick,
    el("h2", { id: "compare-title" }, `Compare ${c.metric}${c.unit ? " (" + c.unit + ")" : ""}: head ${c.head} / base ${c.base}`),
    el("p", { id: "compare-names" }, "base ", link(`/runs/${shortId(base.id)}`, name(base)), " · head ", link(`/runs/${shortId(head.id)}`, name(head)),
      ` · suite ${base.suite} · `, link(`/runs/${shortId(base.id)}?with=${shortId(head.id)}`, "plot both")),
    el("p", { id: "compare-summary" }, `geometric mean head/base ${ratioText(c.geomean)} ` +
      `over ${c.cases.length} cases: ${Object.entries(c.verdicts || {}).filter(([, n]) => n).map(([v, n]) => `${n} ${v}`).join(", ") || "no verdicts"} (paired on ${c.paired_on}); ` +
      `only in base: ${c.only_base}, only in head: ${c.only_head}` + (c.warned ? `; ${c.warned} with failed requests` : "") +
      (marked ? `; ${marked} ran throttled or on a shared GPU` : "")),
    flagsBox(fb, "base: "), flagsBox(fh, "head: "),
    c.noise_floor ? el("p", { id: "noise-floor", class: "muted" }, `noise bands: ${c.noise_floor}`) : null,
    common ? el("p", { id: "common-params", class: "muted" }, `every case: ${common}`) : null,
    el("table", { id: "compare-cases" }, el("thead", {}, el("tr", {}, ["host", "case", "base", "head", "head/base", "verdict", "statistics", "marks"]
      .map((h, i) => el("th", { class: i >= 2 && i <= 4 ? "num" : null }, h)))), tb)));
}

// ---------------------------------------------------------------------------------------------- host page
async function hostPage(name, stale) {
  const [hosts, runs] = await Promise.all([get("/hosts"), get("/runs", { host: name, limit: 50 })]);
  if (stale()) return;
  const h = hosts.find((x) => x.name === name);
  if (!h) throw new Error(`no host ${name} in the store`);
  const facts = h.facts || {};
  const rows = Object.entries(facts).filter(([, v]) => v == null || typeof v !== "object").map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, String(v))));
  const gpus = Array.isArray(facts.gpus) ? facts.gpus : [];
  $("view").replaceChildren(el("section", {},
    el("h2", { id: "title" }, `host ${h.name}`),
    el("p", { class: "muted" }, `group ${h.group || "-"} · address ${h.address || "-"} · first seen ${h.first_seen.slice(0, 19)} · last seen ${h.last_seen.slice(0, 19)}`),
    el("table", { class: "facts" }, el("tbody", {}, rows)),
    gpus.length ? el("p", {}, `${gpus.length} GPU(s): ${[...new Set(gpus.map((g) => g.name))].join(", ")}`) : null,
    el("h2", {}, `Runs on ${h.name} (${runs.total})`),
    el("table", { class: "runs" }, el("tbody", { id: "host-runs" }, runs.items.map((r) => el("tr", {},
      el("td", {}, link(`/runs/${shortId(r.id)}`, shortId(r.id))), el("td", {}, r.started_at.slice(0, 16).replace("T", " ")),
      el("td", {}, r.suite), el("td", {}, r.label || "-"), el("td", {}, r.status)))))));
}

// ---------------------------------------------------------------------------------------------- series page
async function seriesPage(q, stale) {
  const suite = q.get("suite") || "", metric = q.get("metric") || "time_ms", x = q.get("x") || "M";
  const groupBy = q.get("group_by") || "host";
  const form = el("form", { id: "series-form", class: "filters" },
    el("label", {}, "suite ", el("input", { name: "suite", value: suite, size: 14 })),
    el("label", {}, "metric ", el("input", { name: "metric", value: metric, size: 12 })),
    el("label", {}, "x ", el("input", { name: "x", value: x, size: 10 })),
    el("label", {}, "one line per ", el("select", { name: "group_by" }, ["host", "run"].map((g) => el("option", { value: g, selected: g === groupBy }, g)))),
    el("button", { type: "submit" }, "Plot"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const d = new FormData(form);
    setQuery({ suite: d.get("suite").trim(), metric: d.get("metric").trim(), x: d.get("x").trim(), group_by: d.get("group_by") }); route();
  });
  if (!suite) { $("view").replaceChildren(el("section", {}, el("h2", {}, "Series"), form, el("p", { class: "muted" }, "name a suite, a metric and a case parameter"))); return; }
  const s = await get("/series", { suite, metric, x, group_by: groupBy });
  if (stale()) return;
  const view = {
    metric, unit: s.unit, title: `${metric} vs ${x} (${suite}, ${groupBy === "host" ? "each host's latest run" : "the latest runs"})`, x,
    x_axis: axisFor(x, s.lines.flatMap((l) => l.points.map((p) => p.x))), y_title: s.unit ? `${metric} (${s.unit})` : metric, refs: [],
    traces: s.lines.map((l) => ({ name: `${l.host} · ${l.label || shortId(l.run_id)}`, points: l.points.map((p) => ({ ...p, case: {}, flags: [] })) })),
  };
  const plots = el("div", { id: "plots", class: "plots" });
  $("view").replaceChildren(el("section", {}, el("h2", {}, "Series"), form,
    s.lines.length ? plots : el("p", { class: "muted", id: "note" }, "no stored results of that suite carry that metric and parameter")));
  if (s.lines.length) await drawAll(plots, [view]);
}

function axisFor(x, xs) {  // the series API gives raw points: the same log2 rule as analysis/views.py
  const d = [...new Set(xs)].sort((a, b) => a - b);
  const isBytes = x.endsWith("bytes");
  const log = d.length >= 3 && d[0] > 0 && d[d.length - 1] / d[0] >= 16;
  if (!log) return { title: x, log: false, tickvals: [], ticktext: [] };
  const step = Math.max(1, Math.ceil(d.length / 10));
  const ticks = d.filter((_, i) => i % step === 0);
  if (ticks[ticks.length - 1] !== d[d.length - 1]) ticks.push(d[d.length - 1]);
  const label = (v) => { if (!isBytes) return String(v); const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; while (v >= 1024 && i < 4) { v /= 1024; i++; } return `${+v.toPrecision(3)} ${u[i]}`; };
  return { title: x + " (log2)", log: true, tickvals: ticks, ticktext: ticks.map(label) };
}

document.addEventListener("click", (e) => {
  const a = e.target.closest && e.target.closest("a[data-nav]");
  if (!a || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
  e.preventDefault();
  go(a.getAttribute("href"));
});
window.addEventListener("popstate", route);
route();
