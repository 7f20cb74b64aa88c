// Score over time, one line per agent, as an SVG that scales to its container.

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
const W = 640, H = 260, PAD = { left: 48, right: 12, top: 12, bottom: 28 };

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// points: [{agent, time: Date, score: number, verification}]
export function seriesFrom(results, scoreField) {
  const series = new Map();
  for (const item of results) {
    // Judged invalid: hidden from the leaderboard, so never plotted either.
    if (item.verification === "invalid") continue;
    const score = Number(item.frontmatter?.[scoreField]);
    const time = new Date(item.timestamp);
    if (!Number.isFinite(score) || Number.isNaN(time.getTime())) continue;
    if (!series.has(item.agent)) series.set(item.agent, []);
    series.get(item.agent).push({ agent: item.agent, time, score, verification: item.verification });
  }
  for (const points of series.values()) points.sort((a, b) => a.time - b.time);
  return series;
}

export function scoreChart(series, unit = "") {
  const all = [...series.values()].flat();
  const figure = document.createElement("figure");
  figure.className = "chart";
  if (all.length === 0) {
    figure.append("No scored results yet.");
    return figure;
  }
  let [t0, t1] = [Math.min(...all.map((p) => p.time)), Math.max(...all.map((p) => p.time))];
  let [s0, s1] = [Math.min(...all.map((p) => p.score)), Math.max(...all.map((p) => p.score))];
  if (t0 === t1) { t0 -= 60_000; t1 += 60_000; }
  if (s0 === s1) { s0 -= 1; s1 += 1; }
  const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * (W - PAD.left - PAD.right);
  const y = (s) => H - PAD.bottom - ((s - s0) / (s1 - s0)) * (H - PAD.top - PAD.bottom);

  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "score over time per agent" });
  root.append(svg("line", { x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom, class: "axis" }));
  root.append(svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom, class: "axis" }));
  for (const s of [s0, (s0 + s1) / 2, s1]) {
    root.append(svg("text", { x: PAD.left - 6, y: y(s) + 4, "text-anchor": "end", class: "tick" }, fmt(s)));
  }
  const short = t1 - t0 < 3_600_000; // under an hour: show seconds
  for (const t of [t0, t1]) {
    const stamp = new Date(t).toISOString();
    root.append(svg("text", { x: x(t), y: H - 8, "text-anchor": t === t0 ? "start" : "end", class: "tick" },
      short ? stamp.slice(11, 19) : stamp.slice(5, 16).replace("T", " ")));
  }
  const legend = document.createElement("ul");
  legend.className = "legend";
  [...series.keys()].sort().forEach((agent, i) => {
    const color = PALETTE[i % PALETTE.length];
    const points = series.get(agent);
    const line = svg("polyline", {
      points: points.map((p) => `${x(p.time).toFixed(1)},${y(p.score).toFixed(1)}`).join(" "),
      fill: "none", stroke: color, "stroke-width": 2, "data-agent": agent,
    });
    root.append(line);
    for (const p of points) {
      const dot = svg("circle", { cx: x(p.time).toFixed(1), cy: y(p.score).toFixed(1), r: 3.5, fill: color });
      dot.append(svg("title", {}, `${agent}: ${fmt(p.score)}${unit ? " " + unit : ""} at ${p.time.toISOString()} (${p.verification})`));
      root.append(dot);
    }
    const key = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = color;
    key.append(swatch, `${agent} (${points.length})`);
    legend.append(key);
  });
  figure.append(root, legend);
  return figure;
}

function fmt(value) {
  return Math.abs(value) >= 1000 ? value.toFixed(0) : Number(value.toPrecision(4)).toString();
}
