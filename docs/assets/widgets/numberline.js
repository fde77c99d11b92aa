// Chapter 4: what FP32, FP16, BF16 and FP8 (E4M3, E5M2) store for a value. A log-spaced slider
// (or a typed number) sets the value; a band chart shows where it sits in each format's range
// (subnormal band faint), one number line per format shows the representable values around it
// and the one it rounds to, and a table gives the stored value, relative error and spacing.
// The rounding runs here, on GF.logic.precision (round, classify, bits, neighbours, ...), and the
// browser tests hold it against torch's casts and gradflow_ref.precision with exact equality.
// data: {formats: [gradflow_ref.precision.FORMATS fields, + torch's NaN code], lo, hi (log10 |x| of
//        the slider's ends), start (the first value)}
(() => {
  GF.register("numberline", (live, data) => {
    const P = (GF.logic.precision ??= GF.precisionLogic(data.formats));
    const formats = data.formats;
    const narrow = window.innerWidth < 600;

    GF.style("numberline", `
      .gf-nl__rows { width: 100%; height: auto; display: block; color: var(--md-default-fg-color); }
      .gf-nl__rows text { fill: currentColor; font-size: ${narrow ? 14 : 12}px; }
      .gf-nl__rows .gf-nl__cell { fill: currentColor; fill-opacity: 0.1; }
      .gf-nl .gf-table td, .gf-nl .gf-table th { padding: 0.15em 0.5em; white-space: nowrap; text-align: left; }
      .gf-nl .gf-table td:nth-child(n+2) { font-variant-numeric: tabular-nums; }
      .gf-nl__table { overflow-x: auto; }
    `);

    // --- controls: log10 |x| slider, sign, typed value ---
    const state = { x: 0 };
    const nice = (e, neg) => (neg ? -1 : 1) * Number((10 ** e).toPrecision(3));
    const sign = GF.toggle({
      label: "Negative",
      onChange: () => { setValue(-state.x); typed.set(GF.fmt(state.x, 3)); slider.set(Number(slider.input.value)); },
    });
    const slider = GF.slider({
      label: "Value", min: data.lo, max: data.hi, step: 0.05,
      value: Math.round(Math.log10(Math.abs(data.start)) / 0.05) * 0.05,
      format: (e) => GF.fmt(nice(e, sign.value), 3),
      onInput: (e) => { setValue(nice(e, sign.value)); typed.set(GF.fmt(state.x, 3)); },
    });
    const typed = GF.input({
      label: "or type one", attrs: { inputmode: "decimal", spellcheck: "false", autocomplete: "off", size: 12 },
      onInput: (text) => {
        const x = parse(text);
        typed.input.setAttribute("aria-invalid", String(x === null));
        if (x === null) {
          status.textContent = `“${text}” is not a number; type one such as 3e-5, -65520 or 2^-24.`;
          return;
        }
        sign.set(x < 0 || Object.is(x, -0));
        if (x !== 0 && Number.isFinite(x)) {
          const e = Math.log10(Math.abs(x));
          if (e >= data.lo && e <= data.hi) slider.input.value = String(Math.round(e / 0.05) * 0.05);
        }
        setValue(x);
      },
    });

    // --- overview: each format's range on a log axis ---
    const overview = GF.chart({
      title: "Ranges of the formats",
      height: 200,
      x: { min: 1e-46, max: 1e39, log: true, label: "magnitude (log scale); faint band: subnormal",
        ticks: [1e-45, 1e-38, 1e-24, 1e-8, 1, 1e5, 1e38], format: (v) => (v === 1 ? "1" : `1e${Math.round(Math.log10(v))}`) },
      y: { min: 0, max: formats.length, ticks: [] },
      margin: { l: 70 },
    });
    formats.forEach((f, i) => {
      const y0 = overview.sy(formats.length - i - 0.2), y1 = overview.sy(formats.length - i - 0.8);
      overview.svg.append(
        GF.s("rect", { x: overview.sx(f.min_subnormal), width: overview.sx(f.min_normal) - overview.sx(f.min_subnormal),
          y: y0, height: y1 - y0, fill: GF.color(i), "fill-opacity": 0.35 }),
        GF.s("rect", { x: overview.sx(f.min_normal), width: overview.sx(f.max) - overview.sx(f.min_normal),
          y: y0, height: y1 - y0, fill: GF.color(i) }),
        GF.s("text", { x: overview.margin.l - 6, y: (y0 + y1) / 2 + 4, "text-anchor": "end", text: f.label }),
      );
    });

    // --- one number line per format, zoomed to a few of its own spacings around x ---
    const W = narrow ? 360 : 640, ROW = narrow ? 50 : 46, L0 = narrow ? 86 : 78, L1 = W - 12;
    const rows = GF.s("svg", { viewBox: `0 0 ${W} ${ROW * formats.length + 6}`, class: "gf-nl__rows", role: "img" });
    const OUTCOME = {
      zero: ["zero, exact", 2], normal: ["normal", 2], subnormal: ["subnormal", 4],
      underflow: ["rounds to 0", 1], overflow: ["overflow", 1], inf: ["infinite", 1], nan: ["NaN", 1],
    };
    const outcome = (f, x, v) => {
      const cls = P.classify(f.name, x);
      if (cls === "overflow") return [f.saturates ? `overflow, saturates to ${GF.fmt(v, 4)}` : `overflow to ${GF.fmt(v)}`, 1, cls];
      return [...OUTCOME[cls], cls];
    };
    const spacing = (name, t) => {
      const a = Math.abs(t), up = P.nextUp(name, a);
      return up > a ? up - a : a - P.nextDown(name, a);
    };
    const digitsFor = (t, u) => Math.min(10, Math.max(2, Math.ceil(Math.log10(Math.abs(t) / u || 1)) + 2));
    const drawRow = (f, i, x) => {
      const g = GF.s("g", { transform: `translate(0, ${i * ROW})` });
      const v = P.round(f.name, x), [word, col, cls] = outcome(f, x, v);
      // centre on x, or on the largest value when x is beyond the range
      const c = cls === "overflow" || cls === "inf" ? Math.sign(x) * f.max : cls === "nan" ? 0 : x;
      const t = P.round(f.name, c), u = spacing(f.name, t);
      const lo = c - 3.5 * u, hi = c + 3.5 * u;
      const X = (z) => L0 + ((z - lo) / (hi - lo)) * (L1 - L0);
      const yl = 22;
      g.append(GF.s("text", { x: 4, y: yl + 4, text: f.label, "font-weight": 700 }));
      g.append(GF.s("line", { x1: L0, x2: L1, y1: yl, y2: yl, stroke: "currentColor", "stroke-opacity": 0.5 }));
      const ticks = [t];
      for (let w = t, k = 0; k < 8; k++) { const d = P.nextDown(f.name, w); if (d === w || d < lo) break; ticks.push((w = d)); }
      for (let w = t, k = 0; k < 8; k++) { const d = P.nextUp(f.name, w); if (d === w || d > hi) break; ticks.push((w = d)); }
      if (Number.isFinite(v)) {
        // the values that round to v: halfway to each neighbour
        const below = P.nextDown(f.name, v), above = P.nextUp(f.name, v);
        const a = below < v ? (below + v) / 2 : v, b = above > v ? (above + v) / 2 : v;
        if (X(b) > L0 && X(a) < L1) {
          const xa = Math.max(L0, X(a)), xb = Math.min(L1, X(b));
          g.append(GF.s("rect", { class: "gf-nl__cell", x: xa, width: Math.max(1, xb - xa), y: yl - 9, height: 18 }));
        }
      }
      for (const z of ticks) g.append(GF.s("line", { x1: X(z), x2: X(z), y1: yl - 7, y2: yl + 7, stroke: "currentColor" }));
      if (Number.isFinite(v) && X(v) >= L0 - 0.5 && X(v) <= L1 + 0.5) {
        g.append(GF.s("circle", { cx: X(v), cy: yl, r: 5, fill: GF.color(col) }));
        g.append(GF.s("text", { x: X(v), y: yl + 20, "text-anchor": "middle", text: GF.fmt(v, digitsFor(v, u)) }));
      }
      if (Number.isFinite(x)) {
        const xp = X(x);
        const inside = xp >= L0 && xp <= L1;
        const px = Math.min(L1, Math.max(L0, xp));
        g.append(GF.s("polygon", { points: `${px - 5},${yl - 15} ${px + 5},${yl - 15} ${px},${yl - 8}`, fill: "currentColor" }));
        if (!inside) g.append(GF.s("text", { x: px + (xp > L1 ? -8 : 8), y: yl - 9, "text-anchor": xp > L1 ? "end" : "start", text: `x ${xp > L1 ? "→" : "←"}` }));
      }
      g.append(GF.s("text", { x: L1, y: yl + 20, "text-anchor": "end", "fill-opacity": 0.8,
        text: narrow ? `Δ ${GF.fmt(u, 3)}` : `spacing ${GF.fmt(u, 3)} · ${word}` }));
      return g;
    };

    const tableBox = GF.h("div", { class: "gf-nl__table", tabindex: 0, role: "region", "aria-label": "What each format stores" });
    const status = GF.status();
    const parse = GF.parseNumber;

    const setValue = (x) => {
      state.x = x;
      const readout = slider.el.querySelector("output");
      readout.textContent = GF.fmt(x, 3);
      slider.input.setAttribute("aria-valuetext", readout.textContent);
      const marks = overview.plot;
      marks.replaceChildren();
      const a = Math.abs(x);
      if (a > 0 && Number.isFinite(a)) {
        const X = overview.sx(Math.min(Math.max(a, 1e-46), 1e39));
        marks.append(GF.s("line", { x1: X, x2: X, y1: overview.margin.t, y2: overview.H - overview.margin.b,
          stroke: "currentColor", "stroke-width": 2 }));
      }
      rows.replaceChildren(...formats.map((f, i) => drawRow(f, i, x)));
      const rowsData = formats.map((f) => {
        const v = P.round(f.name, x), [word, , cls] = outcome(f, x, v);
        const err = x === 0 || !Number.isFinite(x) ? (Object.is(v, x) || v === x ? 0 : NaN) : Math.abs(v - x) / Math.abs(x);
        const u = Number.isFinite(v) ? spacing(f.name, v) : NaN;
        return { f, v, cls, word, err, u };
      });
      tableBox.replaceChildren(GF.table(
        ["Format", "Stores", "Relative error", "Spacing there", "What happens"],
        rowsData.map((r) => [r.f.label, GF.fmt(r.v, 8), r.err === 0 ? "0 (exact)" : GF.fmt(r.err, 2),
          GF.fmt(r.u, 3), r.word]),
      ));
      const groups = {};
      for (const r of rowsData) (groups[r.cls] ??= []).push(r.f.label);
      const say = { normal: "is a normal number in", subnormal: "is subnormal (fewer significant bits) in",
        underflow: "rounds to 0 in", overflow: "overflows in", zero: "is exactly 0 in", inf: "is infinite in", nan: "is NaN in" };
      // what was typed (or picked), exactly, then what each format stores and how it rounded
      const exact = Number.isFinite(x) ? String(Number(x.toPrecision(15))) : GF.fmt(x);
      const stored = rowsData.map((r) => {
        if (r.cls === "overflow" || r.cls === "inf" || r.cls === "nan") return `${r.f.label} stores ${GF.fmt(r.v, 8)}`;
        const how = r.err === 0 || Number.isNaN(r.err) ? "exactly"
          : `rounded ${r.v > x ? "up" : "down"} by ${GF.fmt(Math.abs(r.v - x), 4)}`;
        return `${r.f.label} stores ${GF.fmt(r.v, 8)} ${how}`;
      });
      status.textContent = `x = ${exact}: ` + Object.entries(groups).map(([k, v]) => `${say[k]} ${v.join(", ")}`).join("; ") +
        `. ${stored.join("; ")}.`;
      const summary = rowsData.map((r) => `${r.f.label} stores ${GF.fmt(r.v, 6)} (${r.word})`).join("; ");
      rows.setAttribute("aria-label", `Representable values around ${GF.fmt(x, 4)}: ${summary}.`);
      overview.svg.setAttribute("aria-label", `Ranges of the formats on a log scale, with |x| = ${GF.fmt(a, 3)} marked.`);
      status.dataset.value = String(x);
      for (const r of rowsData) status.dataset[r.f.name.replace(/_(\w)/g, (_, c) => c.toUpperCase())] = Object.is(r.v, -0) ? "-0" : String(r.v);
    };

    typed.set(String(data.start));
    live.classList.add("gf-nl");
    live.append(GF.controls(slider.el, sign.el, typed.el), overview.svg, rows, tableBox, status);
    setValue(data.start);
  });
})();
