// Chapter 5b: "break it". The same small model trained in FP32, FP16 without loss scaling,
// FP16 with GradScaler and BF16 (runs made at build time); a toggle per run shows or hides it
// on both panels: loss per step (log scale) and the fraction of zero or non-finite gradients.
// data: {runs: [{mode, loss: [per step], bad: [fraction per step]}]}
GF.register("break_it", (live, data) => {
  const runs = data.runs;
  const steps = runs[0].loss.length;
  const shown = runs.map(() => true);
  const losses = runs.flatMap((r) => r.loss).filter((v) => v !== null && v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.min(...losses)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...losses)));
  const top = GF.chart({ title: "Loss per step", height: 220,
    x: { min: 1, max: steps }, y: { min: lo, max: hi, log: true, label: "loss" } });
  const bottom = GF.chart({ title: "Fraction of zero or non-finite gradients per step", height: 200,
    x: { min: 1, max: steps, label: "step" }, y: { min: 0, max: 1, label: "bad gradients",
      format: (v) => `${Math.round(v * 100)}%` } });
  const dashes = [undefined, "6 4", "2 3", "8 3 2 3"];
  const status = GF.status();
  const draw = () => {
    top.clear();
    bottom.clear();
    runs.forEach((r, i) => {
      if (!shown[i]) return;
      const style = { color: GF.color(i), dash: dashes[i % 4], width: 2.2 };
      top.line(r.loss.map((v, s) => [s + 1, v]), style);
      bottom.line(r.bad.map((v, s) => [s + 1, v]), style);
    });
    const visible = runs.filter((_, i) => shown[i]);
    status.textContent = visible.length
      ? visible.map((r) => `${r.mode}: final loss ${GF.fmt(r.loss[steps - 1], 3)}, at worst ` +
          `${(Math.max(...r.bad) * 100).toFixed(1)}% zero or non-finite gradients`).join("; ") + "."
      : "No run shown: tick one above.";
    status.dataset.shown = visible.map((r) => r.mode).join("|");
  };
  const toggles = runs.map((r, i) => GF.toggle({ label: r.mode, checked: true,
    onChange: (v) => { shown[i] = v; draw(); } }));
  toggles.forEach((t, i) => t.el.querySelector("label").style.setProperty("border-bottom",
    `3px ${i ? "dashed" : "solid"} ${GF.color(i)}`));
  live.append(GF.controls(...toggles.map((t) => t.el)), top.svg, bottom.svg, status);
  draw();
});
