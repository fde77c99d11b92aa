// Accessible names for two Material widgets that ship without one (axe-core: aria-dialog-name,
// aria-progressbar-name), and keyboard access to wide tables and code that scroll sideways
// (scrollable-region-focusable). Re-applied on every instant-navigation page load.
(() => {
  const idle = window.requestIdleCallback || ((fn) => setTimeout(fn, 1));
  let visit = 0;

  // Material mounts a code block only when it scrolls into view (`content.lazy` in mkdocs.yml,
  // for page speed) and then makes it focusable if it scrolls sideways, on devices with hover.
  // Until then this applies the same rule, one block per idle moment: measuring a block lays it
  // out, and one block at a time never makes a long task. GFCodeChecked is true when all are done.
  const checkCode = () => {
    const current = ++visit;
    window.GFCodeChecked = false;
    const blocks = matchMedia("(hover)").matches
      ? [...document.querySelectorAll(".md-typeset .highlight > pre > code")]
      : [];
    const next = () => {
      if (current !== visit) return; // a newer page load took over
      const el = blocks.shift();
      if (el === undefined) {
        window.GFCodeChecked = true;
        return;
      }
      const mountedByMaterial = el.parentElement.id.startsWith("__code_");
      if (!mountedByMaterial && !el.hasAttribute("tabindex") && el.scrollWidth > el.clientWidth) {
        el.setAttribute("tabindex", "0");
      }
      idle(next);
    };
    idle(next);
  };

  const run = () => {
    const name = (selector, label) => {
      const el = document.querySelector(selector);
      if (el && !el.hasAttribute("aria-label")) el.setAttribute("aria-label", label);
    };
    name(".md-search", "Search the guide");
    name(".md-progress", "Loading page");
    for (const wrap of document.querySelectorAll(".md-typeset__scrollwrap, .highlight-ipynb")) {
      if (!wrap.hasAttribute("tabindex")) wrap.setAttribute("tabindex", "0");
    }
    checkCode();
  };
  // now, and on every instant-navigation page load; in the offline copy (file://) Material's
  // document$ never emits, so the first call is the one that counts there
  run();
  document$.subscribe(run);
})();
