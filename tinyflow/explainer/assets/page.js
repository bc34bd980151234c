/* tinyflow explain: the page's script. Plain JavaScript and SVG, no library and nothing fetched:
   it reads the step's record from the #data script tag (written by tinyflow/explainer/page.py)
   and draws the graph, the details of what is clicked, the timeline, the live memory and the walk. */
(function () {
  "use strict";

  const D = JSON.parse(document.getElementById("data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const nodes = D.nodes, kernels = D.kernels, spans = D.spans, modules = D.modules;
  const sources = D.sources, walk = D.walk;

  // ------------------------------------------------------------------ small helpers
  function el(tag, attrs, parent, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function sv(tag, attrs, parent, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function ms(seconds) {
    const v = seconds * 1e3;
    return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + " ms";
  }
  function bytes(n) {
    if (n >= 1048576) return (n / 1048576).toFixed(1) + " MiB";
    if (n >= 1024) return (n / 1024).toFixed(1) + " KiB";
    return n + " B";
  }
  function shape(t) { return "(" + t.shape.join(", ") + ") " + t.dtype; }
  function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  function title(node, text) { sv("title", {}, node, text); }
  function sumLaunches(list) { return list.reduce((a, x) => a + x[1], 0); }

  // ------------------------------------------------------------------ header
  const meta = D.meta;
  document.getElementById("title").textContent = meta.title || "one training step";
  const fwdCount = nodes.filter(n => n.kind === "forward").length;
  const peak = D.memory.peak;
  let summary = fwdCount + " Function forwards, " + (nodes.length - fwdCount) + " backwards, " +
    kernels.length + " kernel calls, " + ms(D.wall[1] - D.wall[0]);
  if (peak) summary += "; peak memory " + bytes(peak.bytes) + " (" + peak.label + ")";
  const facts = [];
  for (const k of ["model", "device", "batch_size", "amp", "nproc"]) {
    if (meta[k] !== undefined && meta[k] !== null && !(k === "nproc" && meta[k] === 1)) facts.push(k.replace("_", " ") + " " + meta[k]);
  }
  document.getElementById("summary").textContent = (facts.length ? facts.join(" \u00b7 ") + " \u2014 " : "") + summary;
  if (D.error) {
    const box = document.getElementById("error");
    box.hidden = false;
    let where = "";
    if (D.error.node !== null && D.error.node !== undefined) {
      const n = nodes[D.error.node];
      where = " in " + n.cls + "." + n.kind + (n.module ? " (" + n.module + ")" : "");
    }
    box.textContent = "The step raised" + where + ": " + D.error.message +
      ". The page shows the step up to there; the failing node is marked in red.";
  }

  // ------------------------------------------------------------------ graph layout
  const NODE_W = 190, NODE_H = 34, GAP_Y = 16, LABEL_H = 16, INDENT = 10, LABEL_W = 120;
  const fwd = nodes.filter(n => n.kind === "forward").sort((a, b) => a.seq - b.seq);
  const rowOf = new Map();
  fwd.forEach((n, i) => rowOf.set(n.id, i));
  let rows = fwd.length;
  for (const n of nodes) {
    if (n.kind !== "backward") continue;
    if (n.pair !== null && rowOf.has(n.pair)) rowOf.set(n.id, rowOf.get(n.pair));
    else rowOf.set(n.id, rows++);
  }
  const rowNodes = [];
  for (let r = 0; r < rows; r++) rowNodes.push([]);
  for (const n of nodes) rowNodes[rowOf.get(n.id)].push(n);
  function rowTime(r) {  // a row's forward node (or its lone backward node)
    const list = rowNodes[r];
    return list.find(n => n.kind === "forward") || list[0];
  }

  // module bands: the rows of the forward nodes that ran inside each module call
  const bands = [];
  for (const m of modules) {
    let r0 = Infinity, r1 = -Infinity;
    for (let r = 0; r < fwd.length; r++) {
      const n = fwd[r];
      if (n.start >= m.start && n.end <= m.end + 1e-9 && n.seq > m.seq) {
        r0 = Math.min(r0, r);
        r1 = Math.max(r1, r);
      }
    }
    if (r0 <= r1) bands.push({ m: m, r0: r0, r1: r1, depth: m.depth, children: 0 });
  }
  for (const b of bands) {
    b.children = bands.filter(o => o !== b && o.depth > b.depth && o.r0 >= b.r0 && o.r1 <= b.r1).length;
    b.inline = b.r0 === b.r1 && b.children === 0;
  }
  const maxDepth = bands.reduce((a, b) => Math.max(a, b.depth), 0);
  function bandLabel(b) { return b.m.path === b.m.type ? b.m.type : b.m.path + " \u00b7 " + b.m.type; }
  const inlineNeeds = bands.filter(b => b.inline).map(b => 8 + b.depth * INDENT + 14 + 6.2 * clip(bandLabel(b), 34).length);
  const FX = Math.min(320, Math.max(8 + (maxDepth + 1) * INDENT + LABEL_W, ...inlineNeeds));
  const LANES = 54;
  const BX = FX + NODE_W + 84 + LANES;
  const WIDTH = BX + NODE_W + LANES + 8 + (maxDepth + 1) * INDENT;

  const rowY = [];
  let y = 30;
  for (let r = 0; r < rows; r++) {
    const opening = bands.filter(b => b.r0 === r && !b.inline).sort((a, b) => a.depth - b.depth);
    for (const b of opening) { b.top = y; y += LABEL_H; }
    for (const b of bands.filter(b => b.r0 === r && b.inline)) b.top = y - 4;
    rowY.push(y);
    y += NODE_H;
    const closing = bands.filter(b => b.r1 === r).sort((a, b) => b.depth - a.depth);
    for (const b of closing) { y += b.inline ? 4 : 5; b.bottom = y; }
    y += GAP_Y;
  }
  const optimizerSpans = spans.filter(s => s.phase === "optimizer").sort((a, b) => a.seq - b.seq);
  const spanY = [];
  y += 6;
  for (let i = 0; i < optimizerSpans.length; i++) { spanY.push(y); y += NODE_H + 8; }
  const HEIGHT = y + 10;

  const graph = document.getElementById("graph");
  const g = sv("svg", { width: WIDTH, height: HEIGHT, viewBox: "0 0 " + WIDTH + " " + HEIGHT, id: "graph-svg" }, graph);
  const defs = sv("defs", {}, g);
  for (const [id, color] of [["arrow", "#8a94a6"], ["arrow-grad", "#b48ac7"]]) {
    const mk = sv("marker", { id: id, viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    sv("path", { d: "M0,0 L8,4 L0,8 z", fill: color }, mk);
  }
  sv("text", { x: FX, y: 16, class: "colhead" }, g, "forward \u2193 (execution order)");
  sv("text", { x: BX, y: 16, class: "colhead" }, g, "backward \u2191 (runs bottom to top)");

  const layerBands = sv("g", { id: "bands" }, g);
  for (const b of bands.slice().sort((a, c) => a.depth - c.depth)) {
    const x0 = 8 + b.depth * INDENT;
    const x1 = WIDTH - 8 - b.depth * INDENT;
    const gb = sv("g", { class: "band depth-" + b.depth, "data-module": b.m.path }, layerBands);
    sv("rect", { x: x0, y: b.top, width: x1 - x0, height: b.bottom - b.top, rx: 6, ry: 6 }, gb);
    const label = bandLabel(b);
    const ty = b.inline ? rowY[b.r0] + NODE_H / 2 + 4 : b.top + 12;
    sv("text", { x: x0 + 6, y: ty }, gb, clip(label, 34));
    title(gb, label + ": " + ms(b.m.end - b.m.start));
  }

  const layerKeep = sv("g", { id: "keeps" }, g);
  const layerEdges = sv("g", { id: "edges" }, g);
  const layerNodes = sv("g", { id: "nodes" }, g);
  const nodeBox = new Map();  // node id -> {x, y}
  for (const n of nodes) {
    const r = rowOf.get(n.id);
    nodeBox.set(n.id, { x: n.kind === "forward" ? FX : BX, y: rowY[r] });
  }

  // the arrays a forward kept for its backward: a dashed line across, with their size
  for (const n of fwd) {
    if (n.pair === null) continue;
    const a = nodeBox.get(n.id), b = nodeBox.get(n.pair);
    const yy = a.y + NODE_H / 2;
    sv("path", { d: "M" + (a.x + NODE_W) + "," + yy + " L" + b.x + "," + yy, class: "keep" }, layerKeep);
    if (n.saved_bytes > 0) {
      const t = sv("text", { x: FX + NODE_W + LANES + 4, y: yy - 3, class: "keep-label" }, layerKeep,
        "keeps " + bytes(n.saved_bytes));
      title(t, "what " + n.cls + ".forward kept for its backward, freed " +
        (n.freed ? "at " + ms(n.freed.t) + " (" + n.freed.how + ")" : "after the step"));
    }
  }

  // edges: forward data (left column, downward) and, mirrored, gradients (right column, upward)
  let laneF = 0, laneB = 0;
  function edge(from, to, label, grad) {
    const a = nodeBox.get(from), b = nodeBox.get(to);
    const cls = grad ? "edge grad" : "edge";
    const consecutive = Math.abs(rowOf.get(from) - rowOf.get(to)) === 1;
    let d, lx, ly;
    if (consecutive) {
      const x = a.x + NODE_W / 2;
      if (!grad) { d = "M" + x + "," + (a.y + NODE_H) + " L" + x + "," + (b.y - 1); ly = (a.y + NODE_H + b.y) / 2 + 3; lx = x + 6; }
      else { d = "M" + x + "," + a.y + " L" + x + "," + (b.y + NODE_H + 1); ly = (b.y + NODE_H + a.y) / 2 + 3; lx = x - 6; }
    } else {
      const lane = grad ? (laneB++ % 6) : (laneF++ % 6);
      const xr = a.x + NODE_W + 10 + lane * 9;
      const y0 = a.y + NODE_H / 2, y1 = b.y + NODE_H / 2;
      d = "M" + (a.x + NODE_W) + "," + y0 + " C" + xr + "," + y0 + " " + xr + "," + y1 + " " + (b.x + NODE_W + 1) + "," + y1;
      lx = xr + 3; ly = (y0 + y1) / 2;
    }
    const p = sv("path", { d: d, class: cls, "data-from": from, "data-to": to }, layerEdges);
    title(p, (grad ? "gradient " : "") + label);
    sv("text", { x: lx, y: ly, class: "edge-label", "text-anchor": consecutive && grad ? "end" : "start" }, layerEdges, label);
  }
  for (const n of fwd) {
    n.inputs.forEach(function (t) {
      if (!t.from || t.from.node === undefined || !rowOf.has(t.from.node)) return;
      const p = nodes[t.from.node];
      if (p.kind !== "forward") return;
      edge(p.id, n.id, shape(t), false);
      if (n.pair !== null && p.pair !== null) edge(n.pair, p.pair, shape(t), true);
    });
  }

  // the nodes
  const nodeEls = new Map();
  for (const n of nodes) {
    const box = nodeBox.get(n.id);
    const classes = ["node", n.kind, n.phase];
    if (n.error) classes.push("failed");
    const gn = sv("g", { class: classes.join(" "), "data-id": n.id, "data-kind": n.kind, "data-cls": n.cls,
      transform: "translate(" + box.x + "," + box.y + ")" }, layerNodes);
    sv("rect", { width: NODE_W, height: NODE_H }, gn);
    sv("text", { x: 8, y: 14, class: "cls" }, gn, clip(n.cls + (n.kind === "backward" ? ".backward" : ""), 30) + (n.error ? " \u2717" : ""));
    const names = n.kernels.map(k => kernels[k].name);
    const uniq = Array.from(new Set(names));
    let sub = ms(n.end - n.start);
    if (n.kind === "forward" && n.outputs.length) sub += " \u00b7 " + shape(n.outputs[0]);
    else if (uniq.length) sub += " \u00b7 " + uniq.join(", ");
    sv("text", { x: 8, y: 28, class: "sub" }, gn, clip(sub, 40));
    title(gn, n.cls + "." + n.kind + (n.module ? " in " + n.module : "") + ", " + ms(n.end - n.start) +
      (uniq.length ? "; kernels: " + uniq.join(", ") : ""));
    gn.addEventListener("click", function () { select({ node: n.id }); showNode(n.id); });
    nodeEls.set(n.id, gn);
  }
  const spanEls = new Map();
  optimizerSpans.forEach(function (s, i) {
    const gs = sv("g", { class: "span-box", "data-span": s.id, transform: "translate(" + FX + "," + spanY[i] + ")" }, layerNodes);
    sv("rect", { width: BX + NODE_W - FX, height: NODE_H }, gs);
    const ks = kernels.filter(k => k.span === s.id && k.node === null);
    const names = Array.from(new Set(ks.map(k => k.name)));
    sv("text", { x: 8, y: 14, "font-weight": 600 }, gs, s.name + "  (optimizer, outside the graph)");
    sv("text", { x: 8, y: 28, class: "sub" }, gs, ms(s.end - s.start) + " \u00b7 " + ks.length + " kernel calls" +
      (names.length ? " (" + names.join(", ") + ")" : ""));
    gs.addEventListener("click", function () { select({ span: s.id }); showSpan(s.id); });
    spanEls.set(s.id, gs);
  });

  // ------------------------------------------------------------------ details
  const details = document.getElementById("detail-body");
  function clear() { details.innerHTML = ""; details.removeAttribute("data-path"); details.removeAttribute("data-line"); }

  function code(key, hl, parent) {
    const src = sources[key];
    if (!src) { el("div", { class: "hint" }, parent, "(no source: built in, or not on disk)"); return; }
    const where = el("div", { class: "where" }, parent);
    where.textContent = src.path + ":" + (hl || src.line) + "  (" + src.name + ")";
    details.setAttribute("data-path", src.path);
    details.setAttribute("data-line", String(hl || src.line));
    const pre = el("pre", { class: "code", "data-path": src.path, "data-first": src.first }, parent);
    const lines = src.text.replace(/\n$/, "").split("\n");
    let target = null;
    lines.forEach(function (line, i) {
      const no = src.first + i;
      const l = el("span", { class: "l" + (no === (hl || src.line) ? " hl" : ""), "data-line": no }, pre);
      el("span", { class: "n" }, l, String(no));
      l.appendChild(document.createTextNode(line));
      if (no === (hl || src.line)) target = l;
    });
    if (target) setTimeout(function () { pre.scrollTop = Math.max(0, target.offsetTop - pre.clientHeight / 3); }, 0);
  }

  function link(parent, text, onclick) {
    const a = el("a", { class: "jump" }, parent, text);
    a.addEventListener("click", onclick);
    return a;
  }

  function tensorTable(parent, list, withFrom) {
    if (!list.length) { el("div", { class: "hint" }, parent, "none"); return; }
    const t = el("table", { class: "kv" }, parent);
    const head = el("tr", {}, t);
    el("th", {}, head, "shape");
    el("th", {}, head, "dtype");
    el("th", {}, head, "bytes");
    if (withFrom) el("th", {}, head, "from");
    list.forEach(function (x) {
      const tr = el("tr", {}, t);
      if (x.dtype === "none") { el("td", { colspan: 3, class: "hint" }, tr, "None: no gradient for this input"); return; }
      el("td", { class: "mono" }, tr, "(" + x.shape.join(", ") + ")");
      el("td", { class: "mono" }, tr, x.dtype);
      el("td", {}, tr, bytes(x.bytes));
      if (withFrom) {
        const td = el("td", {}, tr);
        if (x.from && x.from.node !== undefined) {
          const p = nodes[x.from.node];
          link(td, p.cls + (p.module ? " (" + p.module + ")" : "") + " #" + p.id, function () { select({ node: p.id }); showNode(p.id); });
        } else if (x.from && x.from.param) td.textContent = "parameter " + x.from.param;
        else td.textContent = "made outside the traced Functions (the batch, a constant)";
      }
    });
  }

  function showNode(id) {
    const n = nodes[id];
    clear();
    el("h2", {}, details, n.cls + "." + n.kind);
    const badges = el("div", {}, details);
    el("span", { class: "badge " + n.phase }, badges, n.phase);
    if (n.module) el("span", { class: "badge" }, badges, "module " + n.module);
    el("span", { class: "badge" }, badges, "node #" + n.id);
    if (n.error) el("span", { class: "badge failed" }, badges, "raised");
    if (n.error) el("div", { class: "error-text" }, details, n.error);
    const kv = el("table", { class: "kv" }, details);
    function row(k, v) { const tr = el("tr", {}, kv); el("th", {}, tr, k); return el("td", {}, tr, v); }
    row("wall time", ms(n.end - n.start) + " (from " + ms(n.start) + " to " + ms(n.end) + ")");
    if (n.kind === "forward") {
      row("graph", n.error ? "it raised before it returned: no outputs" :
        n.recorded ? "recorded: its backward runs in loss.backward()" : "not recorded (no input needs a gradient)");
      if (n.pair !== null) link(row("its backward", ""), nodes[n.pair].cls + ".backward #" + n.pair, function () { select({ node: n.pair }); showNode(n.pair); });
    } else if (n.pair !== null) {
      link(row("its forward", ""), nodes[n.pair].cls + ".forward #" + n.pair, function () { select({ node: n.pair }); showNode(n.pair); });
    }
    if (n.caller) {
      const td = row("called from", "");
      const src = sources[n.caller[0]];
      link(td, (src ? src.path + ":" + n.caller[1] + " (" + src.name + ")" : n.caller[0]), function () {
        clear();
        el("h2", {}, details, (src ? src.name : "") + " calls " + n.cls + ".apply");
        link(el("div", {}, details), "\u2190 back to " + n.cls + ".forward", function () { showNode(n.id); });
        code(n.caller[0], n.caller[1], details);
      });
    }
    el("h3", {}, details, n.kind === "forward" ? "source of the forward" : "source of the backward");
    code(n.src, null, details);
    el("h3", {}, details, n.kind === "forward" ? "inputs" : "gradients in (of its outputs)");
    tensorTable(details, n.inputs, n.kind === "forward");
    el("h3", {}, details, n.kind === "forward" ? "outputs" : "gradients out (of its inputs)");
    tensorTable(details, n.outputs, false);
    const fnode = n.kind === "forward" ? n : (n.pair !== null ? nodes[n.pair] : null);
    if (fnode) {
      el("h3", {}, details, "kept for backward");
      if (!fnode.saved.length) el("div", { class: "hint" }, details, "nothing");
      else {
        const t = el("table", { class: "kv" }, details);
        const head = el("tr", {}, t);
        for (const h of ["what", "shape", "dtype", "bytes", "is"]) el("th", {}, head, h);
        for (const s of fnode.saved) {
          const tr = el("tr", {}, t);
          el("td", { class: "mono" }, tr, s.name);
          el("td", { class: "mono" }, tr, "(" + s.shape.join(", ") + ")");
          el("td", { class: "mono" }, tr, s.dtype);
          el("td", {}, tr, bytes(s.bytes));
          el("td", {}, tr, s.role);
        }
        el("div", {}, details, bytes(fnode.saved_bytes) + " kept alive for backward (parameters not counted); " +
          (fnode.freed ? "let go at " + ms(fnode.freed.t) + ": " + fnode.freed.how : "still held when the step ended"));
      }
    }
    el("h3", {}, details, "kernels it called");
    if (!n.kernels.length) el("div", { class: "hint" }, details, "none by name (its work is NumPy / CuPy calls in the source above)");
    else {
      const t = el("table", { class: "kv" }, details);
      for (const kid of n.kernels) {
        const k = kernels[kid];
        const tr = el("tr", {}, t);
        link(el("td", { class: "mono" }, tr), k.name, function () { showKernel(k.id); });
        el("td", {}, tr, ms(k.end - k.start));
        el("td", { class: "mono" }, tr, k.launches.map(x => x[0] + " x" + x[1]).join(", "));
      }
    }
    if (!n.launches.length && String(meta.device || "").startsWith("cuda") && !meta.launch_tally) {
      el("div", { class: "hint" }, details, "GPU launches per node are counted where the array library records its " +
        "calls (the strict CuPy stand-in of the tests); on a GPU, CUPTI counts them (bench/gpu/kernel_profile.py).");
    }
    if (n.launches.length) {
      el("h3", {}, details, "GPU launches (as the launch tally counts them)");
      const t = el("table", { class: "kv" }, details);
      for (const [name, count] of n.launches) {
        const tr = el("tr", {}, t);
        el("td", { class: "mono" }, tr, name);
        el("td", {}, tr, String(count));
      }
      el("div", { class: "hint" }, details, sumLaunches(n.launches) + " kernels, " + n.memops + " memory operations");
    }
  }

  function showKernel(id) {
    const k = kernels[id];
    clear();
    el("h2", {}, details, "kernel " + k.name);
    const kv = el("table", { class: "kv" }, details);
    const tr = el("tr", {}, kv);
    el("th", {}, tr, "wall time");
    el("td", {}, tr, ms(k.end - k.start));
    const tr2 = el("tr", {}, kv);
    el("th", {}, tr2, "called by");
    const td = el("td", {}, tr2);
    if (k.node !== null) link(td, nodes[k.node].cls + "." + nodes[k.node].kind + " #" + k.node, function () { select({ node: k.node }); showNode(k.node); });
    else if (k.span !== null) link(td, spans[k.span].name, function () { showSpan(k.span); });
    if (k.launches.length) {
      const tr3 = el("tr", {}, kv);
      el("th", {}, tr3, "launches");
      el("td", { class: "mono" }, tr3, k.launches.map(x => x[0] + " x" + x[1]).join(", "));
    }
    if (k.error) el("div", { class: "error-text" }, details, k.error);
    el("h3", {}, details, "source");
    code(k.src, null, details);
  }

  function showSpan(id) {
    const s = spans[id];
    clear();
    el("h2", {}, details, s.name);
    el("span", { class: "badge " + s.phase }, details, s.phase);
    el("div", {}, details, ms(s.end - s.start) + " (from " + ms(s.start) + " to " + ms(s.end) + ")");
    const ks = kernels.filter(k => k.span === s.id && k.node === null);
    if (ks.length) {
      el("h3", {}, details, "kernels it called (outside any Function)");
      const counts = {};
      for (const k of ks) { counts[k.name] = counts[k.name] || [0, 0]; counts[k.name][0]++; counts[k.name][1] += k.end - k.start; }
      const t = el("table", { class: "kv" }, details);
      for (const name in counts) {
        const tr = el("tr", {}, t);
        el("td", { class: "mono" }, tr, name);
        el("td", {}, tr, counts[name][0] + " calls, " + ms(counts[name][1]));
      }
    }
    if (s.launches.length) {
      el("h3", {}, details, "GPU launches outside any Function");
      el("div", { class: "mono" }, details, s.launches.map(x => x[0] + " x" + x[1]).join(", "));
    }
    if (s.src) { el("h3", {}, details, "source"); code(s.src, null, details); }
  }

  function showComm(c) {
    clear();
    el("h2", {}, details, c.name);
    const backward = spans.find(s => s.phase === "backward");
    const kv = el("table", { class: "kv" }, details);
    function row(k, v) { const tr = el("tr", {}, kv); el("th", {}, tr, k); el("td", {}, tr, v); }
    row("time", ms(c.end - c.start) + " (from " + ms(c.start) + " to " + ms(c.end) + ") on " + (c.thread || "another thread"));
    if (c.bytes) row("bytes", bytes(c.bytes));
    if (c.algorithm) row("algorithm", c.algorithm);
    if (backward) row("beside backward", c.start < backward.end ? "starts " + ms(backward.end - c.start) +
      " before backward ends: this all-reduce overlaps the gradients still being computed" : "after backward");
    const m = /bucket (\d+)/.exec(c.name);
    const bucket = m ? D.buckets.find(b => b.index === Number(m[1])) : null;
    if (bucket) {
      el("h3", {}, details, "its parameters' gradients (" + bucket.params.length + ")");
      el("div", { class: "mono" }, details, bucket.params.join(", "));
    }
    el("p", { class: "hint" }, details, "DataParallel copies each gradient into its bucket as backward delivers it; " +
      "a full bucket is all-reduced on the communication thread while backward goes on.");
  }

  function showStop(i) {
    const st = walk[i];
    clear();
    el("div", { class: "hint" }, details, "walk: stop " + (i + 1) + " of " + walk.length);
    el("h2", {}, details, st.title);
    el("div", { class: "walk-text" }, details, st.text);
    if (st.node !== null && st.node !== undefined) {
      link(el("div", {}, details), "details of " + nodes[st.node].cls + "." + nodes[st.node].kind + " #" + st.node,
        function () { showNode(st.node); });
    }
    code(st.src, st.line, details);
  }

  // ------------------------------------------------------------------ selection
  let selected = null;
  function select(what) {
    document.querySelectorAll(".selected").forEach(e => e.classList.remove("selected"));
    selected = what;
    if (what.node !== undefined && what.node !== null) {
      const e = nodeEls.get(what.node);
      if (e) { e.classList.add("selected"); scrollIntoGraph(e); }
      document.querySelectorAll('.tl-bar[data-node="' + what.node + '"]').forEach(b => b.classList.add("selected"));
      const n = nodes[what.node];
      cursor(n.start);
    } else if (what.span !== undefined && what.span !== null) {
      const e = spanEls.get(what.span);
      if (e) { e.classList.add("selected"); scrollIntoGraph(e); }
      document.querySelectorAll('.tl-bar[data-span="' + what.span + '"]').forEach(b => b.classList.add("selected"));
      cursor(spans[what.span].start);
    }
  }
  function scrollIntoGraph(e) {
    const pane = document.getElementById("graph-pane");
    const box = e.getBBox ? e.getBBox() : null;
    const m = e.transform && e.transform.baseVal.length ? e.transform.baseVal.getItem(0).matrix : null;
    if (!m || !box) return;
    const top = m.f, left = m.e;
    if (top < pane.scrollTop || top + NODE_H > pane.scrollTop + pane.clientHeight) pane.scrollTop = top - pane.clientHeight / 3;
    if (left < pane.scrollLeft || left + NODE_W > pane.scrollLeft + pane.clientWidth) pane.scrollLeft = left - 40;
  }

  // ------------------------------------------------------------------ timeline
  const T1 = Math.max(D.wall[1], ...nodes.map(n => n.end), ...spans.map(s => s.end), 1e-6);
  const tlHost = document.getElementById("timeline");
  const TW = Math.max(900, (tlHost.clientWidth || document.body.clientWidth || 1200) - 24);
  const LEFT = 150;
  function tx(t) { return LEFT + (t / T1) * (TW - LEFT - 12); }
  const trows = [["phases", "phase"], ["Functions", "node"], ["kernels", "kernel"]];
  if (D.comm.length) trows.push(["all-reduce (rank 0)", "comm"]);
  const RH = 22;
  const TH = 26 + trows.length * (RH + 6) + 20;
  const tl = sv("svg", { width: TW, height: TH, id: "timeline-svg" }, tlHost);
  const cursors = [];
  trows.forEach(function (r, i) {
    sv("text", { x: 6, y: 24 + i * (RH + 6) + 15, class: "tl-row-label" }, tl, r[0]);
  });
  function bar(rowIndex, t0, t1, cls, label, attrs, half, shorter) {
    const x = tx(t0), w = Math.max(1, tx(t1) - tx(t0));
    const yy = 24 + rowIndex * (RH + 6) + (half ? RH / 2 : 0);
    const h = half ? RH / 2 : RH;
    const r = sv("rect", Object.assign({ x: x, y: yy, width: w, height: h, class: "tl-bar " + cls }, attrs || {}), tl);
    title(r, label + ": " + ms(t1 - t0) + " (" + ms(t0) + " to " + ms(t1) + ")");
    const fits = [label].concat(shorter || []).find(t => w > 6.5 * t.length + 8);
    if (fits && !half) sv("text", { x: x + 4, y: yy + 15, class: "tl-text" }, tl, fits);
    return r;
  }
  for (const s of spans) {
    const b = bar(0, s.start, s.end, s.phase, s.name, { "data-span": s.id });
    b.addEventListener("click", function () { select({ span: s.id }); showSpan(s.id); });
  }
  for (const n of nodes) {
    const b = bar(1, n.start, n.end, n.error ? "failed" : n.kind === "backward" ? "backward" : n.phase,
      n.cls + "." + n.kind, { "data-node": n.id }, n.parent !== null);
    b.addEventListener("click", function () { select({ node: n.id }); showNode(n.id); });
  }
  for (const k of kernels) {
    const b = bar(2, k.start, k.end, "kernel", k.name, { "data-kernel": k.id, "data-node": k.node === null ? "" : k.node });
    b.addEventListener("click", function () { showKernel(k.id); });
  }
  if (D.comm.length) {
    for (const c of D.comm) {
      const label = c.name + (c.bytes ? " \u00b7 " + bytes(c.bytes) : "") + (c.algorithm ? " \u00b7 " + c.algorithm : "");
      const short = c.name.replace("allreduce ", "");
      const b = bar(3, Math.max(0, c.start), c.end, c.name.indexOf("wait") >= 0 ? "wait" : "comm", label, { "data-comm": c.name },
        false, [short + (c.bytes ? " \u00b7 " + bytes(c.bytes) : ""), short, short.replace("bucket ", "")]);
      b.addEventListener("click", function () { showComm(c); });
    }
  }
  const axisY = 24 + trows.length * (RH + 6) + 2;
  sv("line", { x1: LEFT, y1: axisY, x2: TW - 12, y2: axisY, class: "tl-axis" }, tl);
  const step = niceStep(T1 * 1e3 / 10);
  for (let v = 0; v <= T1 * 1e3 + 1e-9; v += step) {
    const x = tx(v / 1e3);
    sv("line", { x1: x, y1: axisY, x2: x, y2: axisY + 4, class: "tl-axis" }, tl);
    sv("text", { x: x - 6, y: axisY + 15, class: "tl-tick" }, tl, String(Math.round(v * 100) / 100));
  }
  cursors.push(sv("line", { x1: -10, x2: -10, y1: 20, y2: axisY, class: "mem-cursor" }, tl));
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-6))));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
    return 10 * p;
  }

  // ------------------------------------------------------------------ memory
  const samples = D.memory.samples;
  const memHost = document.getElementById("memory");
  if (!samples.length) {
    el("div", { class: "hint" }, memHost, "no memory samples (traced without them: --no-memory, or explain(memory=False))");
  } else {
    document.getElementById("memory-title").textContent = "Live memory (" + D.memory.source + ")";
    const MH = 150, top = 18, bottom = MH - 22;
    const mm = sv("svg", { width: TW, height: MH, id: "memory-svg" }, memHost);
    const maxB = Math.max(...samples.map(s => s[1]), 1);
    const lo = 0;
    function my(b) { return bottom - (b - lo) / (maxB - lo || 1) * (bottom - top); }
    let d = "M" + tx(samples[0][0]) + "," + bottom;
    for (const s of samples) d += " L" + tx(s[0]) + "," + my(s[1]);
    d += " L" + tx(samples[samples.length - 1][0]) + "," + bottom + " Z";
    sv("path", { d: d, class: "mem-area" }, mm);
    sv("text", { x: 6, y: top + 4, class: "tl-row-label" }, mm, bytes(maxB));
    sv("text", { x: 6, y: bottom, class: "tl-row-label" }, mm, bytes(lo));
    sv("line", { x1: LEFT, y1: bottom, x2: TW - 12, y2: bottom, class: "tl-axis" }, mm);
    if (peak) {
      const px = tx(peak.time), py = my(peak.bytes);
      sv("circle", { cx: px, cy: py, r: 4, class: "mem-peak" }, mm);
      const text = "peak " + bytes(peak.bytes) + ": " + peak.label + " at " + ms(peak.time);
      const anchorEnd = px > TW * 0.6;
      sv("text", { x: anchorEnd ? px - 8 : px + 8, y: Math.min(bottom - 4, py + 16), class: "mem-label", "text-anchor": anchorEnd ? "end" : "start" }, mm, text);
      document.getElementById("memory-title").appendChild(el("span", { id: "memory-peak", class: "peak-note" }, null, " \u2014 " + text));
    }
    cursors.push(sv("line", { x1: -10, x2: -10, y1: top, y2: bottom, class: "mem-cursor" }, mm));
  }
  function cursor(t) {
    const x = tx(t);
    for (const c of cursors) { c.setAttribute("x1", x); c.setAttribute("x2", x); }
  }

  // ------------------------------------------------------------------ the walk
  let at = -1;
  const pos = document.getElementById("walk-pos");
  function go(i) {
    if (!walk.length) { pos.textContent = "walk: nothing to walk"; return; }
    at = Math.max(0, Math.min(walk.length - 1, i));
    const st = walk[at];
    const src = sources[st.src];
    pos.textContent = "stop " + (at + 1) + "/" + walk.length + " \u00b7 " + (src ? src.path : "");
    if (st.node !== null && st.node !== undefined) select({ node: st.node });
    else if (st.span !== undefined && st.span !== null) select({ span: st.span });
    showStop(at);
  }
  document.getElementById("next").addEventListener("click", function () { go(at + 1); });
  document.getElementById("prev").addEventListener("click", function () { go(at - 1); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowRight" || e.key === "n") { go(at + 1); e.preventDefault(); }
    if (e.key === "ArrowLeft" || e.key === "p") { go(at - 1); e.preventDefault(); }
  });

  // the first view: the failing node, else an introduction
  if (D.error && D.error.node !== null && D.error.node !== undefined) {
    select({ node: D.error.node });
    showNode(D.error.node);
  } else {
    clear();
    el("h2", {}, details, "One training step of " + (meta.model || "the program") + ", as it ran");
    el("p", {}, details, "Each box on the left is one call of a Function's forward, in the order the step ran " +
      "them, inside the bands of the modules that called them; on the right, the same Function's backward, " +
      "which loss.backward() ran from the bottom up. Click a box to see its source, time, shapes, what it kept " +
      "for backward and the kernels it called. Press next (or the right arrow) to walk the step file by file.");
    if (D.meta.summary) el("p", { class: "hint" }, details, D.meta.summary);
  }
  window.tinyflowExplain = { data: D, go: go, showNode: showNode, select: select };
})();
