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
  // After a jump to a heading (a table-of-contents click, a link, a URL with #anchor), content
  // above it may still change height: a widget mounting, a code block laid out on first view.
  // Once the jump's own (smooth) scroll has come to rest, put the heading back where it belongs
  // and keep it there for a second and a half: whenever a block of the page changes size, a
  // ResizeObserver (which runs after layout, before paint) moves the page back by as much as
  // the heading moved, so the reader never sees it move. A scroll of the reader's own (wheel,
  // touch, key, pointer) ends that at once.
  let holding = 0;
  const hold = (id) => {
    const find = () => id && document.getElementById(decodeURIComponent(id));
    const el = find();
    if (!el) return;
    const mine = ++holding;
    const stop = () => { holding++; };
    for (const ev of ["wheel", "touchstart", "keydown", "pointerdown"])
      addEventListener(ev, stop, { once: true, passive: true });
    let last = NaN, still = 0;
    const end = performance.now() + 1000;
    const settle = () => {
      if (mine !== holding) return;
      // wait until the page has not scrolled for 3 frames (at most 1 s)
      still = scrollY === last ? still + 1 : 0;
      last = scrollY;
      if (still < 3 && performance.now() < end) return requestAnimationFrame(settle);
      // instant navigation may have swapped the page's content meanwhile (same page, new
      // nodes): a detached heading measures 0 and would scroll the page to the top
      const target = find();
      if (!target) return;
      target.scrollIntoView({ block: "start", behavior: "instant" });
      const want = target.getBoundingClientRect().top;
      const blocks = document.querySelector("article") || document.body;
      const watch = new ResizeObserver(() => {
        if (mine !== holding || !target.isConnected) return watch.disconnect();
        const moved = target.getBoundingClientRect().top - want;
        if (Math.abs(moved) > 1) scrollBy({ top: moved, behavior: "instant" });
      });
      for (const block of blocks.children) watch.observe(block);
      setTimeout(() => watch.disconnect(), 1500);
    };
    requestAnimationFrame(settle);
  };
  document.addEventListener("click", (ev) => {
    const a = ev.target.closest && ev.target.closest("a[href*='#']");
    if (!a || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
    const url = new URL(a.href, location.href);
    if (url.pathname === location.pathname && url.hash) hold(url.hash.slice(1));
  });
  addEventListener("hashchange", () => hold(location.hash.slice(1)));
  if (location.hash) hold(location.hash.slice(1));

  // now, and on every instant-navigation page load; in the offline copy (file://) Material's
  // document$ never emits, so the first call is the one that counts there
  run();
  document$.subscribe(run);
})();
