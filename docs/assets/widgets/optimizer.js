// Chapter 9: add an update u to a BF16 weight w, again and again, with four ways of storing the
// result: round to nearest (what w += u does), stochastic rounding, Kahan-compensated summation
// and an FP32 master copy. The arithmetic runs here, on GF.logic.optimizer, and is tested
// against gradflow_ref.optimizer (FP32 sums, then BF16 rounding, bit for bit).
// data: {weights: [w], updates: [u], start, update, steps, methods: [name], labels: {name: text}}
GF.register("optimizer", (live, data) => {
  const buf = new DataView(new ArrayBuffer(4));
  const f32 = Math.fround;
  const bitsOf = (x) => { buf.setFloat32(0, x); return buf.getInt32(0); };
  const fromBits = (b) => { buf.setInt32(0, b); return buf.getFloat32(0); };
  /** Round a float32 value to the nearest BF16 value, ties to even (torch's .to(bfloat16)). */
  const bf16 = (x) => {
    x = f32(x);
    if (!Number.isFinite(x)) return x;
    const b = bitsOf(x);
    const lsb = (b >>> 16) & 1;
    return fromBits(((b + 0x7fff + lsb) | 0) & -65536);
  };
  /** Stochastic rounding with 16 random bits `noise` (0..65535): gradflow_ref's bit trick. */
  const bf16Stochastic = (x, noise) => {
    x = f32(x);
    if (!Number.isFinite(x)) return x;
    return fromBits(((bitsOf(x) + noise) | 0) & -65536);
  };
  // a small seeded generator (mulberry32) for the random bits: reproducible in the browser
  const rng = (seed) => () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) >>> 16;
  };
  /** The weight after each of `steps` additions of `update`: gradflow_ref.optimizer.trajectory. */
  const trajectory = (start, update, steps, method, seed = 1) => {
    const u = f32(update), next = rng(seed);
    let w = bf16(start), comp = 0, master = w;
    const out = [w];
    for (let i = 0; i < steps; i++) {
      if (method === "nearest") w = bf16(f32(w + u));
      else if (method === "stochastic") w = bf16Stochastic(f32(w + u), next());
      else if (method === "kahan") {
        const y = f32(u + comp), t = bf16(f32(w + y));
        comp = bf16(f32(y - f32(t - w)));
        w = t;
      } else if (method === "master") { master = f32(master + u); w = bf16(master); }
      else throw new Error(`unknown method ${method}`);
      out.push(w);
    }
    return out;
  };
  GF.logic.optimizer = { bf16, bf16Stochastic, trajectory };

  const colors = { nearest: GF.color(1), stochastic: GF.color(3), kahan: GF.color(2), master: GF.color(0) };
  const state = { w: data.start, u: data.update };
  const chart = GF.chart({
    title: "A BF16 weight after each step",
    height: 280,
    x: { min: 0, max: data.steps, label: "step" },
    y: { min: 0, max: 1, label: "weight" },
  });
  const status = GF.status();
  const legend = GF.legend([["exact sum", "currentColor", true], ...data.methods.map((m) => [data.labels[m], colors[m]])]);

  const draw = () => {
    const { w, u } = state, n = data.steps;
    const paths = Object.fromEntries(data.methods.map((m) => [m, trajectory(w, u, n, m)]));
    const exact = bf16(w) + n * f32(u);
    const all = [bf16(w), exact, ...Object.values(paths).flat()];
    let lo = Math.min(...all), hi = Math.max(...all);
    if (hi - lo < 1e-12) { lo -= Math.abs(lo) * 1e-3 + 1e-9; hi += Math.abs(hi) * 1e-3 + 1e-9; }
    chart.axes({ y: { min: lo, max: hi, format: (v) => GF.fmt(v, 4) } });
    chart.clear();
    chart.line([[0, bf16(w)], [n, exact]], { color: "currentColor", width: 1, dash: "5 4" });
    const every = Math.max(1, Math.floor(n / 200));
    for (const m of data.methods) {
      chart.line(paths[m].filter((_, i) => i % every === 0 || i === n).map((v, i) => [Math.min(n, i * every), v]), { color: colors[m] });
    }
    const finals = data.methods.map((m) => `${data.labels[m]} ${GF.fmt(paths[m][n], 6)}`).join("; ");
    const spacing = Math.abs(bf16(w) - fromBits((bitsOf(bf16(w)) + 65536) | 0));
    chart.svg.setAttribute("aria-label", `A BF16 weight of ${GF.fmt(w)} plus ${GF.fmt(u)} per step for ${n} steps. ${finals}.`);
    status.textContent = `Weight ${GF.fmt(w)} (BF16 spacing above it ${GF.fmt(spacing)}), update ${GF.fmt(u)} ` +
      `(${GF.fmt(u / spacing, 3)} of a spacing). After ${n} steps the exact sum is ${GF.fmt(exact, 6)}: ${finals}.`;
    Object.assign(status.dataset, {
      weight: String(w), update: String(u),
      ...Object.fromEntries(data.methods.map((m) => [m, String(paths[m][n])])),
    });
  };

  const weight = GF.slider({ label: "Weight", values: data.weights, value: state.w, format: (v) => GF.fmt(v),
    onInput: (v) => { state.w = v; draw(); } });
  const update = GF.slider({ label: "Update per step", values: data.updates, value: state.u, format: (v) => GF.fmt(v),
    onInput: (v) => { state.u = v; draw(); } });
  live.append(GF.controls(weight.el, update.el), chart.svg, legend, status);
  draw();
});
