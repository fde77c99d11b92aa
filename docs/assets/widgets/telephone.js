// Chapter 0: the telephone game. A slider picks the layer factor; bars show the gradient norm
// that reaches each of the 50 layers, measured at build time by
// gradflow_ref.telephone.network_gradients (orthogonal weights scaled by the factor).
// data: {factors: [f...], depth, grads: [[norm per layer, layer 1 first] per factor]}
GF.register("telephone", (live, data) => {
  const { factors, grads, depth } = data;
  // the exact gain of an orthogonal chain: layer k receives factor ** (depth - k + 1)
  GF.logic.telephone = { expected: (factor, layer) => factor ** (depth - layer + 1) };
  const all = grads.flat().filter((g) => g > 0);
  const ymin = 10 ** Math.floor(Math.log10(Math.min(...all)));
  const ymax = 10 ** Math.ceil(Math.log10(Math.max(...all)));
  const chart = GF.chart({
    title: "Gradient norm at each layer's input",
    height: 280,
    x: { min: 0.5, max: depth + 0.5, label: "layer (1 = closest to the input)", ticks: [1, 10, 20, 30, 40, 50] },
    y: { min: ymin, max: ymax, log: true, label: "gradient norm / output's" },
  });
  const status = GF.status();
  const draw = (factor) => {
    const g = grads[factors.indexOf(factor)];
    chart.clear();
    chart.line([[0.5, 1], [depth + 0.5, 1]], { color: "currentColor", width: 1, dash: "4 4" });
    chart.bars(
      g.map((v, i) => ({
        x0: i + 0.6, x1: i + 1.4, y: v,
        color: factor < 1 ? GF.color(0) : factor > 1 ? GF.color(1) : GF.color(2),
        label: `layer ${i + 1}: ${GF.fmt(v)}`,
      })),
    );
    chart.svg.setAttribute("aria-label",
      `Gradient norm per layer for factor ${factor}: layer 1 receives ${GF.fmt(g[0])}, layer ${depth} ${GF.fmt(g[depth - 1])}.`);
    const verdict = factor < 1 ? "vanishes" : factor > 1 ? "explodes" : "survives";
    status.textContent =
      `Factor ${factor.toFixed(2)}: layer 1 receives ${GF.fmt(g[0])} of the output's gradient ` +
      `(${factor.toFixed(2)}^${depth} = ${GF.fmt(GF.logic.telephone.expected(factor, 1))}); the message ${verdict}.`;
    status.dataset.layer1 = String(g[0]);
  };
  const slider = GF.slider({
    label: "Layer factor",
    values: factors,
    value: factors.reduce((a, b) => (Math.abs(b - 0.9) < Math.abs(a - 0.9) ? b : a)),
    format: (v) => v.toFixed(2),
    onInput: draw,
  });
  live.append(GF.controls(slider.el), chart.svg, status);
  draw(slider.value);
});
