"""Developer tools: benchmark, Lighthouse, screenshots, link check, lock (not part of the build)."""
