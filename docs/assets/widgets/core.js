// Shared building blocks for the widgets in this folder. No library: plain DOM and SVG.
//
// A widget script registers one mount function:
//   GF.register("name", (live, data, figure) => { ... });
// `live` is an empty <div> inside the widget's <figure>; `data` is the JSON computed at build
// time by gradflow_site.widgets.widget(). Pure functions that must agree with gradflow_ref
// (a clipping formula, a float rounding, memory arithmetic) go on GF.logic.<name>.* so the
// browser tests can call them on sample inputs and compare with gradflow_ref.
//
// Controls are native <input>/<select>/<button> elements with a <label>: keyboard operable,
// announced by screen readers, styled by assets/gradflow.css (.gf-*). Colours come from CSS
// variables (--gf-c1..--gf-c6, Okabe-Ito, readable in both schemes) and currentColor.
(() => {
  const GF = (window.GF = window.GF || {});
  GF.widgets = GF.widgets || {};
  GF.logic = GF.logic || {};
  GF.register = (name, mount) => {
    GF.widgets[name] = mount;
  };

  let uid = 0;
  GF.uid = (prefix = "gf") => `${prefix}-${++uid}`;

  const SVGNS = "http://www.w3.org/2000/svg";
  const build = (el, attrs, children) => {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") el.textContent = v;
      else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "class") el.setAttribute("class", v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) if (c !== null && c !== undefined && c !== false)
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  };
  /** HTML element: GF.h("div", {class: "x", onclick: fn}, child, "text"). */
  GF.h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
  /** SVG element: GF.s("line", {x1: 0, ...}). */
  GF.s = (tag, attrs, ...children) => build(document.createElementNS(SVGNS, tag), attrs, children);

  /** Add a widget's own CSS to the page once (id names it). Prefer the classes in gradflow.css. */
  GF.style = (id, css) => {
    if (document.head.querySelector(`style[data-gf-style="${id}"]`)) return;
    document.head.append(GF.h("style", { "data-gf-style": id }, css));
  };

  /** Colour i (0-based) of the colour-blind-safe palette, as a CSS value. */
  GF.color = (i) => `var(--gf-c${(i % 6) + 1})`;

  /** Format a number for display: fixed for ordinary magnitudes, exponent otherwise. */
  GF.fmt = (x, digits = 3) => {
    if (x === null || x === undefined) return "–";
    if (!Number.isFinite(x)) return Number.isNaN(x) ? "NaN" : x > 0 ? "inf" : "-inf";
    if (x === 0) return "0";
    const a = Math.abs(x);
    if (a >= 1e-3 && a < 1e5) return String(Number(x.toPrecision(digits)));
    const [m, e] = x.toExponential(Math.max(0, digits - 1)).split("e");
    return `${m.includes(".") ? m.replace(/\.?0+$/, "") : m}e${e.replace("+", "")}`;
  };
  /** Bytes as KiB/MiB/GiB (binary units, like the chapter tables). */
  GF.bytes = (b) => {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return `${i ? b.toFixed(b < 10 ? 2 : 1) : b} ${u[i]}`;
  };

  /** A row of controls. */
  GF.controls = (...items) => GF.h("div", { class: "gf-controls" }, ...items);

  /**
   * Labelled range slider with a live value readout.
   * opts: {label, min, max, step, value, format(v) -> string, onInput(v), values?: [...]}
   * With `values` the slider walks that list by index (for log-spaced or precomputed grids).
   * Returns {el, input, value (getter), set(v)}.
   */
  GF.slider = (opts) => {
    const id = GF.uid("gf-slider");
    const list = opts.values;
    const fmt = opts.format || ((v) => GF.fmt(v));
    const input = GF.h("input", {
      type: "range",
      id,
      min: list ? 0 : opts.min,
      max: list ? list.length - 1 : opts.max,
      step: list ? 1 : opts.step ?? "any",
    });
    const out = GF.h("output", { for: id, class: "gf-output" });
    const value = () => (list ? list[Number(input.value)] : Number(input.value));
    const show = () => {
      const text = fmt(value());
      out.textContent = text;
      input.setAttribute("aria-valuetext", text);
    };
    const set = (v) => {
      input.value = list ? String(Math.max(0, list.indexOf(v))) : String(v);
      show();
    };
    set(opts.value ?? (list ? list[0] : opts.min));
    input.addEventListener("input", () => {
      show();
      opts.onInput?.(value());
    });
    const el = GF.h("div", { class: "gf-control" }, GF.h("label", { for: id, text: opts.label }), input, out);
    return { el, input, get value() { return value(); }, set };
  };

  /** Labelled <select>. opts: {label, options: [[value, text], ...], value, onChange(v)}. */
  GF.select = (opts) => {
    const id = GF.uid("gf-select");
    const input = GF.h("select", { id }, ...opts.options.map(([v, t]) => GF.h("option", { value: v, text: t })));
    if (opts.value !== undefined) input.value = String(opts.value);
    input.addEventListener("change", () => opts.onChange?.(input.value));
    const el = GF.h("div", { class: "gf-control" }, GF.h("label", { for: id, text: opts.label }), input);
    return { el, input, get value() { return input.value; }, set(v) { input.value = String(v); } };
  };

  /** Labelled checkbox. opts: {label, checked, onChange(bool)}. */
  GF.toggle = (opts) => {
    const id = GF.uid("gf-toggle");
    const input = GF.h("input", { type: "checkbox", id });
    input.checked = !!opts.checked;
    input.addEventListener("change", () => opts.onChange?.(input.checked));
    const el = GF.h("div", { class: "gf-control gf-control--toggle" }, input, GF.h("label", { for: id, text: opts.label }));
    return { el, input, get value() { return input.checked; }, set(v) { input.checked = !!v; } };
  };

  /** Labelled number/text input. opts: {label, type, value, onInput(v), attrs}. */
  GF.input = (opts) => {
    const id = GF.uid("gf-input");
    const input = GF.h("input", { id, type: opts.type || "text", ...(opts.attrs || {}) });
    input.value = String(opts.value ?? "");
    input.addEventListener("input", () => opts.onInput?.(input.value));
    const el = GF.h("div", { class: "gf-control" }, GF.h("label", { for: id, text: opts.label }), input);
    return { el, input, get value() { return input.value; }, set(v) { input.value = String(v); } };
  };

  /** A button. */
  GF.button = (text, onClick, attrs = {}) =>
    GF.h("button", { type: "button", class: "md-button gf-button", onclick: onClick, ...attrs }, text);

  /** A polite live region: screen readers announce what it says after each change. */
  GF.status = (cls = "") => GF.h("p", { class: `gf-status ${cls}`, "aria-live": "polite" });

  /** A small table: headers and rows of cells (strings or nodes). */
  GF.table = (headers, rows) =>
    GF.h("table", { class: "gf-table" },
      GF.h("thead", {}, GF.h("tr", {}, headers.map((t) => GF.h("th", { scope: "col" }, t)))),
      GF.h("tbody", {}, rows.map((r) => GF.h("tr", {}, r.map((c) => GF.h("td", {}, c))))));

  const ticksLinear = (lo, hi, n = 5) => {
    const span = hi - lo || 1;
    const step0 = span / n;
    const mag = 10 ** Math.floor(Math.log10(step0));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(12));
    return out;
  };
  const ticksLog = (lo, hi) => {
    const a = Math.ceil(Math.log10(lo)), b = Math.floor(Math.log10(hi));
    const every = Math.max(1, Math.ceil((b - a + 1) / 6));
    const out = [];
    // round decades: every second (third...) power of ten, counted from 10^0
    for (let e = Math.ceil(a / every) * every; e <= b; e += every) out.push(10 ** e);
    return out;
  };

  /**
   * An SVG chart with axes. opts: {width=640, height=300, x: {min, max, log?, label?, ticks?,
   * format?}, y: {...}, title (accessible name, required)}.
   * Returns {svg, plot (a <g> to draw into), sx(x), sy(y), clear(), line(points, style),
   * bars(items), text(x, y, s, attrs)}. Coordinates given to line/bars/text are data values.
   */
  GF.chart = (opts) => {
    // a narrower drawing on a phone keeps the text legible when the SVG is scaled down
    const narrow = window.innerWidth < 600;
    const W = opts.width || (narrow ? 400 : 640), H = Math.round((opts.height || 300) * (narrow ? 0.85 : 1));
    const m = { l: 62, r: 14, t: 12, b: opts.x.label ? 46 : 30, ...(opts.margin || {}) };
    const scale = (ax, a, b) => {
      if (ax.log) {
        const l0 = Math.log10(ax.min), l1 = Math.log10(ax.max);
        return (v) => a + ((Math.log10(Math.max(v, ax.min * 1e-3)) - l0) / (l1 - l0)) * (b - a);
      }
      return (v) => a + ((v - ax.min) / (ax.max - ax.min || 1)) * (b - a);
    };
    const c = { x: opts.x, y: opts.y };
    const sx = (v) => scale(c.x, m.l, W - m.r)(v);
    const sy = (v) => scale(c.y, H - m.b, m.t)(v);
    const svg = GF.s("svg", { viewBox: `0 0 ${W} ${H}`, class: "gf-chart", role: "img", "aria-label": opts.title });
    const axes = GF.s("g", { class: "gf-axes" });
    const plot = GF.s("g", { class: "gf-plot" });
    svg.append(axes, plot);
    const drawAxes = () => {
      axes.replaceChildren();
      const fx = c.x.format || ((v) => GF.fmt(v, 2));
      const fy = c.y.format || ((v) => GF.fmt(v, 2));
      const tx = c.x.ticks || (c.x.log ? ticksLog(c.x.min, c.x.max) : ticksLinear(c.x.min, c.x.max));
      const ty = c.y.ticks || (c.y.log ? ticksLog(c.y.min, c.y.max) : ticksLinear(c.y.min, c.y.max));
      axes.append(GF.s("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: "gf-frame" }));
      for (const t of tx) {
        const x = sx(t);
        axes.append(GF.s("line", { x1: x, x2: x, y1: m.t, y2: H - m.b, class: "gf-grid" }));
        axes.append(GF.s("text", { x, y: H - m.b + 16, "text-anchor": "middle", text: fx(t) }));
      }
      for (const t of ty) {
        const y = sy(t);
        axes.append(GF.s("line", { x1: m.l, x2: W - m.r, y1: y, y2: y, class: "gf-grid" }));
        axes.append(GF.s("text", { x: m.l - 6, y: y + 4, "text-anchor": "end", text: fy(t) }));
      }
      if (c.x.label) axes.append(GF.s("text", { x: (m.l + W - m.r) / 2, y: H - 8, "text-anchor": "middle", class: "gf-axis-label", text: c.x.label }));
      if (c.y.label) axes.append(GF.s("text", { x: -(m.t + H - m.b) / 2, y: 14, transform: "rotate(-90)", "text-anchor": "middle", class: "gf-axis-label", text: c.y.label }));
    };
    drawAxes();
    return {
      svg, plot, sx, sy, W, H, margin: m,
      /** Change an axis (e.g. {y: {min, max, log}}) and redraw the ticks; then redraw the data. */
      axes(next) { Object.assign(c.x, next.x || {}); Object.assign(c.y, next.y || {}); drawAxes(); },
      clear() { plot.replaceChildren(); },
      line(points, style = {}) {
        const d = points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!c.y.log || y > 0))
          .map(([x, y], i) => `${i ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join("");
        const p = GF.s("path", { d, fill: "none", stroke: style.color || "currentColor", "stroke-width": style.width || 2, "stroke-dasharray": style.dash, class: style.class });
        plot.append(p);
        return p;
      },
      bars(items, style = {}) {
        // items: [{x0, x1, y, color?, label?}] drawn from y=baseline (default: axis min)
        const base = style.base ?? (c.y.log ? c.y.min : Math.max(c.y.min, 0));
        for (const it of items) {
          const y0 = sy(base), y1 = sy(it.y);
          const r = GF.s("rect", { x: sx(it.x0), width: Math.max(0.5, sx(it.x1) - sx(it.x0)), y: Math.min(y0, y1), height: Math.abs(y0 - y1), fill: it.color || style.color || GF.color(0), class: it.class });
          if (it.label) r.append(GF.s("title", { text: it.label }));
          plot.append(r);
        }
      },
      text(x, y, s, attrs = {}) {
        const t = GF.s("text", { x: sx(x), y: sy(y), ...attrs, text: s });
        plot.append(t);
        return t;
      },
    };
  };

  /** A legend: [[text, colour, dash?], ...] as an HTML list (wraps on narrow screens). */
  GF.legend = (items) =>
    GF.h("ul", { class: "gf-legend" }, items.map(([t, col, dash]) =>
      GF.h("li", {}, GF.h("span", { class: `gf-swatch${dash ? " gf-swatch--dash" : ""}`, style: `--gf-swatch:${col}` }), t)));

  /**
   * Play/pause a step function at `ms` intervals; returns {el (button), playing, stop()}.
   * `step` returns false at the last frame. opts.atEnd() and opts.rewind(): Play pressed at the
   * last frame starts over from the first instead of doing nothing.
   */
  GF.player = (step, ms = 250, labels = ["Play", "Pause"], opts = {}) => {
    let timer = null;
    const btn = GF.button(labels[0], () => (timer ? stop() : start()), { "aria-pressed": "false" });
    const start = () => {
      if (opts.atEnd?.()) opts.rewind?.();
      timer = setInterval(() => { if (step() === false) stop(); }, ms);
      btn.textContent = labels[1];
      btn.setAttribute("aria-pressed", "true");
    };
    const stop = () => {
      clearInterval(timer);
      timer = null;
      btn.textContent = labels[0];
      btn.setAttribute("aria-pressed", "false");
    };
    // stop when the page is left through instant navigation
    if (typeof location$ !== "undefined") location$.subscribe(() => timer && stop());
    return { el: btn, get playing() { return timer !== null; }, stop, start };
  };
})();
