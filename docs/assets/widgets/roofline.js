// Chapter 5b: roofline calculator. Pick a GPU, a math type and a matmul shape (or a preset);
// the chart draws that GPU's roofline on log axes and the matmul as a dot, the status gives its
// intensity, attainable TFLOP/s, time bound and bound type. The formulas run here, on
// GF.logic.roofline, and are tested against gradflow_ref.roofline.matmul_bound.
// data: {gpus: {name: {bandwidth (B/s), peaks: {dtype: FLOP/s}}}, dtypeBytes: {dtype: bytes},
//        presets: [{label, m, n, k}], start: {gpu, dtype, preset}}
GF.register("roofline", (live, data) => {
  GF.logic.roofline = {
    /** FLOPs, HBM bytes and intensity of C[M,N] = A[M,K] B[K,N], each matrix moved once. */
    matmul: (m, n, k, bytes) => {
      const flops = 2 * m * n * k, moved = (m * k + k * n + m * n) * bytes;
      return { flops, bytes: moved, intensity: flops / moved };
    },
    /** The roofline bound of a matmul on a GPU with `peak` FLOP/s and `bandwidth` B/s. */
    bound: (mm, peak, bandwidth) => {
      const computeS = mm.flops / peak, memoryS = mm.bytes / bandwidth;
      return {
        intensity: mm.intensity, ridge: peak / bandwidth,
        attainable: Math.min(peak, bandwidth * mm.intensity),
        computeS, memoryS, timeS: Math.max(computeS, memoryS),
        bound: memoryS > computeS ? "memory" : "compute",
      };
    },
  };
  const L = GF.logic.roofline;
  const LABEL = { bf16: "BF16", fp16: "FP16", tf32: "TF32", fp8: "FP8", fp64_tensor: "FP64 (tensor)" };
  const p0 = data.presets[data.start.preset];
  const state = { gpu: data.start.gpu, dtype: data.start.dtype, m: p0.m, n: p0.n, k: p0.k };

  const chart = GF.chart({
    title: "Roofline", height: 300,
    x: { min: 0.1, max: 1e5, log: true, label: "arithmetic intensity (FLOP per HBM byte)" },
    y: { min: 0.1, max: 1e4, log: true, label: "attainable TFLOP/s" },
  });
  const status = GF.status();
  const dtypeOptions = () => Object.keys(data.gpus[state.gpu].peaks).map((d) => [d, LABEL[d] || d]);
  const gpuSel = GF.select({
    label: "GPU", options: Object.keys(data.gpus).map((g) => [g, g]), value: state.gpu,
    onChange: (v) => {
      state.gpu = v;
      const keep = state.dtype in data.gpus[v].peaks;
      dtypeSel.input.replaceChildren(...dtypeOptions().map(([d, t]) => GF.h("option", { value: d, text: t })));
      if (!keep) state.dtype = "bf16";
      dtypeSel.set(state.dtype);
      draw();
    },
  });
  const dtypeSel = GF.select({ label: "Math", options: dtypeOptions(), value: state.dtype,
    onChange: (v) => { state.dtype = v; draw(); } });
  const presetSel = GF.select({
    label: "Preset", options: [["", "custom"], ...data.presets.map((p, i) => [String(i), p.label])],
    value: String(data.start.preset),
    onChange: (v) => {
      if (v === "") return;
      const p = data.presets[Number(v)];
      Object.assign(state, { m: p.m, n: p.n, k: p.k });
      dims.forEach((d) => d.inp.set(state[d.key]));
      draw();
    },
  });
  const dims = ["m", "n", "k"].map((key) => {
    const inp = GF.input({
      label: key.toUpperCase(), type: "number", value: state[key],
      attrs: { min: 1, max: 1048576, step: 1, inputmode: "numeric" },
      onInput: (v) => {
        const x = Math.round(Number(v));
        if (!Number.isFinite(x) || x < 1) return;
        state[key] = Math.min(1048576, x);
        presetSel.set("");
        draw();
      },
    });
    return { key, inp };
  });

  const draw = () => {
    const g = data.gpus[state.gpu], peak = g.peaks[state.dtype];
    const bytes = data.dtypeBytes[state.dtype];
    const b = L.bound(L.matmul(state.m, state.n, state.k, bytes), peak, g.bandwidth);
    chart.clear();
    const xs = [0.1, b.ridge, 1e5];
    chart.line(xs.map((x) => [x, Math.min(peak, g.bandwidth * x) / 1e12]), { color: GF.color(0), width: 2.5 });
    chart.line([[b.ridge, 0.1], [b.ridge, peak / 1e12]], { color: GF.color(0), width: 1, dash: "4 3" });
    const dot = GF.s("circle", { cx: chart.sx(Math.min(1e5, Math.max(0.1, b.intensity))),
      cy: chart.sy(b.attainable / 1e12), r: 6, style: `fill: ${GF.color(1)}; stroke: currentColor` });
    chart.plot.append(dot);
    const us = b.timeS * 1e6;
    const time = us >= 1000 ? `${GF.fmt(us / 1000, 3)} ms` : `${GF.fmt(us, 3)} µs`;
    status.textContent = `${state.gpu}, ${LABEL[state.dtype] || state.dtype} (${bytes} byte${bytes > 1 ? "s" : ""} per element), ` +
      `M=${state.m}, N=${state.n}, K=${state.k}: intensity ${GF.fmt(b.intensity, 4)} FLOP/byte against a ridge of ` +
      `${GF.fmt(b.ridge, 4)}; attainable ${GF.fmt(b.attainable / 1e12, 4)} of ${GF.fmt(peak / 1e12, 4)} TFLOP/s; ` +
      `at least ${time}; ${b.bound}-bound.`;
    chart.svg.setAttribute("aria-label", `Roofline of ${state.gpu} in ${LABEL[state.dtype]}: ridge at ${GF.fmt(b.ridge, 3)} FLOP/byte; ` +
      `the matmul sits at ${GF.fmt(b.intensity, 3)} FLOP/byte, ${b.bound}-bound.`);
    Object.assign(status.dataset, { intensity: String(b.intensity), attainable: String(b.attainable),
      time: String(b.timeS), bound: b.bound, ridge: String(b.ridge) });
  };
  GF.style("roofline", `.gf-roofline { min-width: 0; max-width: 100%; }
    .gf-roofline .gf-controls input[type="number"] { width: 6em; }
    .gf-roofline .gf-control { min-width: 0; max-width: 100%; }
    .gf-roofline .gf-controls select { max-width: 100%; min-width: 0; text-overflow: ellipsis; }`);
  live.append(GF.h("div", { class: "gf-roofline" },
    GF.controls(gpuSel.el, dtypeSel.el, presetSel.el),
    GF.controls(...dims.map((d) => d.inp.el)),
    chart.svg,
    GF.legend([["roofline", GF.color(0)], ["ridge point", GF.color(0), true], ["your matmul", GF.color(1)]]),
    status));
  draw();
});
