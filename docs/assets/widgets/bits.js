// Chapter 4: a typed number's bits in FP32, FP16, BF16 and FP8 (E4M3, E5M2): sign, exponent and
// mantissa fields coloured, the bit pattern in hex, and the decoded value with its formula
// (-1)^s x 2^(e - bias) x 1.m (0.m for subnormals). The encoder runs here, on
// GF.logic.precision.bits(format, x), and the browser tests hold it against torch's bit views.
// data: {formats: [gradflow_ref.precision.FORMATS fields, + torch's NaN code], start: "0.1"}
(() => {
  GF.register("bits", (live, data) => {
    const P = (GF.logic.precision ??= GF.precisionLogic(data.formats));
    const formats = data.formats;
    GF.style("bits", `
      .md-typeset .gf-bits .gf-legend { display: flex; }
      .gf-bits__row { display: grid; grid-template-columns: 5.5rem 1fr; gap: 0.1rem 0.6rem; align-items: baseline;
        padding: 0.35rem 0; border-top: 1px solid var(--md-default-fg-color--lightest); }
      .gf-bits__label { font-weight: 700; }
      .gf-bits__fields { display: flex; flex-wrap: wrap; gap: 0.15rem; font-family: var(--md-code-font-family, monospace); }
      .gf-bits__field { padding: 0.05rem 0.2rem; border-radius: 0.15rem; letter-spacing: 0.08em; word-break: break-all;
        background: color-mix(in srgb, var(--gf-field) 22%, transparent); border-bottom: 3px solid var(--gf-field); }
      .gf-bits__hex { opacity: 0.75; align-self: center; padding-left: 0.3rem; }
      .gf-bits__value { grid-column: 2; overflow-wrap: anywhere; }
      @media (max-width: 30em) { .gf-bits__row { grid-template-columns: 1fr; } .gf-bits__value { grid-column: 1; } }
    `);
    const FIELDS = [["sign", 1], ["exponent", 0], ["mantissa", 2]];
    const status = GF.status();
    const rowsBox = GF.h("div", { class: "gf-bits__rows" });
    const sup = (n) => String(n).replace("-", "−");

    const parse = GF.parseNumber;

    // the formula behind a bit pattern, in words a reader can check by hand
    const explain = (f, b, v) => {
      const s = b[0], e = parseInt(b.slice(1, 1 + f.exponent_bits), 2), m = b.slice(1 + f.exponent_bits);
      const top = 2 ** f.exponent_bits - 1;
      if (Number.isNaN(v)) return "NaN (not a number)";
      if (v === Infinity || v === -Infinity) return `exponent all ones, mantissa 0: ${v > 0 ? "+" : "−"}inf`;
      if (e === 0 && !m.includes("1")) return `exponent and mantissa all 0: ${s === "1" ? "−" : "+"}0`;
      const sub = e === 0;
      const power = sub ? `2^(1−${f.bias})` : `2^(${e}−${f.bias})`;
      const lead = sub ? "0" : "1";
      return `(−1)^${s} × ${power} × ${lead}.${m}₂ = ${String(v)}` + (sub ? " (subnormal: no implicit 1)" : "") +
        (e === top && !f.has_inf ? " (top exponent: E4M3FN has no inf)" : "");
    };

    const render = (text) => {
      const x = parse(text);
      input.input.setAttribute("aria-invalid", String(x === null));
      if (x === null) {
        rowsBox.hidden = true;
        status.textContent = `“${String(text).trim()}” is not a number. Type a decimal such as 0.1, -3e-5 or 65504, ` +
          "a power of two such as 2^-14, or inf / nan.";
        status.dataset.valid = "false";
        return;
      }
      rowsBox.hidden = false;
      const rows = formats.map((f) => {
        const b = P.bits(f.name, x), v = P.round(f.name, x);
        const parts = [b.slice(0, 1), b.slice(1, 1 + f.exponent_bits), b.slice(1 + f.exponent_bits)];
        const hex = `0x${parseInt(b, 2).toString(16).padStart(f.bits / 4, "0")}`;
        const err = Number.isFinite(x) && x !== 0 ? Math.abs(v - x) / Math.abs(x) : 0;
        const note = Number.isNaN(v) || !Number.isFinite(x) ? "" : v === x ? " · exact" : ` · ${GF.fmt(err, 2)} relative error`;
        return { f, b, v, el: GF.h("div", { class: "gf-bits__row", "data-format": f.name, "data-bits": b },
          GF.h("span", { class: "gf-bits__label", text: f.label }),
          GF.h("span", { class: "gf-bits__fields", "aria-label": `${f.label} bits: sign ${parts[0]}, exponent ${parts[1]}, mantissa ${parts[2]}` },
            ...parts.map((p, i) => GF.h("span", { class: "gf-bits__field", title: FIELDS[i][0],
              style: `--gf-field: ${GF.color(FIELDS[i][1])}`, text: p })),
            GF.h("span", { class: "gf-bits__hex", text: hex })),
          GF.h("span", { class: "gf-bits__value", text: explain(f, b, v) + note })) };
      });
      rowsBox.replaceChildren(...rows.map((r) => r.el));
      const same = (r) => r.v === x || (Number.isNaN(r.v) && Number.isNaN(x));
      const exact = rows.filter(same).map((r) => r.f.label);
      const rounded = rows.filter((r) => !same(r)).map((r) => r.f.label);
      const what = !rounded.length ? "exactly in every format"
        : !exact.length ? `rounded in every format`
        : `exactly in ${exact.join(", ")}; rounded in ${rounded.join(", ")}`;
      status.textContent = `${String(text).trim()} is stored ${what}.`;
      status.dataset.valid = "true";
      status.dataset.value = String(x);
    };
    const input = GF.input({
      label: "Number", value: data.start,
      attrs: { inputmode: "decimal", spellcheck: "false", autocomplete: "off", size: 14 },
      onInput: render,
    });
    live.classList.add("gf-bits");
    live.append(
      GF.controls(input.el),
      GF.legend(FIELDS.map(([name, c]) => [name, GF.color(c)])),
      rowsBox, status,
    );
    render(data.start);
  });
})();
