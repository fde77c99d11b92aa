// Chapter 8: the arena. Sliders pick one condition of a grid (depth, learning rate, batch size,
// BF16 or FP16 for the low-precision recipes); the chart draws the held-out loss of the six
// recipes after every optimizer step, from one-seed runs of gradflow_ref.arena.train. Play
// animates the steps; a table gives each recipe's precision, its loss at the chosen step and how
// its run ended. A slider over a single value is left out.
// data: {depth: [..], lr: [..], batch_size: [..], steps, recipes: [names], low_precision:
//   [the recipes that train in BF16 or FP16], start: {depth, lr, batch_size},
//   runs: [depth i][lr i][batch i][0 = BF16, 1 = FP16][recipe i] =
//   {loss: [held-out loss after 0..n steps, null where inf/NaN], status, dead: steps after
//   which a weight was inf/NaN (the run stopped there) or null, skipped: steps skipped};
//   in the FP16 half a recipe outside low_precision is null: it trains in FP32 and has one run,
//   the one in the BF16 half}
GF.register("arena", (live, data) => {
  const { steps, recipes, start } = data;
  const YMIN = 0.1, YMAX = 100;
  // the styles of the page's matplotlib figure: colour AND dash AND marker tell recipes apart
  const DASH = { baseline: null, clip: "7 4", mixed: "9 3 2 3", accum: "2 3", ckpt: "5 4", full: null };
  const MARK = { baseline: "circle", clip: "square", mixed: "up", accum: "down", ckpt: "cross", full: "diamond" };
  // ckpt computes the baseline's numbers exactly: draw it dashed and thinner on top of a thick baseline
  const WIDTH = { baseline: 3.5, ckpt: 1.5 };
  const low = data.low_precision;
  // a learning rate as the page's prose prints it (1.0, not 1)
  const num = (v) => (Number.isInteger(v) ? v.toFixed(1) : String(v));
  const style = (name) => ({
    color: GF.color(recipes.indexOf(name)), dash: DASH[name] || undefined,
    mark: MARK[name] || "circle", width: WIDTH[name] || 2,
  });

  const logic = (GF.logic.arena = {
    /**
     * The six runs of one condition, {recipe: run}. fp16 changes only the low-precision recipes;
     * the others train in FP32 and have one run, drawn under either setting.
     */
    cell(depth, lr, batchSize, fp16) {
      const i = data.depth.indexOf(depth), j = data.lr.indexOf(lr), k = data.batch_size.indexOf(batchSize);
      if (i < 0 || j < 0 || k < 0) throw new Error(`arena: no run for depth ${depth}, lr ${lr}, batch ${batchSize}`);
      const [bf16, fp16Runs] = data.runs[i][j][k];
      return Object.fromEntries(recipes.map((name, r) => [name, fp16 && low.includes(name) ? fp16Runs[r] : bf16[r]]));
    },
    /** The format a recipe trains in under the FP16 switch. */
    precision: (name, fp16) => (low.includes(name) ? (fp16 ? "FP16" : "BF16") : "FP32"),
    /** Held-out loss after `step` steps: a number, null (inf/NaN) or undefined (run stopped). */
    lossAt: (run, step) => (step < run.loss.length ? run.loss[step] : undefined),
    /** How a run ended, in words. */
    ending(run) {
      if (run.status === "NaN/inf") return run.dead === null ? "inf/NaN loss" : `weights inf/NaN after step ${run.dead}`;
      const last = run.loss[run.loss.length - 1];
      return `${last === null ? "inf" : GF.fmt(last)} (${run.status})`;
    },
    /**
     * Split a curve into drawable pieces inside [YMIN, YMAX] (log scale): [{points, exit}], where
     * `exit` is the point at which the piece leaves through the top edge (or null).
     */
    pieces(loss, upto) {
      const out = [];
      let cur = null;
      // where the segment from step k-1 to step k crosses YMAX on the log axis
      const top = (k) => {
        const a = loss[k - 1], b = loss[k];
        if (a === null || b === null) return [k, YMAX];
        const t = (Math.log10(YMAX) - Math.log10(a)) / (Math.log10(b) - Math.log10(a));
        return [k - 1 + t, YMAX];
      };
      for (let k = 0; k <= Math.min(upto, loss.length - 1); k++) {
        const v = loss[k];
        if (v !== null && v <= YMAX) {
          if (!cur) {
            cur = { points: k > 0 ? [top(k)] : [], exit: null }; // k > 0: it comes back in
            out.push(cur);
          }
          cur.points.push([k, Math.max(v, YMIN)]);
        } else if (cur) {
          cur.exit = top(k);
          cur.points.push(cur.exit);
          cur = null;
        } else if (k === 0) {
          out.push({ points: [], exit: [0, YMAX] });
        }
      }
      return out;
    },
    /** A loss as the table and the data-shown attribute print it. */
    text: (v) => (v === undefined ? "stopped" : v === null ? "inf/NaN" : GF.fmt(v)),
  });

  GF.style("arena", `
    .md-typeset ul.gf-arena-legend { display: flex; flex-wrap: wrap; gap: 0.2rem 1rem; list-style: none; margin: 0.3rem 0; padding: 0; }
    .md-typeset .gf-arena-legend li { margin: 0; display: flex; align-items: center; gap: 0.35rem; }
    .gf-arena-legend svg { width: 2.2em; height: 0.9em; overflow: visible; }
    .gf-arena-tablewrap { overflow-x: auto; }
    .md-typeset .gf-arena-tablewrap :is(th, td) { padding: 0.15em 1em 0.15em 0; text-align: left; vertical-align: top; }
  `);

  // one marker shape per recipe, centred on (x, y) in SVG units
  const marker = (shape, x, y, color, r = 3.6) => {
    const common = { stroke: color, "stroke-width": 1.5 };
    const poly = (pts) => GF.s("polygon", { points: pts.map(([a, b]) => `${(x + a).toFixed(1)},${(y + b).toFixed(1)}`).join(" "), fill: color, ...common });
    switch (shape) {
      case "square": return GF.s("rect", { x: x - r * 0.85, y: y - r * 0.85, width: r * 1.7, height: r * 1.7, fill: color, ...common });
      case "up": return poly([[0, -r * 1.15], [r, r * 0.75], [-r, r * 0.75]]);
      case "down": return poly([[0, r * 1.15], [r, -r * 0.75], [-r, -r * 0.75]]);
      case "diamond": return poly([[0, -r * 1.2], [r, 0], [0, r * 1.2], [-r, 0]]);
      case "cross": return GF.s("path", { d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`, fill: "none", ...common, "stroke-width": 2 });
      default: return GF.s("circle", { cx: x, cy: y, r, fill: color, ...common });
    }
  };
  const swatch = (name) => {
    const s = style(name);
    return GF.s("svg", { viewBox: "0 0 28 10", "aria-hidden": "true" },
      GF.s("line", { x1: 0, x2: 28, y1: 5, y2: 5, stroke: s.color, "stroke-width": Math.min(s.width, 2.5), "stroke-dasharray": s.dash }),
      marker(s.mark, 14, 5, s.color, 3.2));
  };
  const glyph = (draw) => GF.s("svg", { viewBox: "0 0 28 14", "aria-hidden": "true" }, draw);
  const legend = GF.h("ul", { class: "gf-arena-legend", "aria-label": "Recipes and marks" },
    recipes.map((name) => GF.h("li", {}, swatch(name), name)),
    // the two marks the chart draws at its top edge
    GF.h("li", { class: "gf-arena-legend__mark" },
      glyph(GF.s("text", { x: 14, y: 12, "text-anchor": "middle", style: "fill: currentColor; font-size: 16px; font-weight: 700", text: "×" })),
      "run stopped: a weight became inf or NaN"),
    GF.h("li", { class: "gf-arena-legend__mark" },
      glyph(GF.s("path", { d: "M9,11L14,5L19,11", fill: "none", stroke: "currentColor", "stroke-width": 2 })),
      "loss above the chart's top"));

  const chart = GF.chart({
    title: "Held-out loss of the six recipes against optimizer step",
    height: 300,
    x: { min: 0, max: steps, label: "optimizer step", ticks: Array.from({ length: Math.floor(steps / 2) + 1 }, (_, i) => 2 * i) },
    y: { min: YMIN, max: YMAX, log: true, label: "held-out loss" },
  });
  const status = GF.status();
  const tableWrap = GF.h("div", { class: "gf-arena-tablewrap" });
  const state = { ...start, fp16: false, step: steps };

  const draw = () => {
    const { depth, lr, batch_size: batch, fp16, step } = state;
    const runs = logic.cell(depth, lr, batch, fp16);
    chart.clear();
    chart.line([[0, 1], [steps, 1]], { color: "currentColor", width: 0.8, dash: "2 4" });
    for (const name of recipes) {
      const run = runs[name], s = style(name);
      const last = run.loss[run.loss.length - 1];
      const g = GF.s("g", {
        class: "gf-arena-run", "data-recipe": name, "data-status": run.status,
        "data-final": last === null ? "inf" : String(last),
        "data-shown": JSON.stringify(logic.lossAt(run, step)) ?? "stopped",
      });
      chart.plot.append(g);
      for (const piece of logic.pieces(run.loss, step)) {
        if (piece.points.length > 1) {
          const p = chart.line(piece.points, { color: s.color, width: s.width, dash: s.dash });
          g.append(p);
        }
        for (const [x, y] of piece.points) {
          if (Number.isInteger(x) && y < YMAX) g.append(marker(s.mark, chart.sx(x), chart.sy(y), s.color));
        }
        if (piece.exit) {
          // an open arrow head on the top edge: the curve leaves the chart upwards here
          const x = chart.sx(piece.exit[0]), y = chart.sy(YMAX);
          g.append(GF.s("path", { d: `M${x - 5},${y + 7}L${x},${y + 1}L${x + 5},${y + 7}`, fill: "none", stroke: s.color, "stroke-width": 2 }));
        }
      }
      if (run.dead !== null && step >= run.dead) {
        // the step after which a weight was inf/NaN: the run stopped there (as in the figure)
        const x = chart.sx(run.dead), y = chart.sy(YMAX) + 12;
        g.append(GF.s("text", { x, y: y + 5, "text-anchor": "middle", style: `fill: ${s.color}; font-size: 18px; font-weight: 700`, text: "×" }));
      }
    }
    const rows = recipes.map((name) => {
      const run = runs[name];
      const here = logic.text(logic.lossAt(run, step));
      return [name, here, logic.ending(run), String(run.skipped)];
    });
    tableWrap.replaceChildren(GF.table(["recipe", "precision", `loss at step ${step}`, `end (step ${steps})`, "skipped steps"],
      rows.map(([name, ...rest]) => [name, logic.precision(name, fp16), ...rest])));
    const by = (st) => recipes.filter((n) => runs[n].status === st);
    const learn = by("learns"), worse = by("worse than start"), dead = by("NaN/inf");
    const best = learn.length ? learn.reduce((a, b) => (runs[b].loss.at(-1) < runs[a].loss.at(-1) ? b : a)) : null;
    const cond = `Depth ${depth}, learning rate ${num(lr)}, batch ${batch}, ${low.join(" and ")} in ${fp16 ? "FP16" : "BF16"}, the others in FP32`;
    const list = (names, one, many) => `${names.join(", ")} ${names.length === 1 ? one : many}`;
    const story = [
      learn.length ? `${list(learn, "learns", "learn")} (${learn.length > 1 ? `lowest: ${best}, ` : ""}${GF.fmt(runs[best].loss.at(-1))})` : "no recipe learns",
      worse.length ? list(worse, "ends worse than it started", "end worse than they started") : "",
      ...dead.map((n) => `${n}: ${logic.ending(runs[n])}`),
    ].filter(Boolean).join("; ");
    status.textContent = `${cond}, step ${step} of ${steps}. After ${steps} steps: ${story}.`;
    Object.assign(status.dataset, { depth, lr, batch, fp16: String(fp16), step });
    chart.svg.setAttribute("aria-label", `Held-out loss against step, ${cond}, steps 0 to ${step}: ` +
      recipes.map((n) => `${n} ${rows[recipes.indexOf(n)][1]}`).join(", ") + ".");
  };

  const set = (key) => (v) => { state[key] = v; draw(); };
  const depth = GF.slider({ label: "Depth", values: data.depth, value: start.depth, format: String, onInput: set("depth") });
  const lr = GF.slider({ label: "Learning rate", values: data.lr, value: start.lr, format: num, onInput: set("lr") });
  const batch = GF.slider({ label: "Batch size", values: data.batch_size, value: start.batch_size, format: String, onInput: set("batch_size") });
  const fp16 = GF.toggle({ label: "FP16 instead of BF16", checked: false, onChange: set("fp16") });
  const stepSlider = GF.slider({
    label: "Step", min: 0, max: steps, step: 1, value: steps, format: (v) => `${v} / ${steps}`,
    onInput: set("step"),
  });
  const player = GF.player(() => {
    // Play at the last step starts over from step 0
    const next = state.step >= steps ? 0 : state.step + 1;
    stepSlider.set(next);
    set("step")(next);
    return next < steps;
  }, 500);
  const sliders = [[data.depth, depth], [data.lr, lr], [data.batch_size, batch]];
  live.append(
    GF.controls(...sliders.filter(([values]) => values.length > 1).map(([, s]) => s.el), fp16.el),
    GF.controls(player.el, stepSlider.el),
    legend, chart.svg, status, tableWrap,
  );
  draw();
});
