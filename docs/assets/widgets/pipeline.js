// Chapter 7: one training step, stage by stage. The stage lists were recorded at build time by
// gradflow_ref.pipeline.trace_step from a real Trainer.step, one per combination of the three
// switches; this script only shows them. What it says about each stage is the chapter's prose:
// the table in `.gf-stage-notes` (stage key, name, what it does, if it moves), read from the page.
// data: {combos: {"bf16-1-0": {micro, stages: [[name, dtype|null, inLoop 0/1, run text]...]}},
//        segments}
const stageNotes = (live) => {
  const table = (live.closest(".md-content") || document).querySelector(".gf-stage-notes table");
  const info = {};
  for (const row of table ? table.tBodies[0].rows : []) {
    const [key, ...text] = [...row.cells].map((c) => c.textContent.trim());
    info[key] = text;
  }
  return info;
};

GF.register("pipeline", (live, data) => {
  const { combos, segments } = data;
  const info = stageNotes(live);
  const missing = Object.values(combos).flatMap((c) => c.stages.map((s) => s[0])).filter((n) => !info[n]);
  if (missing.length) throw new Error(`pipeline: the page's stage table lacks ${[...new Set(missing)].join(", ")}`);
  GF.style("pipeline", `
.gf-pipe { display: flex; flex-direction: column; gap: 0.35rem; margin: 0.5rem 0; }
.gf-pipe__row { display: flex; flex-wrap: wrap; gap: 0.35rem; align-items: stretch; }
.gf-pipe__loop { border: 2px dashed var(--md-default-fg-color--light); border-radius: 0.4rem;
  padding: 0.3rem 0.4rem 0.4rem; }
.gf-pipe__loop-label { margin: 0 0 0.3rem !important; font-weight: 700; }
.md-typeset .gf-pipe__stage { font: inherit; color: inherit; cursor: pointer; text-align: left;
  display: flex; flex-direction: column; gap: 0.1rem; min-width: 6.5rem; flex: 1 1 6.5rem;
  padding: 0.25rem 0.45rem; border: 1px solid var(--md-default-fg-color--lighter);
  border-left: 0.35rem solid var(--gf-stage); border-radius: 0.3rem;
  background: var(--md-default-bg-color); }
.gf-pipe__stage:hover { background: var(--md-default-fg-color--lightest); }
.gf-pipe__stage[aria-pressed="true"] { outline: 2px solid var(--gf-stage); outline-offset: 1px;
  background: color-mix(in srgb, var(--gf-stage) 14%, transparent); }
.gf-pipe__stage:focus-visible { outline: 3px solid var(--md-accent-fg-color); outline-offset: 2px; }
.gf-pipe__name { font-weight: 700; }
.gf-pipe__dtype { font-size: 0.65rem; font-family: var(--md-code-font-family); }
.gf-pipe__detail { border-top: 1px solid var(--md-default-fg-color--lightest); padding-top: 0.3rem; }
.md-typeset .gf-pipe__detail p { margin: 0.25rem 0; }
.md-typeset [data-gf-widget="pipeline"] .gf-legend { display: flex; }
`);
  // colour by what the stage's tensors are: working precision, float32, or none
  const kind = (dtype) => (dtype === null ? 2 : dtype === "float32" ? 1 : 0);
  const colours = [GF.color(0), GF.color(1), "var(--md-default-fg-color--light)"];
  let selected = "forward";

  const key = () => `${precision.value}-${accumulate.value ? 1 : 0}-${checkpoint.value ? 1 : 0}`;
  const precision = GF.select({
    label: "Working precision",
    options: [["bf16", "BF16"], ["fp16", "FP16 (loss scaling)"]],
    value: "bf16",
    onChange: () => draw(),
  });
  const micro = combos["bf16-1-0"].micro;
  const accumulate = GF.toggle({ label: `Accumulate ${micro} micro-batches`, checked: false, onChange: () => draw() });
  const checkpoint = GF.toggle({ label: `Checkpoint ${segments} segments`, checked: false, onChange: () => draw() });

  const pipe = GF.h("div", { class: "gf-pipe", role: "group", "aria-label": "Stages of one training step" });
  const title = GF.h("p", {}, GF.h("strong", {}));
  const does = GF.h("p", {});
  const run = GF.h("p", {});
  const moved = GF.h("p", {});
  const detail = GF.h("div", { class: "gf-pipe__detail", "aria-live": "polite" }, title, does, run, moved);
  const status = GF.status();
  const legend = GF.legend([
    ["working precision (BF16 or FP16)", colours[0]],
    ["float32", colours[1]],
    ["no tensor", colours[2]],
  ]);

  const card = (stage, number) => {
    const [name, dtype, , text] = stage;
    const btn = GF.h("button", {
      type: "button",
      class: "gf-pipe__stage",
      "data-stage": name,
      "aria-pressed": String(name === selected),
      style: `--gf-stage:${colours[kind(dtype)]}`,
      onclick: () => show(name),
    },
    GF.h("span", { class: "gf-pipe__name" }, `${number}. ${info[name][0]}`),
    GF.h("span", { class: "gf-pipe__dtype" }, dtype ?? "no tensor"));
    btn.dataset.run = text;
    return btn;
  };

  const show = (name) => {
    const stages = combos[key()].stages;
    const stage = stages.find((s) => s[0] === name) || stages[0];
    selected = stage[0];
    for (const b of pipe.querySelectorAll(".gf-pipe__stage")) b.setAttribute("aria-pressed", String(b.dataset.stage === selected));
    const [head, what, move] = info[selected];
    title.firstChild.textContent = `${head}${stage[1] ? ` · ${stage[1]}` : ""}`;
    does.textContent = `What it does: ${what}`;
    run.textContent = `In this run: ${stage[3]}.`;
    moved.textContent = `If it moves: ${move}`;
    detail.dataset.stage = selected;
  };

  const draw = () => {
    const combo = combos[key()];
    const loop = combo.stages.filter((s) => s[2]);
    const after = combo.stages.filter((s) => !s[2]);
    const label = combo.micro > 1
      ? `Repeated for each of ${combo.micro} micro-batches`
      : "One micro-batch (no accumulation)";
    pipe.replaceChildren(
      GF.h("div", { class: "gf-pipe__loop" },
        GF.h("p", { class: "gf-pipe__loop-label" }, label),
        GF.h("div", { class: "gf-pipe__row" }, loop.map((s, i) => card(s, i + 1)))),
      GF.h("div", { class: "gf-pipe__row" }, after.map((s, i) => card(s, loop.length + i + 1))),
    );
    pipe.dataset.stages = combo.stages.map((s) => s[0]).join(",");
    pipe.dataset.loop = loop.map((s) => s[0]).join(",");
    pipe.dataset.micro = String(combo.micro);
    const scaling = precision.value === "fp16" ? "FP16 with loss scaling" : "BF16 without loss scaling";
    status.textContent =
      `${scaling}, ${combo.micro} micro-batch${combo.micro > 1 ? "es" : ""}, checkpointing ` +
      `${checkpoint.value ? "on" : "off"}: ${combo.stages.length} stages, ${loop.length} of them ` +
      `run per micro-batch (${loop.map((s) => info[s[0]][0]).join(", ")}).`;
    show(selected);
  };

  live.append(GF.controls(precision.el, accumulate.el, checkpoint.el), pipe, legend, detail, status);
  draw();
});
