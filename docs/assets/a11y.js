// Accessible names for two Material widgets that ship without one (axe-core: aria-dialog-name,
// aria-progressbar-name), and keyboard access to wide tables that scroll sideways
// (scrollable-region-focusable). Re-applied on every instant-navigation page load.
document$.subscribe(() => {
  const name = (selector, label) => {
    const el = document.querySelector(selector);
    if (el && !el.hasAttribute("aria-label")) el.setAttribute("aria-label", label);
  };
  name(".md-search", "Search the guide");
  name(".md-progress", "Loading page");
  for (const wrap of document.querySelectorAll(".md-typeset__scrollwrap, .highlight-ipynb")) {
    if (!wrap.hasAttribute("tabindex")) wrap.setAttribute("tabindex", "0");
  }
});
