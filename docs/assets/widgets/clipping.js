// Chapter 2: norm clipping against value clipping for a 2-D gradient. Drag the gradient's tip
// (or focus it and use the arrow keys, or type its components) and set the threshold c, used as
// both max_norm and clip_value; the plot draws the circle ||g|| = c and the square |g_i| <= c.
// The formulas run here, on GF.logic.clipping, and are tested against gradflow_ref.clipping.
// data: {start: [g1, g2], threshold, extent (half-width of the plotted square), thresholds: [min, max, step]}
GF.register("clipping", (live, data) => {
  const EPS = 1e-6; // torch.nn.utils.clip_grad_norm_ and gradflow_ref: max_norm / (norm + 1e-6)
  const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  GF.logic.clipping = {
    /** Euclidean norm of a flat vector. */
    norm,
    /** The coefficient clip_grad_norm_ multiplies by: min(1, maxNorm / (norm + 1e-6)). */
    coef: (vec, maxNorm) => Math.min(1, maxNorm / (norm(vec) + EPS)),
    /** clip_grad_norm_ on one flat vector: every element scaled by the same coefficient. */
    clipNorm: (vec, maxNorm) => {
      const c = GF.logic.clipping.coef(vec, maxNorm);
      return vec.map((x) => x * c);
    },
    /** clip_grad_value_: every element clamped to [-clipValue, clipValue]. */
    clipValue: (vec, clipValue) => vec.map((x) => Math.min(clipValue, Math.max(-clipValue, x))),
    /** Angle in degrees between u and v (gradflow_ref.clipping.angle_between); null if either is 0. */
    angle: (u, v) => {
      const nu = norm(u), nv = norm(v);
      if (nu === 0 || nv === 0) return null;
      const dot = u.reduce((s, x, i) => s + x * v[i], 0);
      return (Math.acos(Math.min(1, Math.max(-1, dot / (nu * nv)))) * 180) / Math.PI;
    },
  };
  const L = GF.logic.clipping;
  const R = data.extent;
  const state = { g: data.start.slice(), c: data.threshold };

  GF.style("clipping", `
    .gf-clip { display: flex; flex-wrap: wrap; gap: 0.6rem 1.2rem; align-items: flex-start; }
    .gf-clip .gf-clip__plot { flex: 0 1 18rem; width: 18rem; max-width: 100%; height: auto; display: block;
      touch-action: none; color: var(--md-default-fg-color); cursor: crosshair; user-select: none; }
    .gf-clip__plot text { fill: currentColor; font-size: 11px; }
    .gf-clip__side { flex: 1 1 14rem; min-width: 0; }
    .gf-clip__side .gf-controls { flex-direction: column; align-items: flex-start; }
    .gf-clip__side input[type="number"] { width: 6em; }
    .gf-clip__handle { cursor: grab; stroke: currentColor; stroke-width: 2; }
    .gf-clip__handle:focus-visible { stroke: var(--md-accent-fg-color); stroke-width: 4; }
  `);

  // plot: data square [-R, R]^2 in a 300 x 300 viewBox with a 10 px margin
  const S = 300, M = 10, k = (S - 2 * M) / (2 * R);
  const px = (x) => M + (x + R) * k, py = (y) => S - M - (y + R) * k;
  const svg = GF.s("svg", { viewBox: `0 0 ${S} ${S}`, class: "gf-clip__plot", role: "group",
    "aria-label": "Gradient, norm-clipped and value-clipped vectors" });
  const grid = GF.s("g", {});
  for (let t = -Math.floor(R); t <= R; t++) {
    const style = t ? "stroke: var(--md-default-fg-color--lightest)" : "stroke: currentColor; stroke-opacity: 0.5";
    grid.append(GF.s("line", { x1: px(t), x2: px(t), y1: py(-R), y2: py(R), style }));
    grid.append(GF.s("line", { x1: px(-R), x2: px(R), y1: py(t), y2: py(t), style }));
    if (t) grid.append(GF.s("text", { x: px(t), y: py(0) + 13, "text-anchor": "middle", text: String(t) }));
    if (t) grid.append(GF.s("text", { x: px(0) - 4, y: py(t) + 4, "text-anchor": "end", text: String(t) }));
  }
  const circle = GF.s("circle", { cx: px(0), cy: py(0), fill: "none", stroke: "currentColor", "stroke-width": 1.2 });
  const square = GF.s("rect", { fill: "none", stroke: "currentColor", "stroke-width": 1.2, "stroke-dasharray": "4 3" });
  const arrows = GF.s("g", {});
  const handle = GF.s("circle", {
    r: 9, class: "gf-clip__handle", tabindex: 0, role: "slider", "aria-roledescription": "2-D slider",
    "aria-label": "Gradient tip (arrow keys move it; Shift for bigger steps)",
    "aria-valuemin": 0, "aria-valuemax": +(R * Math.SQRT2).toFixed(3), style: `fill: ${GF.color(0)}`,
  });
  svg.append(grid, circle, square, arrows, handle);

  const arrow = (v, color, width) => {
    const [x, y] = [px(v[0]), py(v[1])], [x0, y0] = [px(0), py(0)];
    const len = Math.hypot(x - x0, y - y0);
    const g = GF.s("g", { style: `color: ${color}` });
    if (len < 1e-9) return g;
    const ux = (x - x0) / len, uy = (y - y0) / len, head = Math.min(10, len * 0.6);
    const bx = x - ux * head, by = y - uy * head;
    g.append(GF.s("line", { x1: x0, y1: y0, x2: bx, y2: by, stroke: "currentColor", "stroke-width": width }));
    g.append(GF.s("polygon", { fill: "currentColor",
      points: `${x},${y} ${bx - uy * head * 0.45},${by + ux * head * 0.45} ${bx + uy * head * 0.45},${by - ux * head * 0.45}` }));
    return g;
  };

  const status = GF.status();
  const pair = (v) => `(${v.map((x) => x.toFixed(2)).join(", ")})`;
  const deg = (a) => (a === null ? "no direction" : `turned ${a.toFixed(1)}°`);
  const draw = () => {
    const { g, c } = state;
    const byNorm = L.clipNorm(g, c), byValue = L.clipValue(g, c);
    const n = L.norm(g), coef = L.coef(g, c);
    const aNorm = L.angle(g, byNorm), aValue = L.angle(g, byValue);
    circle.setAttribute("r", c * k);
    Object.entries({ x: px(-c), y: py(c), width: 2 * c * k, height: 2 * c * k }).forEach(([a, v]) => square.setAttribute(a, v));
    arrows.replaceChildren(
      arrow(g, GF.color(0), 5),
      arrow(byValue, GF.color(1), 2.5),
      arrow(byNorm, GF.color(2), 2.5),
      GF.s("line", { x1: px(g[0]), y1: py(g[1]), x2: px(byValue[0]), y2: py(byValue[1]), "stroke-dasharray": "2 3", style: `stroke: ${GF.color(1)}` }),
    );
    handle.setAttribute("cx", px(g[0]));
    handle.setAttribute("cy", py(g[1]));
    handle.setAttribute("aria-valuenow", n.toFixed(3));
    handle.setAttribute("aria-valuetext", `gradient ${pair(g)}, length ${n.toFixed(2)}`);
    const normText = coef === 1
      ? `Norm clipping leaves it unchanged (length ${n.toFixed(2)} ≤ ${c.toFixed(2)})`
      : `Norm clipping scales it by ${coef.toFixed(3)} to ${pair(byNorm)}: length ${L.norm(byNorm).toFixed(2)}, ${deg(aNorm)}`;
    status.textContent = (state.note || "") +
      `Gradient ${pair(g)}, length ${n.toFixed(2)}, threshold c = ${c.toFixed(2)}. ${normText}. ` +
      `Value clipping gives ${pair(byValue)}: length ${L.norm(byValue).toFixed(2)}, ${deg(aValue)}.`;
    svg.setAttribute("aria-label", `Circle of radius ${c.toFixed(2)} and square of half-width ${c.toFixed(2)}; ` +
      `gradient ${pair(g)}, norm-clipped ${pair(byNorm)}, value-clipped ${pair(byValue)}.`);
    Object.assign(status.dataset, {
      gradient: g.join(","), threshold: String(c), byNorm: byNorm.join(","), byValue: byValue.join(","),
      angleNorm: String(aNorm), angleValue: String(aValue),
    });
  };

  const clampR = (v) => Math.min(R, Math.max(-R, v));
  const inputs = [0, 1].map((i) => GF.input({
    label: `Component ${i + 1}`, type: "number", value: state.g[i],
    attrs: { min: -R, max: R, step: 0.1, inputmode: "decimal" },
    onInput: (v) => {
      const x = Number.parseFloat(v);
      if (!Number.isFinite(x)) return;
      state.g[i] = clampR(x);
      // say so when the value typed is not the value used (the plot ends at ±R)
      state.note = x === state.g[i] ? "" : `Component ${i + 1} = ${v} is outside the plot: using ${state.g[i]}. `;
      draw();
    },
  }));
  const showInputs = () => inputs.forEach((inp, i) => inp.set(+state.g[i].toFixed(3)));
  // once an entry is committed, the box shows the value the plot uses
  inputs.forEach((inp) => inp.input.addEventListener("change", showInputs));
  const moveTo = (g) => { state.g = g.map(clampR); state.note = ""; showInputs(); draw(); };

  // pointer: a press anywhere in the plot moves the tip there; dragging keeps moving it
  const toData = (ev) => {
    const p = new DOMPoint(ev.clientX, ev.clientY).matrixTransform(svg.getScreenCTM().inverse());
    return [(p.x - M) / k - R, (S - M - p.y) / k - R].map((v) => Math.round(v * 100) / 100);
  };
  svg.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    ev.preventDefault();
    svg.setPointerCapture(ev.pointerId);
    handle.focus({ preventScroll: true });
    moveTo(toData(ev));
  });
  svg.addEventListener("pointermove", (ev) => {
    if (svg.hasPointerCapture(ev.pointerId)) moveTo(toData(ev));
  });
  handle.addEventListener("keydown", (ev) => {
    const step = ev.shiftKey ? 0.5 : 0.1;
    const d = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowDown: [0, -step], ArrowUp: [0, step] }[ev.key];
    if (!d) return;
    ev.preventDefault();
    moveTo(state.g.map((v, i) => Math.round((v + d[i]) * 1000) / 1000));
  });

  const threshold = GF.slider({
    label: "Threshold c", min: data.thresholds[0], max: data.thresholds[1], step: data.thresholds[2],
    value: state.c, format: (v) => v.toFixed(2),
    onInput: (v) => { state.c = v; draw(); },
  });
  const legend = GF.legend([
    ["gradient g", GF.color(0)],
    ["norm-clipped", GF.color(2)],
    ["value-clipped", GF.color(1)],
    ["‖g‖ = c", "currentColor"],
    ["|gᵢ| ≤ c", "currentColor", true],
  ]);
  live.append(
    GF.h("div", { class: "gf-clip" }, svg,
      GF.h("div", { class: "gf-clip__side" }, GF.controls(threshold.el, inputs[0].el, inputs[1].el), legend)),
    status,
  );
  draw();
});
