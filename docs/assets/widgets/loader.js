// Mount the interactive widgets of the current page (gradflow_site/widgets.py writes them).
// Loaded on every page, but fetches core.js and <name>.js only where a page has a widget, and
// only once per visit; re-run on every instant-navigation page load through Material's document$.
(() => {
  const base = new URL(".", document.currentScript.src);
  const loading = {};
  const load = (file) =>
    (loading[file] ??= new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = new URL(file, base).href;
      s.onload = resolve;
      s.onerror = () => reject(new Error(`widgets: could not load ${s.src}`));
      document.head.appendChild(s);
    }));

  const mounting = new WeakMap();
  const mount = (el) => {
    if (!mounting.has(el)) mounting.set(el, mountOnce(el));
    return mounting.get(el);
  };
  const FOCUSABLE = "input, select, textarea, button, a[href], [tabindex]:not([tabindex='-1'])";
  const mountOnce = async (el) => {
    const name = el.dataset.gfWidget;
    el.dataset.gfState = "loading";
    try {
      await load("core.js");
      // shared logic of several widgets (data-gf-needs="precision" loads precision.js first)
      for (const need of (el.dataset.gfNeeds || "").split(" ").filter(Boolean)) await load(`${need}.js`);
      await load(`${name}.js`);
      const fn = window.GF.widgets[name];
      if (typeof fn !== "function") throw new Error(`widgets: ${name}.js registered nothing`);
      const live = document.createElement("div");
      live.className = "gf-widget__live";
      const stat = el.querySelector(":scope > .gf-widget__static");
      el.insertBefore(live, stat ? stat.nextSibling : null);
      fn(live, JSON.parse(el.dataset.gfData), el);
      if (stat) stat.hidden = true;
      el.dataset.gfState = "ready";
      // the keyboard stand-in goes; if it had the focus, the widget's first control takes it
      const start = el.querySelector(":scope > .gf-widget__start");
      if (start) {
        const focused = document.activeElement === start;
        start.remove();
        if (focused) live.querySelector(FOCUSABLE)?.focus();
      }
    } catch (err) {
      el.dataset.gfState = "error";
      console.error(`widget ${name}:`, err);
    }
  };

  // Mount a widget when it comes within 100 px of the viewport: the page paints and becomes
  // interactive first (Lighthouse's blocking time), and widgets never scrolled to cost nothing.
  const observer =
    "IntersectionObserver" in window
      ? new IntersectionObserver(
          (entries) => {
            for (const e of entries) {
              if (!e.isIntersecting) continue;
              observer.unobserve(e.target);
              mount(e.target);
            }
          },
          { rootMargin: "100px 0px" },
        )
      : null;
  // A widget that has not mounted yet has no controls for Tab to reach. A button, visible only
  // while focused, stands in for them in page order: focusing it mounts the widget and moves
  // the focus to the widget's first control, so a keyboard reader never skips a widget.
  const standIn = (el) => {
    const start = document.createElement("button");
    start.type = "button";
    start.className = "gf-widget__start";
    start.textContent = `Open the interactive figure: ${el.getAttribute("aria-label") || "widget"}`;
    start.addEventListener("focus", () => {
      observer?.unobserve(el);
      mount(el);
    });
    el.insertBefore(start, el.querySelector(":scope > .gf-widget__static"));
  };
  const run = () => {
    for (const el of document.querySelectorAll("[data-gf-widget]:not([data-gf-state])")) {
      el.dataset.gfState = "waiting";
      standIn(el);
      if (observer) observer.observe(el);
      else mount(el);
    }
  };
  // Mount every waiting widget now (printing, the browser tests, the screenshot command).
  window.GFMountAll = () =>
    Promise.all(
      [...document.querySelectorAll('[data-gf-widget][data-gf-state="waiting"]')].map((el) => {
        observer?.unobserve(el);
        return mount(el);
      }),
    );
  window.addEventListener("beforeprint", () => window.GFMountAll());
  // run now, and again on every instant-navigation page load (run skips mounted widgets); in the
  // offline copy (file://) Material's document$ does not emit, so the first call matters
  if (typeof document$ !== "undefined") document$.subscribe(run);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
