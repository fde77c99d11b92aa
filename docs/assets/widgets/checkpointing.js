// Chapter 6: checkpoint_sequential step by step. For every (layers N, segments s) the build ran
// gradflow_ref.checkpointing.checkpoint_sequential on an MLP of N (Linear + ReLU) layers and
// recorded the order of its layer events with module and tensor hooks: F<i> (layer i forward),
// R<i> (layer i recomputed during backward), B<i> (layer i's backward done), and measured the
// activations held after the forward pass (SavedTensorMeter) and the recomputed layer forwards
// (count_forwards). Which activation is kept, dropped, recomputed or released at each event is
// derived here, on GF.logic.checkpointing, and the browser tests hold it against the measurements.
// data: {runs: {"N/s": {events: "F1 F2 ... B1", held, recomputed}}, max_layers, start: [N, s]}
GF.register("checkpointing", (live, data) => {
  GF.logic.checkpointing = {
    /** checkpoint_sequential's split: segments of floor(N / s) layers, the last takes the rest. */
    split: (N, s) => {
      const size = Math.floor(N / s), lastStart = size * (s - 1);
      return { size, lastStart, last: N - lastStart };
    },
    /**
     * Counts in activations of one (1 x width) output. After the forward pass, s - 1 segment
     * inputs plus the last segment's input and its `last` outputs are held: s + last (N/K + K
     * when s divides N, K = N / s); that is also the peak. Every layer but the last segment's
     * runs twice: N - last recomputed forwards (N - K).
     */
    formulas: (N, s) => {
      const { last } = GF.logic.checkpointing.split(N, s);
      return { held: s + last, peak: s + last, recomputed: N - last, forwards: 2 * N - last };
    },
    /** Whether a_i is kept for backward when the forward pass computes it. */
    kept: (N, s, i) => {
      const { size, lastStart } = GF.logic.checkpointing.split(N, s);
      return i >= lastStart || i % size === 0;
    },
    /**
     * Replay the recorded events. Returns one frame per event (frame 0: before the forward
     * pass) with the state of a_0..a_N ("pending", "kept", "dropped", "recomputed", "released"),
     * the activations held, the peak so far, and the layer forwards and recomputations so far.
     */
    replay: (N, s, events) => {
      const { size, lastStart } = GF.logic.checkpointing.split(N, s);
      const cells = Array.from({ length: N + 1 }, (_, i) => (i ? "pending" : "kept"));
      const frame = (event) => {
        const held = cells.filter((c) => c === "kept" || c === "recomputed").length;
        const prev = frames[frames.length - 1];
        return { event, cells: cells.slice(), held, peak: Math.max(held, prev ? prev.peak : 0), forwards, recomputed };
      };
      let forwards = 0, recomputed = 0;
      const frames = [];
      frames.push(frame(null));
      for (const event of events) {
        const kind = event[0], i = Number(event.slice(1));
        if (kind === "F") {
          forwards++;
          cells[i] = GF.logic.checkpointing.kept(N, s, i) ? "kept" : "dropped";
        } else if (kind === "R") {
          forwards++;
          recomputed++;
          cells[i] = "recomputed";
        } else {
          // layer i's ReLU needed a_i and its Linear a_(i-1); a segment input is released with
          // the last layer that reads it (the layer before re-creates its own copy if recomputed)
          cells[i] = "released";
          if ((i - 1) % size === 0 && i - 1 <= lastStart) cells[i - 1] = "released";
        }
        frames.push(frame(event));
      }
      return frames;
    },
  };
  const L = GF.logic.checkpointing;
  const look = {
    pending: { fill: "none", mark: "", dash: "2 3" },
    kept: { fill: GF.color(0), mark: "S" },
    dropped: { fill: "none", mark: "–" },
    recomputed: { fill: GF.color(4), mark: "R" },
    released: { fill: "currentColor", opacity: 0.12, mark: "", dash: "2 3" },
  };
  GF.style("checkpointing", `
    .gf-ckpt__cells { width: 100%; height: auto; display: block; color: var(--md-default-fg-color); }
    .gf-ckpt__cells text { fill: currentColor; font-size: 12px; }
    .gf-ckpt__table { overflow-x: auto; }
    .gf-ckpt__table th, .gf-ckpt__table td { padding: 0.15em 0.7em; text-align: right; }
    .gf-ckpt__table th:first-child, .gf-ckpt__table td:first-child { text-align: left; }
  `);
  const cellsSvg = GF.s("svg", { class: "gf-ckpt__cells", role: "img", "aria-label": "Activations" });
  const tableBox = GF.h("div", { class: "gf-ckpt__table" });
  const status = GF.status();
  const state = { N: data.start[0], s: data.start[1], t: 0, frames: [], events: [], run: null };

  const describe = (event, frame) => {
    const { N, s } = state;
    const { size, lastStart } = L.split(N, s);
    if (!event) return "Before the forward pass: only the input a0 exists, and it is kept.";
    const kind = event[0], i = Number(event.slice(1));
    if (kind === "F") {
      const why = i >= lastStart ? "kept: the last segment runs without checkpointing"
        : i % size === 0 ? `kept: it is the input of checkpointed segment ${i / size + 1}`
        : "discarded: it is inside a checkpointed segment";
      return `Forward, layer ${i}: a${i} is ${why}.`;
    }
    if (kind === "R") {
      const from = Math.floor((i - 1) / size) * size;
      return `Backward reached segment ${from / size + 1}: layer ${i} runs again from the checkpoint a${from}, and a${i} is held again.`;
    }
    const both = frame.cells[i - 1] === "released" && (i - 1) % size === 0 && i - 1 <= lastStart;
    return `Backward through layer ${i} done: a${i}${both ? ` and a${i - 1}` : ""} released.`;
  };

  const draw = () => {
    const { N, s, t, frames, run } = state;
    const f = frames[t];
    // two rows of cells on a phone, so that the letters stay legible
    const cols = live.clientWidth && live.clientWidth < 480 && N > 8 ? Math.ceil((N + 1) / 2) : N + 1;
    const w = 34, gap = 4, rowH = 62, W = cols * (w + gap) + 8, H = rowH * Math.ceil((N + 1) / cols);
    cellsSvg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    // a few layers: cells at about their drawn size, not stretched across the page
    cellsSvg.style.maxWidth = `${Math.round(W * 1.4)}px`;
    cellsSvg.replaceChildren();
    const current = f.event ? Number(f.event.slice(1)) : 0;
    f.cells.forEach((c, i) => {
      const x = 4 + (i % cols) * (w + gap), y = Math.floor(i / cols) * rowH, st = look[c];
      cellsSvg.append(GF.s("rect", {
        x, y: y + 6, width: w, height: 30, rx: 4, fill: st.fill, "fill-opacity": st.opacity ?? (st.fill === "none" ? 0 : 0.45),
        stroke: i === current ? "currentColor" : st.fill === "none" || c === "released" ? "var(--md-default-fg-color--light)" : st.fill,
        "stroke-width": i === current ? 3 : 1.5, "stroke-dasharray": i === current ? null : st.dash,
      }, GF.s("title", { text: `a${i}: ${c}` })));
      cellsSvg.append(GF.s("text", { x: x + w / 2, y: y + 26, "text-anchor": "middle", "font-weight": 700, text: st.mark }));
      cellsSvg.append(GF.s("text", { x: x + w / 2, y: y + 54, "text-anchor": "middle", text: `a${i}` }));
    });
    const total = L.formulas(N, s);
    const last = frames[frames.length - 1];
    tableBox.replaceChildren(GF.table(
      ["", "now", "whole pass", "no checkpointing"],
      [
        ["activations held", String(f.held), `peak ${f.peak} of ${last.peak}`, String(N + 1)],
        ["layer forwards", String(f.forwards), String(last.forwards), String(N)],
        ["of them recomputed", String(f.recomputed), String(last.recomputed), "0"],
      ],
    ));
    const phase = t === 0 ? "start" : t <= N ? "forward" : "backward";
    status.textContent = `Step ${t} of ${frames.length - 1} (${phase}). ${describe(f.event, f)} ` +
      `Held now ${f.held}, peak so far ${f.peak}; ${f.forwards} layer forwards, ${f.recomputed} recomputed. ` +
      `Measured for the whole pass: ${run.held} activations held after the forward pass (SavedTensorMeter), ` +
      `${run.recomputed} layers recomputed (count_forwards); formula s + K_last = ${total.held}, N - K_last = ${total.recomputed}.`;
    Object.assign(status.dataset, { layers: String(N), segments: String(s), step: String(t), held: String(f.held), peak: String(f.peak), forwards: String(f.forwards), recomputed: String(f.recomputed) });
    const counts = f.cells.reduce((acc, c) => ({ ...acc, [c]: (acc[c] || 0) + 1 }), {});
    cellsSvg.setAttribute("aria-label", `Activations a0 to a${N} at step ${t}: ` +
      Object.entries(counts).map(([c, k]) => `${k} ${c}`).join(", ") + ".");
    stepSlider.input.max = String(frames.length - 1);
    stepSlider.set(t);
  };

  const go = (t) => {
    state.t = Math.max(0, Math.min(state.frames.length - 1, t));
    draw();
  };
  const configure = () => {
    state.run = data.runs[`${state.N}/${state.s}`];
    state.events = state.run.events.split(" ");
    state.frames = L.replay(state.N, state.s, state.events);
    // open at the end of the forward pass: what is kept for backward
    stepSlider.input.max = String(state.frames.length - 1);
    go(state.N);
  };

  const layers = GF.slider({
    label: "Layers N", min: 2, max: data.max_layers, step: 1, value: state.N, format: String,
    onInput: (v) => {
      player.stop();
      state.N = v;
      segments.input.max = String(v);
      state.s = Math.min(state.s, v);
      segments.set(state.s);
      configure();
    },
  });
  const segments = GF.slider({
    label: "Segments s", min: 1, max: state.N, step: 1, value: state.s,
    format: (v) => `${v} (K = ${Math.floor(state.N / v)})`,
    onInput: (v) => { player.stop(); state.s = v; configure(); },
  });
  const stepSlider = GF.slider({ label: "Step", min: 0, max: 1, step: 1, value: 0, format: String, onInput: (v) => { player.stop(); go(v); } });
  const player = GF.player(() => { if (state.t >= state.frames.length - 1) return false; go(state.t + 1); }, 400,
    undefined, { atEnd: () => state.t >= state.frames.length - 1, rewind: () => go(0) });
  const prev = GF.button("Previous step", () => { player.stop(); go(state.t - 1); });
  const next = GF.button("Next step", () => { player.stop(); go(state.t + 1); });
  live.append(
    GF.controls(layers.el, segments.el),
    GF.controls(prev, player.el, next, stepSlider.el),
    cellsSvg,
    GF.legend([["S kept for backward", GF.color(0)], ["– discarded", "var(--md-default-fg-color--light)"], ["R recomputed", GF.color(4)], ["released / not yet computed", "var(--md-default-fg-color--light)", true]]),
    status, tableBox,
  );
  configure();
});
