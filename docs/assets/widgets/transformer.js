// Chapter 8: the gradient that reaches each block of a transformer at initialisation. Pick the
// depth, where the LayerNorm sits (pre-LN or post-LN), whether the residual projections start
// scaled by 1/sqrt(2L) and whether queries and keys are normalised (QK-norm); bars show the norm
// of dLoss/d(block input) relative to the last block's, measured at build time on
// gradflow_ref.transformer.Transformer (snippets/transformer.py).
// data: {depths: [L], log10: {QK-norm on|off: {norm: {init on|off: [[log10 ratio per block,
// block 1 first] per depth]}}}}
GF.register("transformer", (live, data) => {
  const { depths, log10 } = data;
  GF.logic.transformer = {
    /** Gradient norm at each block's input over block L's (block 1 first), as measured. */
    profile: (norm, init, depth, qk = false) =>
      log10[qk ? "on" : "off"][norm][init ? "on" : "off"][depths.indexOf(depth)].map((v) => 10 ** v),
    /** Block 1's gradient over block L's. */
    firstOverLast: (p) => p[0] / p[p.length - 1],
    /** Largest over smallest of a list of norms. */
    spread: (p) => Math.max(...p) / Math.min(...p),
  };
  const L = GF.logic.transformer;
  const chart = GF.chart({
    title: "Gradient norm reaching each block",
    height: 280,
    x: { min: 0.5, max: 48.5, label: "block (1 = next to the embeddings)" },
    y: { min: 0.1, max: 100, log: true, label: "gradient norm / last block's" },
  });
  const status = GF.status();
  const state = { norm: "pre", init: false, qk: false, depth: depths[depths.length - 1] };

  const draw = () => {
    const { norm, init, qk, depth } = state;
    const p = L.profile(norm, init, depth, qk);
    // one y range for every setting, so switching settings compares like with like
    const all = Object.values(log10).flatMap((byNorm) =>
      Object.values(byNorm).flatMap((byInit) => Object.values(byInit).flat(2)));
    const lo = Math.min(-1, Math.floor(Math.min(...all))), hi = Math.max(1, Math.ceil(Math.max(...all)));
    const ticks = [];
    for (let e = lo; e <= hi; e++) ticks.push(10 ** e);
    const xt = depth <= 12 ? [...Array(depth).keys()].map((k) => k + 1) : [1, ...[6, 12, 18, 24, 30, 36, 42, 48].filter((t) => t <= depth)];
    chart.axes({ x: { max: depth + 0.5, ticks: xt }, y: { min: 10 ** lo, max: 10 ** hi, ticks } });
    chart.clear();
    chart.line([[0.5, 1], [depth + 0.5, 1]], { color: "currentColor", width: 1, dash: "4 4" });
    const col = GF.color(norm === "pre" ? (init ? 0 : 1) : (init ? 2 : 3));
    chart.bars(p.map((v, i) => ({
      x0: i + 0.6, x1: i + 1.4, y: v, color: col,
      label: `block ${i + 1}: ${GF.fmt(v)} times the last block's gradient`,
    })));
    const r = L.firstOverLast(p);
    const name = `${norm}-LN, depth-scaled init ${init ? "on" : "off"}, QK-norm ${qk ? "on" : "off"}, ${depth} blocks`;
    chart.svg.setAttribute("aria-label",
      `Gradient norm per block, ${name}: block 1 receives ${GF.fmt(r)} times block ${depth}'s gradient.`);
    const rest = L.spread(p.slice(1));
    status.textContent = `${name}: block 1 receives ${GF.fmt(r)} times the gradient of block ${depth}; ` +
      `from block 2 to block ${depth} the largest is ${GF.fmt(rest)} times the smallest.`;
    Object.assign(status.dataset, {
      norm, init: String(init), qk: String(qk), depth: String(depth), block1: String(r), rest: String(rest),
    });
  };

  const norm = GF.select({
    label: "LayerNorm",
    options: [["pre", "pre-LN: x + f(LN(x))"], ["post", "post-LN: LN(x + f(x))"]],
    value: state.norm,
    onChange: (v) => { state.norm = v; draw(); },
  });
  const init = GF.toggle({
    label: "Depth-scaled init (std 0.02/√(2L))",
    checked: state.init,
    onChange: (v) => { state.init = v; draw(); },
  });
  const qk = GF.toggle({
    label: "QK-norm (LayerNorm on q and k)",
    checked: state.qk,
    onChange: (v) => { state.qk = v; draw(); },
  });
  const depth = GF.slider({
    label: "Blocks", values: depths, value: state.depth, format: (v) => String(v),
    onInput: (v) => { state.depth = v; draw(); },
  });
  live.append(GF.controls(norm.el, depth.el, init.el, qk.el), chart.svg, status);
  draw();
});
