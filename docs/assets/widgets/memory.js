// Chapter 7: training-memory calculator. GF.logic.memory.breakdown(cfg) is a port of
// gradflow_ref.memory.training_memory (same field names as MemoryConfig, dtypes as strings such as
// "bfloat16", null for no master copy); it counts in BigInt so every byte is exact, and the
// browser tests compare it with gradflow_ref on sampled configurations.
// data: {presets: [{name, n_params, layout_params, n_layers, hidden, n_heads, seq_len, vocab}],
//        precisions: {key: {label, param_dtype, master_dtype, grad_dtype, state_dtype,
//        activation_dtype}}, itemsize: {dtype: bytes}, config: MemoryConfig's defaults,
//        states: {optimizer: states per parameter}, defaults: {preset, precision, ...},
//        sharding?: {stages: {stage: [sharded components]}, gpus: [[name, memory bytes]],
//        defaults: {gpus, stage, gpu}}}
// With `sharding`, GF.logic.memory.sharded(m, n, stage) is gradflow_ref.sharding.sharded_memory:
// one GPU's share of N data-parallel GPUs under ZeRO stage 0-3, and the status says whether it
// fits the chosen GPU.
GF.register("memory", (live, data) => {
  const { presets, precisions, itemsize, states, defaults } = data;
  const B = BigInt;
  const MODES = ["none", "selective", "full"];
  const INTS = ["n_layers", "hidden", "n_heads", "seq_len", "micro_batch", "vocab", "mask_bytes"];

  const check = (cfg) => {
    for (const name of INTS) {
      const v = cfg[name];
      if (!Number.isSafeInteger(v) || v < 1) throw new Error(`MemoryConfig: \`${name}\` must be a positive int, got ${v}.`);
    }
    if (cfg.hidden % cfg.n_heads) throw new Error(`MemoryConfig: \`hidden\` (${cfg.hidden}) must be divisible by \`n_heads\` (${cfg.n_heads}); pick a head count that divides it.`);
    if (!(cfg.optimizer in states)) throw new Error(`MemoryConfig: \`optimizer\` must be one of ${Object.keys(states).sort().join(", ")}, got ${cfg.optimizer}.`);
    if (!MODES.includes(cfg.checkpointing)) throw new Error(`MemoryConfig: \`checkpointing\` must be one of ${MODES.join(", ")}, got ${cfg.checkpointing}.`);
    if (cfg.n_params !== null && !(Number.isSafeInteger(cfg.n_params) && cfg.n_params >= 1)) throw new Error(`MemoryConfig: \`n_params\` must be positive or None, got ${cfg.n_params}.`);
  };
  const size = (dtype) => {
    if (!(dtype in itemsize)) throw new Error(`memory: unknown dtype ${dtype}.`);
    return B(itemsize[dtype]);
  };
  const full = (cfg) => {
    const c = { ...data.config, ...cfg };
    check(c);
    return c;
  };
  // L(12h^2 + 13h) + vh + sh + 2h, or n_params when given (gradflow_ref.memory.parameter_count)
  const parameterCount = (cfg) => {
    const c = full(cfg);
    if (c.n_params !== null) return B(c.n_params);
    const h = B(c.hidden);
    return B(c.n_layers) * (12n * h * h + 13n * h) + B(c.vocab) * h + B(c.seq_len) * h + 2n * h;
  };
  // Korthikanti et al. 2022: 16sbh values + (1 + dropout) as^2b scores, masks of dropout
  const layerActivationBytes = (cfg, storesScores = null) => {
    const c = full(cfg);
    const [s, b, h, a] = [B(c.seq_len), B(c.micro_batch), B(c.hidden), B(c.n_heads)];
    const scores = (storesScores === null ? c.stores_scores : storesScores) ? 1n : 0n;
    const drop = c.dropout ? 1n : 0n;
    const sbh = s * b * h, ass = a * s * s * b * scores;
    const values = 16n * sbh + (1n + drop) * ass;
    const masks = drop * (2n * sbh + ass);
    return values * size(c.activation_dtype) + masks * B(c.mask_bytes);
  };
  const activationBytes = (cfg, mode = null) => {
    const c = full(cfg);
    const m = mode === null ? c.checkpointing : mode;
    const sb = B(c.seq_len) * B(c.micro_batch), h = B(c.hidden), item = size(c.activation_dtype);
    const outside = (c.dropout ? 1n : 0n) * sb * h * B(c.mask_bytes) + 2n * sb * h * item + 4n * sb * B(c.vocab);
    let layers;
    if (m === "none") layers = B(c.n_layers) * layerActivationBytes(c);
    else if (m === "selective") layers = B(c.n_layers) * layerActivationBytes(c, false);
    else layers = B(c.n_layers) * sb * h * item + layerActivationBytes(c);
    return layers + outside;
  };
  /** Bytes per component, as gradflow_ref.memory.training_memory(cfg).as_dict(). */
  const breakdown = (cfg) => {
    const c = full(cfg);
    const p = parameterCount(c);
    const out = {
      weights: p * size(c.param_dtype),
      master_weights: c.master_dtype === null ? 0n : p * size(c.master_dtype),
      gradients: p * size(c.grad_dtype),
      optimizer_states: p * B(states[c.optimizer]) * size(c.state_dtype),
      activations: activationBytes(c),
    };
    out.total = Object.values(out).reduce((x, y) => x + y, 0n);
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Number(v)]));
  };
  const SH = data.sharding;
  /** One GPU's bytes under ZeRO `stage` on `n` GPUs (sharding.sharded_memory): ceil(part / n). */
  const sharded = (m, n, stage) => {
    if (!SH) throw new Error("memory: no sharding data");
    if (!Number.isSafeInteger(n) || n < 1) throw new Error(`sharded_memory: \`n_gpus\` must be a positive int, got ${n}.`);
    const parts = SH.stages[stage];
    if (!parts) throw new Error(`sharded_memory: \`stage\` must be 0, 1, 2 or 3, got ${stage}.`);
    const out = {};
    for (const k of ["weights", "master_weights", "gradients", "optimizer_states", "activations"]) {
      const v = B(m[k]);
      out[k] = parts.includes(k) ? (v + B(n) - 1n) / B(n) : v;
    }
    out.total = Object.values(out).reduce((x, y) => x + y, 0n);
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Number(v)]));
  };
  GF.logic.memory = {
    breakdown,
    sharded,
    parameterCount: (cfg) => Number(parameterCount(cfg)),
    activationBytes: (cfg, mode = null) => Number(activationBytes(cfg, mode)),
  };

  GF.style("memory", `
.gf-memory__shape .gf-control input[type="number"] { width: 6.5rem; }
[data-gf-widget="memory"] .gf-control { flex-wrap: wrap; max-width: 100%; }
[data-gf-widget="memory"] select { max-width: 100%; }
.gf-memory__scroll { overflow-x: auto; max-width: 100%; }
.md-typeset .gf-memory__table td:nth-child(n+3), .md-typeset .gf-memory__table th:nth-child(n+3) { text-align: right; }
.gf-memory__table tr:last-child td { font-weight: 700; }
.md-typeset .gf-memory__table td, .md-typeset .gf-memory__table th { padding: 0.3em 0.7em; }
.md-typeset [data-gf-widget="memory"] .gf-legend { display: flex; }
.gf-memory__error { color: var(--md-typeset-del-color, currentColor); font-weight: 700; }
`);
  const GB = 1e9;
  const COMPONENTS = [
    ["weights", "Weights", "param_dtype"],
    ["master_weights", "Master weights", "master_dtype"],
    ["gradients", "Gradients", "grad_dtype"],
    ["optimizer_states", "Optimizer states", "state_dtype"],
    ["activations", "Activations", "activation_dtype"],
  ];
  const gb = (b) => `${(b / GB).toLocaleString("en-US", { maximumFractionDigits: b < 10 * GB ? 2 : 1, minimumFractionDigits: b < 10 * GB ? 2 : 1 })} GB`;
  const count = (n) => (n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : `${(n / 1e6).toFixed(1)}M`);
  const byName = Object.fromEntries(presets.map((p) => [p.name, p]));

  const update = () => draw();
  const preset = GF.select({
    label: "Preset",
    options: [...presets.map((p) => [p.name, `${p.name} (${p.n_layers} layers, hidden ${p.hidden})`]), ["custom", "Custom shape"]],
    value: defaults.preset,
    onChange: (v) => applyPreset(v),
  });
  const precision = GF.select({
    label: "Precision",
    options: Object.entries(precisions).map(([k, v]) => [k, v.label]),
    value: defaults.precision,
    onChange: update,
  });
  const optimizer = GF.select({
    label: "Optimizer",
    options: [["adamw", "AdamW (2 states)"], ["adam", "Adam (2 states)"], ["sgd_momentum", "SGD with momentum (1 state)"], ["sgd", "SGD (no state)"]],
    value: defaults.optimizer,
    onChange: update,
  });
  const checkpointing = GF.select({
    label: "Checkpointing",
    options: [["none", "none"], ["selective", "selective (attention core)"], ["full", "full (every layer)"]],
    value: defaults.checkpointing,
    onChange: update,
  });
  const number = (label, value, onInput) =>
    GF.input({ label, type: "number", value, attrs: { min: 1, step: 1, inputmode: "numeric" }, onInput });
  const shapeEdited = () => {
    preset.set("custom");
    params.set("");
    draw();
  };
  const fields = {
    n_layers: number("Layers", "", shapeEdited),
    hidden: number("Hidden size", "", shapeEdited),
    n_heads: number("Heads", "", shapeEdited),
    vocab: number("Vocabulary", "", shapeEdited),
    seq_len: number("Sequence length", "", update),
    micro_batch: number("Micro-batch (sequences)", defaults.micro_batch, update),
  };
  const params = GF.input({ label: "Parameters (blank: count from the shape)", type: "number", value: "", attrs: { min: 1, step: 1, inputmode: "numeric" }, onInput: update });
  params.input.style.width = "9.5rem";
  const fused = GF.toggle({ label: "Fused attention (no s×s scores kept)", checked: !defaults.stores_scores, onChange: update });
  const dropout = GF.toggle({ label: "Dropout", checked: defaults.dropout, onChange: update });
  const gpus = SH && GF.input({ label: "Data-parallel GPUs", type: "number", value: SH.defaults.gpus, attrs: { min: 1, step: 1, inputmode: "numeric" }, onInput: update });
  const stage = SH && GF.select({
    label: "Sharding",
    options: [["0", "none (plain data parallel)"], ["1", "ZeRO-1: optimizer states"], ["2", "ZeRO-2: + gradients"], ["3", "ZeRO-3 / FSDP: + weights"]],
    value: String(SH.defaults.stage),
    onChange: update,
  });
  const card = SH && GF.select({ label: "GPU", options: SH.gpus.map(([name, bytes]) => [name, `${name} (${bytes / 1e9} GB)`]), value: SH.defaults.gpu, onChange: update });

  const chart = GF.chart({
    title: "Training memory by component",
    height: 120,
    margin: { l: 14, r: 18, t: 10 },
    x: { min: 0, max: 1, label: "GB (10^9 bytes)" },
    y: { min: 0, max: 1, ticks: [] },
  });
  const legend = GF.legend(COMPONENTS.map(([, label], i) => [label, GF.color(i)]));
  // scrolls sideways on a phone: focusable and named, so a keyboard can scroll it (axe)
  const tableBox = GF.h("div", { class: "gf-memory__scroll", tabindex: "0", role: "region", "aria-label": SH ? "Memory per GPU, by component" : "Memory by component" });
  const status = GF.status();

  const applyPreset = (name) => {
    const p = byName[name];
    if (p) {
      for (const k of ["n_layers", "hidden", "n_heads", "vocab", "seq_len"]) fields[k].set(p[k]);
      params.set(p.n_params);
    }
    draw();
  };

  const config = () => {
    const int = (s) => (String(s).trim() === "" ? NaN : Number(s));
    const cfg = { ...precisions[precision.value], optimizer: optimizer.value, checkpointing: checkpointing.value };
    delete cfg.label;
    for (const [k, f] of Object.entries(fields)) cfg[k] = int(f.value);
    cfg.n_params = String(params.value).trim() === "" ? null : int(params.value);
    cfg.stores_scores = !fused.value;
    cfg.dropout = dropout.value;
    cfg.mask_bytes = defaults.mask_bytes;
    return cfg;
  };

  const draw = () => {
    const cfg = config();
    let m;
    try {
      m = breakdown(cfg);
    } catch (err) {
      status.textContent = `Cannot compute: ${err.message.replace("MemoryConfig: ", "")}`;
      status.classList.add("gf-memory__error");
      status.dataset.error = "1";
      return;
    }
    status.classList.remove("gf-memory__error");
    delete status.dataset.error;
    let where = "";
    const whole = m;  // the whole model's bytes; m becomes one GPU's share below
    if (SH) {
      const n = Number(gpus.value), st = Number(stage.value);
      if (!Number.isSafeInteger(n) || n < 1) {
        status.textContent = "Cannot compute: the number of GPUs must be a whole number of at least 1.";
        status.classList.add("gf-memory__error");
        status.dataset.error = "1";
        return;
      }
      m = sharded(whole, n, st);
      const cap = SH.gpus.find(([name]) => name === card.value)[1];
      const fits = m.total <= cap;
      where = ` Per GPU, ${st ? `ZeRO-${st}${st === 3 ? " / FSDP" : ""}` : "without sharding"} on ${n} GPU${n === 1 ? "" : "s"}: ` +
        `${gb(m.total)}, which ${fits ? "fits" : "does not fit"} the ${card.value}'s ${gb(cap)}.`;
      Object.assign(status.dataset, { perGpu: String(m.total), fits: String(fits), stage: String(st), gpus: String(n) });
    }
    const p = Number(parameterCount(cfg));
    const layout = Number(parameterCount({ ...cfg, n_params: null }));
    params.input.placeholder = count(layout);
    chart.axes({ x: { min: 0, max: m.total / GB * 1.02 } });
    chart.clear();
    let x = 0;
    COMPONENTS.forEach(([key, label], i) => {
      const v = m[key] / GB;
      if (v > 0) {
        const r = GF.s("rect", { x: chart.sx(x), width: Math.max(0.5, chart.sx(x + v) - chart.sx(x)), y: chart.sy(0.85), height: chart.sy(0.15) - chart.sy(0.85), fill: GF.color(i) });
        r.append(GF.s("title", { text: `${label}: ${gb(m[key])}` }));
        chart.plot.append(r);
      }
      x += v;
    });
    const prec = precisions[precision.value];
    const rows = COMPONENTS.map(([key, label, field]) => {
      const cells = [label, prec[field] ?? "–", m[key].toLocaleString("en-US"), gb(m[key]), `${(100 * m[key] / m.total).toFixed(1)}%`];
      return cells;
    });
    rows.push(["Total", "", m.total.toLocaleString("en-US"), gb(m.total), "100%"]);
    const table = GF.table(["Component", "dtype", SH ? "Bytes per GPU" : "Bytes", SH ? "GB per GPU" : "GB", "Share"], rows);
    table.classList.add("gf-memory__table");
    table.querySelectorAll("tbody tr").forEach((tr, i) => { tr.dataset.component = i < COMPONENTS.length ? COMPONENTS[i][0] : "total"; tr.dataset.bytes = String(i < COMPONENTS.length ? m[COMPONENTS[i][0]] : m.total); });
    tableBox.replaceChildren(table);
    const state = whole.total - whole.activations;
    const name = preset.value === "custom" ? "Custom shape" : preset.value;
    const summary = `${name}, ${count(p)} parameters, ${prec.label}, ${optimizer.input.selectedOptions[0].text}, ` +
      `checkpointing ${checkpointing.value}: ${gb(state)} of model state (${(state / p).toFixed(state % p ? 1 : 0)} bytes per parameter) ` +
      `+ ${gb(whole.activations)} of activations for ${cfg.micro_batch} × ${cfg.seq_len} tokens = ${gb(whole.total)}.`;
    status.textContent = summary + where;
    status.dataset.total = String(whole.total);
    // with the data-parallel controls, the chart and the table show one GPU's share
    chart.svg.setAttribute("aria-label", `Stacked bar of training memory${SH ? " per GPU" : ""}: ${COMPONENTS.map(([k, l]) => `${l} ${gb(m[k])}`).join(", ")}; total ${gb(m.total)}.`);
  };

  live.append(
    GF.controls(preset.el, precision.el, optimizer.el, checkpointing.el),
    GF.h("div", { class: "gf-controls gf-memory__shape" }, Object.values(fields).map((f) => f.el), params.el),
    GF.controls(fused.el, dropout.el),
    SH ? GF.controls(gpus.el, stage.el, card.el) : null,
    chart.svg, legend, status, tableBox,
  );
  applyPreset(defaults.preset);
});
