// Chapter 3: gradient accumulation, arrow by arrow. Sliders pick how many micro-batches are
// accumulated (N) and how many tokens each holds (fewer tokens: a noisier micro-batch gradient);
// a toggle forgets the divisor. Every gradient was computed at build time by
// gradflow_ref.accumulation on the chapter's token classifier (229 parameters, float64) and is
// drawn projected onto two directions: the full-data gradient's (so it is the arrow (1, 0)) and
// the direction in which micro-batch gradients vary most. The accumulation itself (mean, or sum
// without the divisor) runs here, on GF.logic.accumulation, and is tested against the
// projection of gradflow_ref.accumulation.accumulate_grad_.
// data: {counts: [N], tokens: [b], pool, params, extent: {x: [lo, hi], y: [lo, hi]}, grads: [[[x, y] per micro-batch] per b],
//        acc / big: [[[x, y] per N] per b] (accumulate_grad_ / big_batch_grad_, projected),
//        exact / noise: [[relative distance per N] per b] (full 229-D vectors)}
GF.register("accumulation", (live, data) => {
  const { counts, tokens, pool, params, extent } = data;
  GF.logic.accumulation = {
    /**
     * What .grad holds after backward() on each micro-batch loss, given each micro-batch's own
     * mean-loss gradient: with the divisor (loss / N) their mean, without it their sum.
     */
    accumulate: (grads, divide = true) => {
      const n = grads.length;
      return grads[0].map((_, j) => grads.reduce((s, g) => s + (divide ? g[j] / n : g[j]), 0));
    },
    /** Euclidean distance between two vectors. */
    distance: (u, v) => Math.hypot(...u.map((x, j) => x - v[j])),
  };
  const L = GF.logic.accumulation;

  GF.style("accumulation", `
    .gf-acc__plot { width: 100%; height: auto; display: block; margin: 0.3rem auto;
      color: var(--md-default-fg-color); }
    .gf-acc__plot text { fill: currentColor; font-size: 12px; }
    .md-typeset .gf-acc .gf-legend { display: flex; }
  `);
  // equal scales on both axes; the box [x0, x1] x [y0, y1] holds every arrow (from the data)
  const [x0, x1] = extent.x, [y0, y1] = extent.y;
  const M = 14, k = Math.min(320 / (x1 - x0), 330 / (y1 - y0));
  const W = (x1 - x0) * k + 2 * M, H = (y1 - y0) * k + 2 * M;
  const px = (x) => M + (x - x0) * k, py = (y) => M + (y1 - y) * k;
  const svg = GF.s("svg", { viewBox: `0 0 ${W.toFixed(1)} ${H.toFixed(1)}`, class: "gf-acc__plot", role: "img",
    style: `max-width: min(100%, ${Math.round(W * 1.2)}px)` });
  const grid = GF.s("g", {});
  const line = (a, b, c, d, t) => GF.s("line", { x1: a, y1: b, x2: c, y2: d,
    style: t ? "stroke: var(--md-default-fg-color--lightest)" : "stroke: currentColor; stroke-opacity: 0.5" });
  for (let t = Math.ceil(x0 * 2) / 2; t <= x1; t += 0.5) {
    grid.append(line(px(t), py(y0), px(t), py(y1), t));
    if (t) grid.append(GF.s("text", { x: px(t), y: py(0) + 14, "text-anchor": "middle", text: String(t) }));
  }
  for (let t = Math.ceil(y0 * 2) / 2; t <= y1; t += 0.5) {
    grid.append(line(px(x0), py(t), px(x1), py(t), t));
    if (t) grid.append(GF.s("text", { x: px(0) - 5, y: py(t) + 4, "text-anchor": "end", text: String(t) }));
  }
  svg.append(grid);
  const arrows = GF.s("g", {});
  svg.append(arrows);

  // an arrow from the origin to v; one that leaves the plot is cut at its edge, head kept
  const arrow = (v, color, width, attrs = {}) => {
    const lim = (c, lo, hi) => (c > hi ? hi / c : c < lo ? lo / c : 1);
    const s = Math.min(lim(v[0], x0, x1), lim(v[1], y0, y1));
    const [x, y] = [px(v[0] * s), py(v[1] * s)], [ox, oy] = [px(0), py(0)];
    const len = Math.hypot(x - ox, y - oy);
    const g = GF.s("g", { style: `color: ${color}`, ...attrs });
    if (len < 1e-9) return g;
    const ux = (x - ox) / len, uy = (y - oy) / len, head = Math.min(4 + 2.5 * width, len * 0.6);
    const bx = x - ux * head, by = y - uy * head;
    g.append(GF.s("line", { x1: ox, y1: oy, x2: bx, y2: by, stroke: "currentColor", "stroke-width": width,
      "stroke-dasharray": attrs.dash }));
    g.append(GF.s("polygon", { fill: "currentColor",
      points: `${x},${y} ${bx - uy * head * 0.45},${by + ux * head * 0.45} ${bx + uy * head * 0.45},${by - ux * head * 0.45}` }));
    return g;
  };

  const state = { n: 4, b: tokens[1], divide: true };
  const status = GF.status();
  const pair = (v) => `(${v.map((x) => x.toFixed(2)).join(", ")})`;
  const draw = () => {
    const { n, b, divide } = state;
    const bi = tokens.indexOf(b), ni = counts.indexOf(n);
    const micro = data.grads[bi].slice(0, n);
    const acc = L.accumulate(micro, divide);
    const big = data.big[bi][ni];
    arrows.replaceChildren(
      ...micro.map((g) => arrow(g, GF.color(0), 1.5, { opacity: 0.75 })),
      arrow([1, 0], "currentColor", 2, { dash: "5 3" }),
      arrow(big, GF.color(2), 7),
      arrow(acc, GF.color(1), 3),
    );
    const gap = L.distance(acc, big) / Math.hypot(...big);
    const exact = data.exact[bi][ni], noise = data.noise[bi][ni];
    const tok = (t) => `${t} token${t > 1 ? "s" : ""}`;
    const head = `${n} micro-batch${n > 1 ? "es" : ""} of ${tok(b)}`;
    status.textContent = divide
      ? `${head}, each loss divided by ${n}: .grad holds their mean, ${pair(acc)}. It equals one ` +
        `big batch of the same ${tok(n * b)} to ${GF.fmt(exact, 1)} of its length (float64 ` +
        `rounding), and lies ${noise.toFixed(2)} gradient lengths from the gradient of all ${pool} tokens.`
      : `${head}, losses not divided: .grad holds their sum, ${pair(acc)}, ${n} times the big-batch ` +
        `gradient of the same ${tok(n * b)}` + (n > 1 ? `, ${gap.toFixed(2)} of its length away from it.` : " (no difference for one micro-batch).");
    svg.setAttribute("aria-label",
      `${head}: micro-batch gradients spread around the full-data gradient (1, 0); ` +
      `accumulated ${divide ? "mean" : "sum"} ${pair(acc)}, big batch ${pair(big)}.`);
    Object.assign(status.dataset, {
      count: String(n), tokens: String(b), divide: String(divide), accumulated: acc.join(","),
      big: big.join(","), exact: String(exact), noise: String(noise),
    });
  };

  const countSlider = GF.slider({
    label: "Micro-batches N", values: counts, value: state.n, format: (v) => String(v),
    onInput: (v) => { state.n = v; draw(); },
  });
  const tokenSlider = GF.slider({
    label: "Tokens per micro-batch", values: tokens, value: state.b,
    format: (v) => String(v),
    onInput: (v) => { state.b = v; draw(); },
  });
  const divide = GF.toggle({
    label: "Divide each loss by N", checked: true,
    onChange: (v) => { state.divide = v; draw(); },
  });
  live.classList.add("gf-acc");
  live.append(
    GF.controls(countSlider.el, tokenSlider.el, divide.el),
    svg,
    GF.legend([
      ["one micro-batch's gradient", GF.color(0)],
      ["accumulated in .grad", GF.color(1)],
      ["one big batch, same tokens", GF.color(2)],
      [`all ${pool} tokens`, "currentColor", true],
    ]),
    status,
    GF.h("p", { class: "gf-acc__note", text:
      `Arrows are ${params}-number gradients seen along two directions, in units of the full-data ` +
      "gradient's length; the distances in the text are measured on the full vectors." }),
  );
  draw();
});
