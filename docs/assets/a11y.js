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
  // and keep it there for a second and a half; a scroll of the reader's own (wheel, touch, key,
  // pointer) ends that at once.
  let holding = 0;
  const hold = (id) => {
    const find = () => id && document.getElementById(decodeURIComponent(id));
    let el = find();
    if (!el) return;
    const mine = ++holding;
    const stop = () => { holding++; };
    for (const ev of ["wheel", "touchstart", "keydown", "pointerdown"])
      addEventListener(ev, stop, { once: true, passive: true });
    let last = NaN, still = 0, want = null, end = 0;
    const step = () => {
      if (mine !== holding) return;
      // instant navigation may swap the page's content under us (same page, new nodes): a
      // detached heading measures 0 and would scroll the page to the top, so follow the new one
      const current = find();
      if (!current) return;
      if (current !== el) { el = current; want = null; still = 0; end = 0; last = NaN; }
      const now = performance.now();
      if (want === null) {
        // wait until the page has not scrolled for 3 frames (at most 1 s)
        still = scrollY === last ? still + 1 : 0;
        last = scrollY;
        if (still < 3 && now < (end ||= now + 1000)) return requestAnimationFrame(step);
        el.scrollIntoView({ block: "start", behavior: "instant" });
        want = el.getBoundingClientRect().top;
        end = now + 1500;
      } else {
        const moved = el.getBoundingClientRect().top - want;
        if (Math.abs(moved) > 1) scrollBy({ top: moved, behavior: "instant" });
      }
      if (now < end) requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
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
