// Chapter 11: the arena. Sliders pick a learning rate, a batch and a seed; the chart draws the
// training loss of every recipe at each optimizer step, from runs of snippets/train.py made at
// build. Play animates the steps; a table gives each recipe's precision, its loss at the chosen
// step, its held-out loss after the last step and its skipped steps. A cell that was not run
// (a seed the build did not run at that batch) says so and draws nothing.
// data: {lr: [..], batch: [..], seeds: [..], steps, recipes: [names], precision: [per recipe],
//   start: {lr, batch, seed},
//   runs: [lr i][batch i][seed i] = null (no run) or, per recipe,
//   {loss: [training loss at steps 1..steps, null where inf/NaN], val: held-out loss after the
//   last step (null: inf/NaN), skipped: steps the loss scaler skipped}}
GF.register("arena", (live, data) => {
  const { steps, recipes, start } = data;
  const YMIN = 1, YMAX = 300;
  // colour AND dash AND marker tell the nine recipes apart (the palette has six colours)
  const DASH = ["", "7 4", "9 3 2 3", "2 3", "5 4", "", "7 4", "2 3", ""];
  const MARK = ["circle", "square", "up", "down", "cross", "diamond", "circle", "up", "square"];
  const style = (name) => {
    const r = recipes.indexOf(name);
    return { color: GF.color(r), dash: DASH[r] || undefined, mark: MARK[r], width: name === "none" ? 3.5 : 2 };
  };

  const logic = (GF.logic.arena = {
    /** The runs of one cell, {recipe: run}, or null where the build ran no such run. */
    cell(lr, batch, seed) {
      const i = data.lr.indexOf(lr), j = data.batch.indexOf(batch), k = data.seeds.indexOf(seed);
      if (i < 0 || j < 0 || k < 0) throw new Error(`arena: no cell for lr ${lr}, batch ${batch}, seed ${seed}`);
      const runs = data.runs[i][j][k];
      return runs && Object.fromEntries(recipes.map((name, r) => [name, runs[r]]));
    },
    /** The seeds the build ran at one learning rate and batch. */
    ran(lr, batch) {
      const i = data.lr.indexOf(lr), j = data.batch.indexOf(batch);
      return data.seeds.filter((_, k) => data.runs[i][j][k] !== null);
    },
    /** Training loss at step `step` (1-based): a number, null (inf/NaN) or undefined (none yet). */
    lossAt: (run, step) => (step >= 1 && step <= run.loss.length ? run.loss[step - 1] : undefined),
    /** The first step whose loss was inf/NaN, or null. */
    dead: (run) => { const k = run.loss.indexOf(null); return k < 0 ? null : k + 1; },
    /**
     * Split a curve into drawable pieces inside [YMIN, YMAX] (log scale): [{points, exit}], where
     * `exit` is the point at which the piece leaves through the top edge (or null). Points are
     * [index, loss] with index 0 for the first entry of `loss`.
     */
    pieces(loss, upto) {
      const out = [];
      let cur = null;
      // where the segment from entry k-1 to entry k crosses YMAX on the log axis
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
    text: (v) => (v === undefined ? "–" : v === null ? "inf/NaN" : GF.fmt(v)),
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
      "loss became inf or NaN"),
    GF.h("li", { class: "gf-arena-legend__mark" },
      glyph(GF.s("path", { d: "M9,11L14,5L19,11", fill: "none", stroke: "currentColor", "stroke-width": 2 })),
      "loss above the chart's top"));

  const chart = GF.chart({
    title: "Training loss of the recipes against optimizer step",
    height: 300,
    x: { min: 1, max: steps, label: "optimizer step", ticks: Array.from({ length: steps }, (_, i) => i + 1) },
    y: { min: YMIN, max: YMAX, log: true, label: "training loss" },
  });
  const status = GF.status();
  const tableWrap = GF.h("div", { class: "gf-arena-tablewrap" });
  const state = { ...start, step: steps };

  const draw = () => {
    const { lr, batch, seed, step } = state;
    const runs = logic.cell(lr, batch, seed);
    const cond = `Learning rate ${lr}, batch ${batch}, seed ${seed}`;
    chart.clear();
    Object.assign(status.dataset, { lr, batch, seed, step, ran: String(runs !== null) });
    if (!runs) {
      // say so; never draw another seed's runs in its place
      const ran = logic.ran(lr, batch);
      const msg = `${cond}: no run. At learning rate ${lr} and batch ${batch} the build ran seed${ran.length > 1 ? "s" : ""} ${ran.join(", ")} only.`;
      status.textContent = msg;
      tableWrap.replaceChildren(GF.h("p", { class: "gf-arena-norun" }, "No run at this seed."));
      chart.svg.setAttribute("aria-label", msg);
      return;
    }
    for (const name of recipes) {
      const run = runs[name], s = style(name);
      const g = GF.s("g", {
        class: "gf-arena-run", "data-recipe": name,
        "data-val": run.val === null ? "nan" : String(run.val),
        "data-shown": JSON.stringify(logic.lossAt(run, step)) ?? "none",
      });
      chart.plot.append(g);
      for (const piece of logic.pieces(run.loss, step - 1)) {
        const pts = piece.points.map(([k, v]) => [k + 1, v]);
        if (pts.length > 1) g.append(chart.line(pts, { color: s.color, width: s.width, dash: s.dash }));
        for (const [x, y] of pts) {
          if (Number.isInteger(x) && y < YMAX) g.append(marker(s.mark, chart.sx(x), chart.sy(y), s.color));
        }
        if (piece.exit) {
          // an open arrow head on the top edge: the curve leaves the chart upwards here
          const x = chart.sx(piece.exit[0] + 1), y = chart.sy(YMAX);
          g.append(GF.s("path", { d: `M${x - 5},${y + 7}L${x},${y + 1}L${x + 5},${y + 7}`, fill: "none", stroke: s.color, "stroke-width": 2 }));
        }
      }
      const dead = logic.dead(run);
      if (dead !== null && step >= dead) {
        const x = chart.sx(dead), y = chart.sy(YMAX) + 12;
        g.append(GF.s("text", { x, y: y + 5, "text-anchor": "middle", style: `fill: ${s.color}; font-size: 18px; font-weight: 700`, text: "×" }));
      }
    }
    const rows = recipes.map((name, r) => {
      const run = runs[name];
      return [name, data.precision[r], logic.text(logic.lossAt(run, step)), logic.text(run.val), String(run.skipped)];
    });
    tableWrap.replaceChildren(GF.table(["recipe", "precision", `training loss at step ${step}`, `held-out loss after step ${steps}`, "skipped steps"], rows));
    const dead = recipes.filter((n) => runs[n].val === null);
    const finite = recipes.filter((n) => runs[n].val !== null);
    const vals = finite.map((n) => runs[n].val);
    const story = [
      finite.length ? `held-out loss after step ${steps} from ${GF.fmt(Math.min(...vals))} to ${GF.fmt(Math.max(...vals))}` : "",
      dead.length ? `inf/NaN: ${dead.join(", ")}` : "",
    ].filter(Boolean).join("; ");
    status.textContent = `${cond}, step ${step} of ${steps}. ${story}.`;
    chart.svg.setAttribute("aria-label", `Training loss against step, ${cond}, steps 1 to ${step}: ` +
      rows.map((r) => `${r[0]} ${r[2]}`).join(", ") + ".");
  };

  const set = (key) => (v) => { state[key] = v; draw(); };
  const lr = GF.slider({ label: "Learning rate", values: data.lr, value: start.lr, format: String, onInput: set("lr") });
  const batch = GF.slider({ label: "Batch", values: data.batch, value: start.batch, format: String, onInput: set("batch") });
  const seed = GF.slider({ label: "Seed", values: data.seeds, value: start.seed, format: String, onInput: set("seed") });
  const stepSlider = GF.slider({
    label: "Step", min: 1, max: steps, step: 1, value: steps, format: (v) => `${v} / ${steps}`,
    onInput: set("step"),
  });
  const player = GF.player(() => {
    // Play at the last step starts over from step 1
    const next = state.step >= steps ? 1 : state.step + 1;
    stepSlider.set(next);
    set("step")(next);
    return next < steps;
  }, 500);
  live.append(
    GF.controls(lr.el, batch.el, seed.el),
    GF.controls(player.el, stepSlider.el),
    legend, chart.svg, status, tableWrap,
  );
  draw();
});
