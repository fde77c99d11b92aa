// Chapter 10: a gallery of induced failures, read from a frozen record. Pick a failure and a
// signal; the chart draws that signal per window of `every` steps for every seed of the failing
// run, of its remedy and of the healthy run (gradflow_site.pages.diagnosis.widget). A gap in a
// line is a window whose value was inf or NaN; the status line gives each run's peak per seed.
// data: {every, signals: {key: [label, log]}, healthy: {key: [[per window, null = inf/NaN]
//   per seed]}, failures: [{name, signature, verdict, fail: {key: ...}, fix: {...},
//   skipped: [per seed]}]}
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
    /** Windows (per seed) whose value was inf/NaN. */
    gaps: (series) => series.map((row) => row.filter((x) => x === null).length),
    /** [min, max] over every finite, positive-where-log value of the given series. */
    range(all, log) {
      const v = all.flat(2).filter((x) => x !== null && (!log || x > 0));
      if (!v.length) return [log ? 0.1 : 0, 1];
      const lo = Math.min(...v), hi = Math.max(...v);
      if (log) return [lo / 1.5, hi * 1.5];
      const pad = (hi - lo) * 0.08 || 1;
      return [lo - pad, hi + pad];
    },
  });

  const state = { name: data.failures[0].name, key: data.failures[0].signature };
  const runs = [
    ["healthy", "healthy run", "var(--md-default-fg-color--light)", undefined],
    ["fail", "failure", GF.color(0), undefined],
    ["fix", "remedy", GF.color(2), "6 4"],
  ];
  const status = GF.status();
  const chartBox = GF.h("div", {});
  const legend = GF.legend(runs.map(([, label, color, dash]) => [`${label} (one line per seed)`, color, Boolean(dash)]));
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
    const series = { healthy: data.healthy[state.key], fail: f.fail[state.key], fix: f.fix[state.key] };
    const [lo, hi] = logic.range(Object.values(series), log);
    const windows = series.fail[0].length;
    const chart = GF.chart({
      title: `${label} against training step: ${f.name}, failure, remedy and healthy run`,
      height: 260,
      x: { min: data.every, max: data.every * windows, label: "training step" },
      y: { min: lo, max: hi, log, label },
    });
    for (const [which, , color, dash] of runs) {
      for (const row of series[which]) {
        // a null (inf/NaN) breaks the line: draw each finite stretch on its own
        let piece = [];
        row.forEach((y, i) => {
          if (y === null || (log && y <= 0)) {
            if (piece.length) chart.line(piece, { color, dash, width: 1.6 });
            piece = [];
          } else piece.push([data.every * (i + 1), y]);
        });
        if (piece.length) chart.line(piece, { color, dash, width: 1.6 });
      }
    }
    chartBox.replaceChildren(chart.svg);
    const fmtAll = (xs) => xs.map((x) => GF.fmt(x)).join(", ");
    const gf = logic.gaps(series.fail), gx = logic.gaps(series.fix);
    const skipped = f.skipped.some((n) => n > 0) ? ` The remedy skipped ${f.skipped.join(", ")} steps per seed.` : "";
    status.textContent =
      `${f.name}: ${label}, largest per seed: failure ${fmtAll(logic.peaks(series.fail))}; ` +
      `remedy ${fmtAll(logic.peaks(series.fix))}; healthy ${fmtAll(logic.peaks(series.healthy))}. ` +
      `Windows with inf/NaN per seed: failure ${gf.join(", ")}, remedy ${gx.join(", ")}. ` +
      `On the held-out loss the remedy ${f.verdict === "no difference" ? "made no difference" : f.verdict}.${skipped}`;
    Object.assign(status.dataset, { failure: f.name, signal: state.key, gapsFail: gf.join(","), gapsFix: gx.join(",") });
  };
  live.append(GF.controls(pick.el, signal.el), legend, chartBox, status);
  draw();
});
