// The sglr dashboard: polls /dashboard/data and draws it with plain canvas and SVG (no library).
// Every text from the server goes in through textContent, never as markup: prompt texts are
// whatever clients sent.
"use strict";

(() => {
  const KEY_NAME = "sglr-dashboard-key";
  const COLORS = ["#4fb3ff", "#ffb347", "#7bd88f", "#ff6b6b", "#c792ea", "#f7df1e"];
  const query = new URLSearchParams(location.search);
  const intervalMs = Math.max(200, Number(query.get("interval_ms")) || 1000);
  let numPolls = 0;

  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("key")) {
    sessionStorage.setItem(KEY_NAME, fragment.get("key"));
    history.replaceState(null, "", location.pathname + location.search);
  }

  const $ = (id) => document.getElementById(id);
  const el = (tag, text, attrs) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  };
  const fmt = (v, digits) => {
    if (v === null || v === undefined) return "–";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return v.toFixed(digits === undefined ? 2 : digits);
  };

  function tiles(container, items) {
    container.replaceChildren(...items.map(([label, value, id]) => {
      const tile = el("div", null, { class: "tile" });
      tile.append(el("div", fmt(value), { class: "v", id }), el("div", label, { class: "k" }));
      return tile;
    }));
  }

  // A line chart of `lines` ([label, values]) over `times` (seconds); nulls are gaps.
  function lineChart(canvas, times, lines, unit) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    canvas.dataset.numPoints = String(times.length);
    const ctx = canvas.getContext("2d");
    ctx.scale(dpr, dpr);
    ctx.clearRect(0, 0, w, h);
    const pad = { l: 52, r: 8, t: 20, b: 18 };
    let max = 0;
    for (const [, values] of lines) for (const v of values) if (v !== null && isFinite(v)) max = Math.max(max, v);
    max = max > 0 ? max * 1.1 : 1;
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#8793a1";
    ctx.strokeStyle = "#26313c";
    for (let i = 0; i <= 4; i++) {
      const y = pad.t + (h - pad.t - pad.b) * (1 - i / 4);
      ctx.beginPath(); ctx.moveTo(pad.l, y); ctx.lineTo(w - pad.r, y); ctx.stroke();
      ctx.fillText(fmt(max * i / 4, max < 10 ? 3 : 0) + (i === 4 ? " " + unit : ""), 2, y + 4);
    }
    if (times.length < 2) {
      ctx.fillText("collecting samples", pad.l + 8, h / 2);
      return;
    }
    const t0 = times[0], t1 = times[times.length - 1];
    ctx.fillText("-" + Math.round(t1 - t0) + " s", pad.l, h - 4);
    ctx.fillText("now", w - pad.r - 22, h - 4);
    const x = (t) => pad.l + (w - pad.l - pad.r) * (t - t0) / Math.max(t1 - t0, 1e-9);
    const y = (v) => pad.t + (h - pad.t - pad.b) * (1 - v / max);
    let legendX = pad.l;
    lines.forEach(([label, values], i) => {
      ctx.strokeStyle = COLORS[i % COLORS.length];
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      let drawing = false;
      values.forEach((v, j) => {
        if (v === null || !isFinite(v)) { drawing = false; return; }
        if (drawing) ctx.lineTo(x(times[j]), y(v)); else ctx.moveTo(x(times[j]), y(v));
        drawing = true;
      });
      ctx.stroke();
      ctx.fillStyle = COLORS[i % COLORS.length];
      ctx.fillRect(legendX, 6, 10, 3);
      ctx.fillStyle = "#d8dee6";
      ctx.fillText(label, legendX + 14, 11);
      legendX += 24 + ctx.measureText(label).width;
    });
    ctx.lineWidth = 1;
  }

  function drawRequests(data) {
    const r = data.requests || {};
    const finished = r.finished || {};
    const t = data.tokens || {};
    tiles($("request-tiles"), [
      ["running", r.running, "stat-running"],
      ["waiting", r.waiting, "stat-waiting"],
      ...Object.keys(finished).sort().map((reason) => ["finished: " + reason, finished[reason], "stat-finished-" + reason]),
      ["prompt tokens", t.prompt, "stat-prompt-tokens"],
      ["generated tokens", t.generation, "stat-generation-tokens"],
      ["cached tokens", t.cached, "stat-cached-tokens"],
    ]);
  }

  function drawKv(data) {
    const kv = data.kv;
    const parts = [["held by requests", kv.held_by_requests, "#ffb347"], ["cached", kv.cached, "#4fb3ff"], ["free", kv.free, "#26313c"]];
    $("kv-bar").replaceChildren(...parts.map(([label, n, color]) => {
      const div = el("div", null, { title: label + ": " + n });
      div.style.width = (100 * n / Math.max(kv.num_slots, 1)) + "%";
      div.style.background = color;
      return div;
    }));
    tiles($("kv-tiles"), [
      ["slots", kv.num_slots, "kv-slots"], ["held by requests", kv.held_by_requests, "kv-held"],
      ["cached", kv.cached, "kv-cached"], ["free", kv.free, "kv-free"],
      ["evicted (total)", kv.evicted, "kv-evicted"], ["hit rate (total)", kv.hit_rate, "kv-hit-rate"],
    ]);
  }

  function drawKvTier(tier) {
    const mib = (n) => n / (1024 * 1024);
    tiles($("kv-tier-tiles"), [
      ["stored pages", tier.stored_pages, "tier-stored-pages"], ["stored MiB", mib(tier.stored_bytes), "tier-stored-mib"],
      ["loaded tokens", tier.loaded_tokens, "tier-loaded-tokens"], ["loaded MiB", mib(tier.loaded_bytes), "tier-loaded-mib"],
      ["written MiB", mib(tier.written_bytes), "tier-written-mib"], ["load time (s)", tier.load_seconds, "tier-load-seconds"],
      ["wait time (s)", tier.wait_seconds, "tier-wait-seconds"], ["corrupt pages", tier.corrupt_pages, "tier-corrupt-pages"],
      ["evicted pages", tier.evicted_pages, "tier-evicted-pages"],
    ]);
  }

  function drawLoraTraffic(rows) {
    $("lora-traffic").tBodies[0].replaceChildren(...rows.map((row) => {
      const tr = el("tr", null, { class: "lora-row" });
      tr.dataset.name = row.name;
      tr.dataset.numRequests = String(row.num_requests);
      tr.append(el("td", row.name), el("td", fmt(row.num_requests)), el("td", fmt(row.num_prompt_tokens)),
        el("td", fmt(row.num_generated_tokens)), el("td", fmt(row.window_requests)), el("td", fmt(row.window_tokens)));
      return tr;
    }));
  }

  function drawWaiting(data) {
    const rows = data.waiting_queue;
    $("waiting-caption").textContent = rows.length ? "the first " + rows.length + " of " + fmt(data.requests.waiting) +
      " waiting, as the next step offers them" : "nothing waiting";
    $("waiting-queue").tBodies[0].replaceChildren(...rows.map((row, i) => {
      const tr = el("tr", null, { class: "waiting-row" });
      tr.dataset.rid = row.rid;
      tr.append(el("td", String(i + 1) + (row.is_urgent ? " !" : ""), row.is_urgent ? { title: "requeued or past the starvation bound" } : {}),
        el("td", row.rid), el("td", fmt(row.priority)), el("td", fmt(row.prompt_len)), el("td", fmt(row.matched_prefix_len)),
        el("td", fmt(row.waiting_s, 1)), el("td", row.adapter));
      return tr;
    }));
  }

  function drawScheduler(data) {
    const rows = Object.entries(data.scheduler || {}).map(([k, v]) => {
      const tr = el("tr");
      tr.append(el("th", k.replaceAll("_", " ")), el("td", Array.isArray(v) ? (v.join(", ") || "none") : fmt(v), { id: "sched-" + k }));
      return tr;
    });
    $("scheduler").tBodies[0].replaceChildren(...rows);
  }

  function drawWorkers(data) {
    const workers = data.workers;
    $("workers-panel").hidden = !workers;
    if (!workers) return;
    $("workers").tBodies[0].replaceChildren(...workers.map((w) => {
      const tr = el("tr", null, { class: "worker" });
      tr.append(el("td", w.url), el("td", w.healthy ? "yes" : "no"), el("td", fmt(w.load)),
        el("td", fmt(w.tree_tokens)), el("td", fmt(w.num_requests)), el("td", fmt(w.request_share)),
        el("td", fmt(w.hit_rate)), el("td", fmt(w.hit_share)));
      return tr;
    }));
  }

  // The tree as an icicle: one column per depth, each node as tall as its share of the cached
  // tokens below its parent; colour by hits.
  function drawTree(tree) {
    const svg = $("tree-view");
    const NS = "http://www.w3.org/2000/svg";
    const nodes = tree.nodes;
    $("tree-caption").textContent = fmt(tree.num_cached_tokens) + " cached tokens in " + fmt(tree.num_nodes) +
      " nodes; showing the " + nodes.length + " holding the most reused KV";
    const w = svg.clientWidth || 800, h = svg.clientHeight || 320;
    const maxDepth = Math.max(1, ...nodes.map((n) => n.depth));
    const colW = w / maxDepth;
    const maxHits = Math.max(1, ...nodes.map((n) => n.num_hits));
    const spans = new Array(nodes.length);
    const nextY = new Map();  // parent position -> next free y
    const total = Math.max(tree.num_cached_tokens, 1);
    const items = [];
    nodes.forEach((n, i) => {
      const parentSpan = n.parent < 0 ? [0, h, total] : spans[n.parent];
      const height = (parentSpan[1] - parentSpan[0]) * n.num_subtree_tokens / Math.max(parentSpan[2], 1);
      const top = nextY.has(n.parent) ? nextY.get(n.parent) : parentSpan[0];
      nextY.set(n.parent, top + height);
      spans[i] = [top, top + height, n.num_subtree_tokens];
      const g = document.createElementNS(NS, "g");
      g.setAttribute("class", "prefix-node");
      g.dataset.hits = String(n.num_hits);
      g.dataset.prefixLen = String(n.prefix_len);
      g.dataset.text = n.text;
      const rect = document.createElementNS(NS, "rect");
      rect.setAttribute("x", String((n.depth - 1) * colW + 1));
      rect.setAttribute("y", String(top + 0.5));
      rect.setAttribute("width", String(Math.max(colW - 2, 1)));
      rect.setAttribute("height", String(Math.max(height - 1, 0.5)));
      const heat = Math.log1p(n.num_hits) / Math.log1p(maxHits);
      rect.setAttribute("fill", "hsl(" + Math.round(210 - 170 * heat) + ", 70%, " + Math.round(28 + 20 * heat) + "%)");
      const title = document.createElementNS(NS, "title");
      title.textContent = n.text + (n.text_truncated ? "…" : "") + "\n" + n.num_tokens + " tokens (prefix " +
        n.prefix_len + ", subtree " + n.num_subtree_tokens + "), " + n.num_hits + " hits, " + n.lock_ref +
        " locks, idle " + n.idle_ticks + " ops" + (n.namespace ? ", namespace " + n.namespace : "");
      g.append(rect, title);
      if (height > 13) {
        const label = document.createElementNS(NS, "text");
        label.setAttribute("x", String((n.depth - 1) * colW + 5));
        label.setAttribute("y", String(top + 13));
        label.setAttribute("fill", "#fff");
        label.setAttribute("font-size", "11");
        const chars = Math.max(4, Math.floor(colW / 6.5));
        label.textContent = n.num_hits + "× " + n.text.replace(/\s+/g, " ").slice(0, chars);
        g.append(label);
      }
      items.push(g);
    });
    svg.replaceChildren(...items);
    drawTopPrefixes(nodes);
  }

  function pathText(nodes, i) {
    const parts = [];
    for (let j = i; j >= 0; j = nodes[j].parent) parts.unshift(nodes[j].text + (nodes[j].text_truncated ? "…" : ""));
    return parts.join("");
  }

  function drawTopPrefixes(nodes) {
    const shared = nodes.map((n, i) => [n, i]).filter(([n]) => n.num_hits >= 2)
      .sort((a, b) => b[0].prefix_len * b[0].num_hits - a[0].prefix_len * a[0].num_hits).slice(0, 8);
    $("top-prefixes").replaceChildren(...shared.map(([n, i]) => {
      const li = el("li", null, { class: "top-prefix" });
      li.append(el("span", n.prefix_len + " tokens, " + n.num_hits + " hits, " + n.lock_ref + " locks, idle " +
        n.idle_ticks + " ops: "), el("code", pathText(nodes, i)));
      return li;
    }));
  }

  function draw(data) {
    $("model").textContent = data.model || "";
    $("role").textContent = data.role || "";
    drawWorkers(data);
    // A router's data has no engine: only the panels it has data for are shown.
    const present = { "requests-panel": data.requests, "throughput-panel": data.series, "latency-panel": data.series,
      "kv-panel": data.kv, "scheduler-panel": data.scheduler, "tree-panel": data.tree, "kv-tier-panel": data.kv_tier,
      "lora-panel": data.lora_traffic && data.lora_traffic.length ? data.lora_traffic : null,
      "waiting-panel": data.waiting_queue };
    for (const [id, value] of Object.entries(present)) $(id).hidden = !value;
    if (data.requests) drawRequests(data);
    if (data.kv) drawKv(data);
    if (data.scheduler) drawScheduler(data);
    if (data.kv_tier) drawKvTier(data.kv_tier);
    if (data.waiting_queue) drawWaiting(data);
    if (data.lora_traffic) drawLoraTraffic(data.lora_traffic);
    if (data.tree) drawTree(data.tree);
    const s = data.series;
    if (s) {
      lineChart($("chart-queue"), s.time, [["running", s.running], ["waiting", s.waiting]], "reqs");
      lineChart($("chart-throughput"), s.time, [["prompt", s.prompt_tokens_per_s], ["generated", s.generation_tokens_per_s]], "tok/s");
      lineChart($("chart-latency"), s.time, [["TTFT p50", s.ttft_p50], ["TTFT p99", s.ttft_p99], ["ITL p50", s.itl_p50],
        ["ITL p99", s.itl_p99], ["E2E p50", s.e2e_p50], ["E2E p99", s.e2e_p99]], "s");
      const hitPct = s.hit_rate.map((v) => (v === null ? null : 100 * v));
      const kvPct = s.kv_used.map((v) => 100 * v / Math.max(data.kv.num_slots, 1));
      const cachedPct = s.kv_cached.map((v) => 100 * v / Math.max(data.kv.num_slots, 1));
      lineChart($("chart-cache"), s.time, [["hit rate %", hitPct], ["KV used %", kvPct], ["KV cached %", cachedPct]], "%");
    }
  }

  async function poll() {
    const headers = {};
    const key = sessionStorage.getItem(KEY_NAME);
    if (key) headers.Authorization = "Bearer " + key;
    try {
      const response = await fetch("/dashboard/data", { headers, cache: "no-store" });
      if (response.status === 401) {
        $("key-form").style.display = "block";
        $("status").textContent = "needs the API key";
        return;  // no more polls until a key is given
      }
      if (!response.ok) throw new Error("HTTP " + response.status);
      const data = await response.json();
      draw(data);
      numPolls += 1;
      document.body.dataset.numPolls = String(numPolls);
      $("status").textContent = "updated " + new Date().toLocaleTimeString() + " (" + data.num_samples + " samples)";
    } catch (error) {
      $("status").textContent = "no data: " + error.message;
    }
    setTimeout(poll, intervalMs);
  }

  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_NAME, $("key-input").value);
    $("key-form").style.display = "none";
    poll();
  });
  poll();
})();
