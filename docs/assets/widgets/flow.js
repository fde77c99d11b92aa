// Chapter 1: backpropagation layer by layer. Pick an activation (with its customary init), a
// depth and a multiplier on the weights; bars show the gradient norm reaching each layer's
// input, relative to the output's, measured at build time by gradflow_ref.flow.gradient_norms.
// data: {activations: [name], inits: [init], depths: [d], scales: [multiplier],
//        log10: {activation: [[[log10 norm ratio per layer, layer 1 first] per depth] per scale]}}
GF.register("flow", (live, data) => {
  const { activations, inits, depths, scales, log10 } = data;
  const ratio = (a, s, d) => log10[a][scales.indexOf(s)][depths.indexOf(d)].map((v) => 10 ** v);
  GF.logic.flow = {
    /** Norm ratios (layer 1 first) of one grid point, as measured at build time. */
    profile: ratio,
    /**
     * Each layer's factor ||g_in|| / ||g_out||: a layer's ratio over the next layer's, the
     * last layer's over the output's own (1). Same as gradflow_ref.flow.layer_factors.
     */
    factors: (rel) => rel.map((r, k) => r / (k + 1 < rel.length ? rel[k + 1] : 1)),
    /** Geometric mean of the factors: the product telescopes to layer 1's ratio. */
    meanFactor: (rel) => rel[0] ** (1 / rel.length),
  };
  const verdict = (r) => (r < 0.1 ? "vanishes" : r > 10 ? "explodes" : "stays within a factor of ten");

  const chart = GF.chart({
    title: "Gradient norm reaching each layer",
    height: 280,
    x: { min: 0.5, max: 10.5, label: "layer (1 = closest to the input)" },
    y: { min: 1e-3, max: 10, log: true, label: "gradient norm / output's" },
  });
  const status = GF.status();
  const state = { a: "relu", s: 1, d: 20 };

  const draw = () => {
    const { a, s, d } = state;
    const rel = ratio(a, s, d);
    const f = GF.logic.flow.factors(rel);
    // one y range per activation and multiplier, so the depth slider grows the chain in place
    const all = log10[a][scales.indexOf(s)].flat();
    const lo = Math.min(-1, Math.floor(Math.min(...all))), hi = Math.max(1, Math.ceil(Math.max(...all)));
    // decade ticks at multiples of a round step, so 1 (no change) is always one of them
    const step = [1, 2, 5, 10, 20].find((t) => (hi - lo) / t <= 6) || 50;
    const ticks = [];
    for (let e = Math.ceil(lo / step) * step; e <= hi; e += step) ticks.push(10 ** e);
    const xt = d <= 10 ? [...Array(d).keys()].map((k) => k + 1) : [1, ...[5, 10, 15, 20, 25, 30, 35, 40].filter((t) => t <= d)];
    chart.axes({ x: { max: d + 0.5, ticks: xt }, y: { min: 10 ** lo, max: 10 ** hi, ticks } });
    chart.clear();
    chart.line([[0.5, 1], [d + 0.5, 1]], { color: "currentColor", width: 1, dash: "4 4" });
    const col = rel[0] < 0.1 ? GF.color(0) : rel[0] > 10 ? GF.color(1) : GF.color(2);
    chart.bars(rel.map((v, i) => ({
      x0: i + 0.6, x1: i + 1.4, y: v, color: col,
      label: `layer ${i + 1}: ${GF.fmt(v)} of the output's gradient; this layer multiplies it by ${GF.fmt(f[i])}`,
    })));
    const name = `${a} (${inits[activations.indexOf(a)]} init)`;
    const mean = GF.logic.flow.meanFactor(rel);
    chart.svg.setAttribute("aria-label",
      `Gradient norm per layer, ${name}, ${d} layers, weights ×${s}: layer ${d} receives ` +
      `${GF.fmt(rel[d - 1])} of the output's gradient, layer 1 ${GF.fmt(rel[0])}.`);
    status.textContent =
      `${name}, ${d} layers, weights ×${GF.fmt(s)}: layer 1 receives ${GF.fmt(rel[0])} of the ` +
      `output's gradient, an average factor of ${GF.fmt(mean)} per layer; the gradient ${verdict(rel[0])}.`;
    Object.assign(status.dataset, { activation: a, depth: String(d), scale: String(s), layer1: String(rel[0]), mean: String(mean) });
  };

  const pick = GF.select({
    label: "Activation",
    options: activations.map((a, i) => [a, `${a} (${inits[i]} init)`]),
    value: state.a,
    onChange: (v) => { state.a = v; draw(); },
  });
  const depth = GF.slider({
    label: "Layers", values: depths, value: state.d, format: (v) => String(v),
    onInput: (v) => { state.d = v; draw(); },
  });
  const scale = GF.slider({
    label: "Weights ×", values: scales, value: state.s, format: (v) => GF.fmt(v),
    onInput: (v) => { state.s = v; draw(); },
  });
  live.append(GF.controls(pick.el, depth.el, scale.el), chart.svg, status);
  draw();
});
