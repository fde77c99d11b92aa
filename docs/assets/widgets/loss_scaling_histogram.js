// Chapter 5: a loss scale of 2^k against FP16's range. The histogram of log2 |g| for the
// chapter's logit gradients late in training (computed at build time) shifts k units to the
// right; shaded zones mark where FP16 stores zero, subnormals and inf. The x axis always
// reaches past FP16's overflow limit, however small the gradients. The counts
// in the status line are torch's: (g * 2^k).half() == 0, subnormal, inf, for every k.
// data: {width (bin width in log2 units), first (index of the first bin: bin i holds
//   2^((i-1)*width) < |g| <= 2^(i*width)), counts, exponents: [k...], total,
//   fp16: {zero: [...], subnormal: [...], overflow: [...]} (torch, one per exponent),
//   sliver: {normal: [...], inf: [...]} (per exponent: gradients that FP16 rounds up across
//   the subnormal/normal or the finite/inf boundary), limits: {zero, normal, inf} (log2 units)}
GF.register("loss_scaling_histogram", (live, data) => {
  const { counts, exponents, total, fp16, limits } = data;
  // log2 of FP16's limits: |x| <= 2^-25 (half the smallest subnormal) rounds to zero, below
  // 2^-14 is subnormal, from 65520 (2^16 - 2^4) up rounds to inf
  const E = { zero: -25, normal: -14, top: 16 };
  /** The bins (x0, x1] of log2 |g| in a histogram {width, first, counts}. */
  const binsOf = (hist) => hist.counts.map((count, j) => ({ x0: (hist.first + j - 1) * hist.width, x1: (hist.first + j) * hist.width, count }));
  GF.logic.loss_scaling_histogram = {
    /** The bins of |g| * 2^k: multiplying by a power of two adds k to every log2 exactly. */
    shift: (hist, k) => binsOf(hist).map((b) => ({ x0: b.x0 + k, x1: b.x1 + k, count: b.count })),
    /** FP16's zone of a shifted bin (x0, x1]; bin edges and the zero/normal limits are integers. */
    zone: (x0, x1) => (x1 <= E.zero ? "zero" : x1 <= E.normal ? "subnormal" : x0 >= E.top ? "overflow" : "normal"),
    /**
     * Counts of FP16 zeros, subnormals and infs at scale 2^k, from a histogram {width, first,
     * counts, exponents, sliver} alone: |x| <= 2^-25 rounds to zero and 2^-25 < |x| <= 2^-14 is
     * subnormal, except the sliver [2^-14 - 2^-25, 2^-14] that rounds up to the smallest normal;
     * |x| > 2^16 is inf, and so is the sliver [65520, 65536] that rounds up to 2^16.
     */
    counts: (hist, k) => {
      const i = hist.exponents.indexOf(k);
      const sum = (keep) => GF.logic.loss_scaling_histogram.shift(hist, k).filter(keep).reduce((s, b) => s + b.count, 0);
      const zero = sum((b) => b.x1 <= E.zero);
      return {
        zero,
        subnormal: sum((b) => b.x1 <= E.normal) - zero - hist.sliver.normal[i],
        overflow: sum((b) => b.x0 >= E.top) + hist.sliver.inf[i],
      };
    },
  };
  const L = GF.logic.loss_scaling_histogram;
  const colours = { zero: GF.color(1), subnormal: GF.color(4), normal: GF.color(0), overflow: GF.color(3) };
  const names = { zero: "rounds to zero", subnormal: "subnormal (fewer bits)", normal: "normal", overflow: "overflows to inf" };
  const bins = binsOf(data);
  const xmin = Math.min(Math.floor(bins[0].x0), Math.floor(limits.zero)) - 4;
  const xmax = Math.max(Math.ceil(bins[bins.length - 1].x1) + exponents[exponents.length - 1], Math.ceil(limits.inf)) + 2;
  const ymax = 10 ** Math.ceil(Math.log10(Math.max(...counts)));
  const chart = GF.chart({
    title: "Histogram of log2 of the scaled gradients",
    height: 280,
    x: { min: xmin, max: xmax, label: "log2 |gradient × scale|", ticks: [-50, -40, -30, -25, -14, 0, 16].filter((t) => t > xmin && t < xmax) },
    y: { min: 0.7, max: ymax, log: true, label: "gradients per bin" },
  });
  const zones = GF.s("g", {});
  chart.svg.insertBefore(zones, chart.plot);
  for (const [name, a, b] of [["zero", xmin, limits.zero], ["subnormal", limits.zero, limits.normal], ["overflow", limits.inf, xmax]]) {
    zones.append(GF.s("rect", { x: chart.sx(a), width: chart.sx(b) - chart.sx(a), y: chart.sy(ymax), height: chart.sy(0.7) - chart.sy(ymax), fill: colours[name], "fill-opacity": 0.14 }));
  }
  const status = GF.status();
  const pct = (c) => `${((100 * c) / total).toFixed(3)}%`;
  const draw = (k) => {
    const i = exponents.indexOf(k);
    chart.clear();
    chart.bars(L.shift(data, k).filter((b) => b.count > 0).map((b) => {
      const zone = L.zone(b.x0, b.x1);
      return { ...b, y: b.count, color: colours[zone], label: `${b.count} gradients with log2 |g × 2^${k}| in (${b.x0}, ${b.x1}]: ${names[zone]}` };
    }));
    if (k) {
      // the unscaled histogram as an outline, to compare
      const pts = [];
      for (const b of bins) if (b.count > 0) pts.push([b.x0, b.count], [b.x1, b.count]);
      chart.line(pts, { width: 1, dash: "3 3" });
    }
    const c = { zero: fp16.zero[i], subnormal: fp16.subnormal[i], overflow: fp16.overflow[i] };
    const summary =
      `Scale 2^${k} = ${2 ** k}: of ${total.toLocaleString("en")} nonzero gradients, FP16 rounds ${c.zero} (${pct(c.zero)}) ` +
      `to zero, stores ${c.subnormal} (${pct(c.subnormal)}) as subnormals and overflows ${c.overflow} (${pct(c.overflow)}) to inf.`;
    status.textContent = summary;
    Object.assign(status.dataset, { scale: String(k), zero: String(c.zero), subnormal: String(c.subnormal), overflow: String(c.overflow) });
    chart.svg.setAttribute("aria-label", `Histogram of log2 |gradient × 2^${k}| against FP16's zones. ${summary}`);
  };
  const slider = GF.slider({
    label: "Loss scale",
    values: exponents,
    value: exponents[0],
    format: (k) => `2^${k} = ${(2 ** k).toLocaleString("en")}`,
    onInput: draw,
  });
  const legend = GF.legend([
    [names.zero, colours.zero], [names.subnormal, colours.subnormal], [names.normal, colours.normal],
    [names.overflow, colours.overflow], ["unscaled", "currentColor", true],
  ]);
  live.append(GF.controls(slider.el), chart.svg, legend, status);
  draw(slider.value);
});
