// Chapter 10: a gallery of induced failures. Pick a failure and a signal; the chart draws that
// signal at every optimizer step for the failing run and for its remedy, one line per seed, from
// runs of gradflow_site.pages.diagnosis.gallery made at build. A gap in a line is a step whose
// value was inf or NaN; the status line says how many, and what the remedy did (skipped steps,
// rollbacks).
// data: {signals: {key: [label, log]}, failures: [{name, remedy, signature, steps,
//   fail: {key: [[per step, null = inf/NaN] per seed]}, fix: {...}, skipped: [per seed],
//   rolled_back: [per seed]}]}
GF.register("diagnosis", (live, data) => {
  const keys = Object.keys(data.signals);
  const logic = (GF.logic.diagnosis = {
    /** The failure named `name`. */
    failure(name) {
      const f = data.failures.find((x) => x.name === name);
      if (!f) throw new Error(`diagnosis: no failure named ${name}`);
      return f;
    },
    /** Median of the finite numbers in `xs`, or null when there is none. */
    median(xs) {
      const v = xs.filter((x) => x !== null && Number.isFinite(x)).sort((a, b) => a - b);
      if (!v.length) return null;
      const h = v.length >> 1;
      return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
    },
    /** Per seed, the largest finite value of a series, or null. */
    peaks: (series) => series.map((row) => {
      const v = row.filter((x) => x !== null);
      return v.length ? Math.max(...v) : null;
    }),
    /** Steps (per seed) whose value was inf/NaN. */
    gaps: (series) => series.map((row) => row.filter((x) => x === null).length),
    /** [min, max] over every finite, positive-where-log value of both runs. */
    range(f, key, log) {
      const all = [...f.fail[key], ...f.fix[key]].flat().filter((x) => x !== null && (!log || x > 0));
      if (!all.length) return [log ? 0.1 : 0, 1];
      let lo = Math.min(...all), hi = Math.max(...all);
      if (log) return [lo / 1.5, hi * 1.5];
      const pad = (hi - lo) * 0.08 || 1;
      return [lo - pad, hi + pad];
    },
  });

  const state = { name: data.failures[0].name, key: data.failures[0].signature };
  const status = GF.status();
  const chartBox = GF.h("div", {});
  const legend = GF.legend([["failure (one line per seed)", GF.color(0)], ["remedy (one line per seed)", GF.color(2), true]]);
  const signal = GF.select({
    label: "Signal",
    options: keys.map((k) => [k, data.signals[k][0]]),
    value: state.key,
    onChange: (v) => { state.key = v; draw(); },
  });
  const pick = GF.select({
    label: "Failure",
    options: data.failures.map((f) => [f.name, f.name]),
    value: state.name,
    onChange: (v) => {
      state.name = v;
      state.key = logic.failure(v).signature; // each failure opens on the signal that shows it
      signal.set(state.key);
      draw();
    },
  });

  const draw = () => {
    const f = logic.failure(state.name);
    const [label, log] = data.signals[state.key];
    const [lo, hi] = logic.range(f, state.key, log);
    const chart = GF.chart({
      title: `${label} against optimizer step: ${f.name}, failure and remedy (${f.remedy})`,
      height: 260,
      x: { min: 1, max: f.steps, label: "optimizer step" },
      y: { min: lo, max: hi, log, label },
    });
    for (const [which, color, dash] of [["fail", GF.color(0), undefined], ["fix", GF.color(2), "6 4"]]) {
      for (const row of f[which][state.key]) {
        // a null (inf/NaN) breaks the line: draw each finite stretch on its own
        let piece = [];
        row.forEach((y, i) => {
          if (y === null || (log && y <= 0)) {
            if (piece.length) chart.line(piece, { color, dash, width: 1.8 });
            piece = [];
          } else piece.push([i + 1, y]);
        });
        if (piece.length) chart.line(piece, { color, dash, width: 1.8 });
      }
    }
    chartBox.replaceChildren(chart.svg);
    const fmtAll = (xs) => xs.map((x) => GF.fmt(x)).join(", ");
    const gf = logic.gaps(f.fail[state.key]), gx = logic.gaps(f.fix[state.key]);
    const extra = [];
    if (f.skipped.some((n) => n > 0)) extra.push(`the remedy skipped ${f.skipped.join(", ")} steps`);
    if (f.rolled_back.some((n) => n > 0)) extra.push(`rolled back ${f.rolled_back.join(", ")} times`);
    status.textContent =
      `${f.name}: ${label}, largest per seed: failure ${fmtAll(logic.peaks(f.fail[state.key]))}; ` +
      `remedy (${f.remedy}) ${fmtAll(logic.peaks(f.fix[state.key]))}. ` +
      `Steps with inf/NaN per seed: failure ${gf.join(", ")}, remedy ${gx.join(", ")}` +
      (extra.length ? `; ${extra.join("; ")} (per seed).` : ".");
    Object.assign(status.dataset, { failure: f.name, signal: state.key, gapsFail: gf.join(","), gapsFix: gx.join(",") });
  };
  live.append(GF.controls(pick.el, signal.el), legend, chartBox, status);
  draw();
});
