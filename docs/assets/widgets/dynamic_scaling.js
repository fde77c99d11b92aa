// Chapter 5: a dynamic loss-scaling run, step by step. The run (gradflow_ref.loss_scaling
// GradScaler driving FP16 autocast training of a small classifier, two corrupted batches) was
// recorded at build time: for every step the scale its backward pass used, whether a gradient
// was inf/NaN (the optimizer step was then skipped), and the scale and growth tracker after
// update(). The update rule runs here too, on GF.logic.dynamic_scaling.next, and the browser
// tests replay the recorded history through it.
// data: {init_scale, growth_factor, backoff_factor, growth_interval, corrupted: [steps],
//   scale: [used per step], inf: [0/1], tracker: [after update], after: [scale after update],
//   loss: [per step]}
GF.register("dynamic_scaling", (live, data) => {
  const { scale, inf, tracker, after, loss, corrupted } = data;
  const n = scale.length;
  const defaults = { growthFactor: data.growth_factor, backoffFactor: data.backoff_factor, growthInterval: data.growth_interval };
  GF.logic.dynamic_scaling = {
    /**
     * GradScaler.update() after one step: back off and reset the tracker on inf/NaN; otherwise
     * count a clean step and grow after growthInterval of them. The scale is a float32 tensor
     * in torch and gradflow_ref: products are rounded to float32, and growth to inf is refused.
     */
    next: (state, foundInf, cfg = defaults) => {
      const c = { ...defaults, ...cfg };
      if (foundInf) return { scale: Math.fround(state.scale * c.backoffFactor), tracker: 0 };
      const tracker = state.tracker + 1;
      if (tracker < c.growthInterval) return { scale: state.scale, tracker };
      const grown = Math.fround(state.scale * c.growthFactor);
      return { scale: Number.isFinite(grown) ? grown : state.scale, tracker: 0 };
    },
  };
  const L = GF.logic.dynamic_scaling;
  const log2 = (s) => Math.log2(s);
  const pow = (s) => { const e = log2(s); return Number.isInteger(e) ? `2^${e}` : GF.fmt(s); };
  const all = scale.concat(after).map(log2);
  const ymin = Math.floor(Math.min(...all)) - 1, ymax = Math.ceil(Math.max(...all)) + 1;
  const chart = GF.chart({
    title: "Loss scale at each step",
    height: 260,
    x: { min: 0, max: n, label: "step" },
    y: { min: ymin, max: ymax, label: "log2 of the loss scale", format: (v) => String(v) },
  });
  const marks = GF.s("g", {});
  chart.svg.append(marks);
  const cursor = GF.s("line", { y1: chart.sy(ymax), y2: chart.sy(ymin), stroke: GF.color(2), "stroke-width": 2 });
  const dot = GF.s("circle", { r: 5, fill: GF.color(2) });
  const history = [];
  for (let t = 0; t < n; t++) history.push([t, log2(scale[t])], [t + 1, log2(scale[t])]);
  chart.line(history, { color: GF.color(0) });
  for (const t of corrupted) chart.line([[t + 0.5, ymin], [t + 0.5, ymax]], { width: 1, dash: "2 3" });
  for (let t = 0; t < n; t++) {
    if (!inf[t]) continue;
    const x = chart.sx(t + 0.5), y = chart.sy(log2(scale[t])), r = 4;
    marks.append(GF.s("path", { d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`, stroke: GF.color(1), "stroke-width": 2 }));
  }
  marks.append(cursor, dot);

  const details = GF.h("div", {});
  const status = GF.status();
  let t = 0;
  const show = (next) => {
    t = Math.max(0, Math.min(n - 1, next));
    slider.set(t);
    const before = { scale: scale[t], tracker: t ? tracker[t - 1] : 0 };
    const predicted = L.next(before, !!inf[t]);
    const x = chart.sx(t + 0.5);
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    dot.setAttribute("cx", x);
    dot.setAttribute("cy", chart.sy(log2(scale[t])));
    const bad = corrupted.includes(t) ? " (a corrupted batch: inputs × 10^4)" : "";
    let outcome;
    if (inf[t]) {
      outcome = `found an inf/NaN gradient${bad}, so the optimizer step was skipped and update() multiplied the scale by ${data.backoff_factor}: ${pow(predicted.scale)}, growth tracker reset to 0.`;
    } else if (predicted.scale !== scale[t]) {
      outcome = `all gradients finite, the step was taken; that is ${data.growth_interval} clean steps in a row, so update() multiplied the scale by ${data.growth_factor}: ${pow(predicted.scale)}, growth tracker back to 0.`;
    } else {
      outcome = `all gradients finite, the step was taken; ${predicted.tracker} clean step${predicted.tracker === 1 ? "" : "s"} in a row of the ${data.growth_interval} needed to grow the scale.`;
    }
    status.textContent = `Step ${t} of ${n - 1}: the backward pass used scale ${pow(scale[t])} = ${scale[t].toLocaleString("en")}; ${outcome}`;
    Object.assign(status.dataset, { step: String(t), scale: String(scale[t]), inf: String(inf[t]), next: String(predicted.scale), tracker: String(predicted.tracker) });
    details.replaceChildren(GF.table(
      ["step", "scale used", "inf/NaN found", "optimizer step", "growth tracker after", "scale after", "loss"],
      [[String(t), pow(scale[t]), inf[t] ? "yes" : "no", inf[t] ? "skipped" : "taken", String(tracker[t]), pow(after[t]), GF.fmt(loss[t], 4)]],
    ));
    const skipped = inf.slice(0, t + 1).reduce((a, b) => a + b, 0);
    chart.svg.setAttribute("aria-label", `Loss scale over ${n} steps, ${inf.reduce((a, b) => a + b, 0)} of them skipped (crosses). ` +
      `At step ${t} the scale was ${pow(scale[t])}; ${skipped} steps skipped so far.`);
  };
  const slider = GF.slider({ label: "Step", min: 0, max: n - 1, step: 1, value: 0, format: (v) => String(v), onInput: (v) => { player.stop(); show(v); } });
  const player = GF.player(() => { if (t >= n - 1) return false; show(t + 1); }, 150, undefined,
    { atEnd: () => t >= n - 1, rewind: () => show(0) });
  const prev = GF.button("Previous step", () => { player.stop(); show(t - 1); });
  const next = GF.button("Next step", () => { player.stop(); show(t + 1); });
  GF.style("dynamic_scaling", `.gf-dyn__details { overflow-x: auto; }
    .gf-dyn__details th, .gf-dyn__details td { padding: 0.15em 0.7em; text-align: right; }`);
  details.className = "gf-dyn__details";
  // a region that scrolls sideways on a phone must be reachable by keyboard (axe)
  Object.assign(details, { tabIndex: 0 });
  details.setAttribute("role", "region");
  details.setAttribute("aria-label", "Details of the current step");
  live.append(GF.controls(prev, player.el, next, slider.el), chart.svg,
    GF.legend([["log2 scale", GF.color(0)], ["skipped step", GF.color(1)], ["corrupted batch", "currentColor", true], ["current step", GF.color(2)]]),
    status, details);
  show(0);
});
