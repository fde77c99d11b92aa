// Shared by the numberline and bits widgets (chapter 4): float formats' rounding and encoding,
// run in the browser and held against torch's casts and bit views by
// tests/test_widgets_precision.py. Loaded before either widget (widget(..., needs=("precision",))).
(() => {
  // Round-to-nearest-even into FP32/FP16/BF16/FP8 from the formats' fields (gradflow_ref.precision
  // .FORMATS, passed in the data). Like torch's cast from float64, the value goes through FP32
  // first (Math.fround), then to the narrower format; FP8 E4M3FN saturates at +-448 as torch does.
  const precisionLogic = (formats) => {
    const F = Object.fromEntries(formats.map((f) => [f.name, f]));
    const view = new DataView(new ArrayBuffer(8));
    const pow2 = (n) => {
      // exact 2**n for integer n >= -1074, built from the bits of a float64
      if (n < -1022) return pow2(n + 64) / 2 ** 64;
      view.setUint32(0, (n + 1023) * 2 ** 20);
      view.setUint32(4, 0);
      return view.getFloat64(0);
    };
    const exponent = (a) => {
      // floor(log2(a)) for a finite a > 0, read from the float64 bits (no log rounding)
      view.setFloat64(0, a);
      const e = ((view.getUint32(0) >>> 20) & 0x7ff) - 1023;
      return e > -1023 ? e : exponent(a * 2 ** 64) - 64;
    };
    const fmt = (name) => {
      const f = F[name];
      if (!f) throw new Error(`precision: unknown format ${name}; use one of ${Object.keys(F).join(", ")}`);
      return f;
    };
    const negative = (v) => v < 0 || Object.is(v, -0);
    // |x| rounded to the format's grid, ignoring its largest value (a, finite, >= 0)
    const unbounded = (f, a) => {
      if (f.name === "float32") return Math.fround(a);
      a = Math.fround(a);
      if (a === 0 || a === Infinity) return a;
      const q = pow2(Math.max(exponent(a), f.emin) - f.mantissa_bits);
      const r = a / q, n = Math.floor(r), d = r - n; // exact: r < 2**25
      return (d > 0.5 || (d === 0.5 && n % 2 === 1) ? n + 1 : n) * q;
    };
    const round = (name, x) => {
      const f = fmt(name);
      x = Number(x);
      if (Number.isNaN(x)) return NaN;
      let r = unbounded(f, Math.abs(x));
      if (r > f.max) r = f.saturates ? f.max : f.has_inf ? Infinity : NaN;
      return negative(x) ? -r : r;
    };
    const classify = (name, x) => {
      const f = fmt(name);
      x = Number(x);
      if (Number.isNaN(x)) return "nan";
      if (!Number.isFinite(x)) return "inf";
      if (x === 0) return "zero";
      const r = unbounded(f, Math.abs(x));
      return r === 0 ? "underflow" : r > f.max ? "overflow" : r < f.min_normal ? "subnormal" : "normal";
    };
    const code = (name, x) => {
      const f = fmt(name), v = round(name, x), top = 2 ** f.exponent_bits - 1;
      if (Number.isNaN(v)) return f.nan_code;
      const a = Math.abs(v);
      let e, m;
      if (a === Infinity) [e, m] = [top, 0];
      else if (a < f.min_normal) [e, m] = [0, a / f.min_subnormal];
      else {
        const p = exponent(a);
        [e, m] = [p + f.bias, (a / pow2(p) - 1) * 2 ** f.mantissa_bits];
      }
      return (negative(v) ? 2 ** (f.bits - 1) : 0) + e * 2 ** f.mantissa_bits + m;
    };
    const bits = (name, x) => code(name, x).toString(2).padStart(fmt(name).bits, "0");
    const decode = (name, c) => {
      const f = fmt(name), mb = f.mantissa_bits, top = 2 ** f.exponent_bits - 1;
      const sign = c >= 2 ** (f.bits - 1) ? -1 : 1;
      const e = Math.floor(c / 2 ** mb) % (top + 1), m = c % 2 ** mb;
      if (e === top && (f.has_inf || m === 2 ** mb - 1)) return m ? NaN : sign * Infinity;
      if (e === 0) return sign * m * f.min_subnormal;
      return sign * (1 + m / 2 ** mb) * pow2(e - f.bias);
    };
    // the next finite value of the format above v (v itself at the top of the range)
    const nextUp = (name, v) => {
      const f = fmt(name), half = 2 ** (f.bits - 1);
      if (!Number.isFinite(v)) return v;
      const c = code(name, v) % half; // magnitude code
      const w = negative(v) && c > 0 ? -decode(name, c - 1) : decode(name, v === 0 ? 1 : c + 1);
      return Number.isFinite(w) ? w + 0 : v; // + 0 turns -0 into 0
    };
    const nextDown = (name, v) => -nextUp(name, -v);
    // gradflow_ref.precision.neighbours: up to n finite values below stored(x), it, up to n above
    const neighbours = (name, x, n = 2) => {
      const v = round(name, x);
      if (!Number.isFinite(v)) throw new Error(`neighbours: ${x} is not finite in ${name}`);
      const out = [v];
      const toward0 = v < 0 ? nextUp : nextDown, away = v < 0 ? nextDown : nextUp;
      for (let i = 0, w = v; i < n && Math.abs(w) > 0; i++) out.push((w = toward0(name, w)));
      for (let i = 0, w = v; i < n; i++) {
        const next = away(name, w);
        if (next === w) break;
        out.push((w = next));
      }
      return out.map((w) => w + 0).sort((a, b) => a - b);
    };
    return { formats: F, round, classify, code, bits, decode, nextUp, nextDown, neighbours };
  };
  GF.precisionLogic = precisionLogic;
  // a typed number: decimals, exponents, 2^k, inf and nan; null when it is none of them
  GF.parseNumber = (text) => {
    const s = String(text).trim().toLowerCase().replace(/\s+/g, "").replace(/^\+/, "").replace("−", "-");
    if (/^-?(inf|infinity)$/.test(s)) return s.startsWith("-") ? -Infinity : Infinity;
    if (s === "nan") return NaN;
    let m = s.match(/^(-?)2\^(-?\d{1,4})$/);
    if (m) return (m[1] ? -1 : 1) * 2 ** Number(m[2]);
    m = s.match(/^-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/);
    return m ? Number(s) : null;
  };
})();
