#!/usr/bin/env bash
# Vendor the front-end package the site serves itself, so no page makes a third-party request:
# iframe-worker's shim, which lets search run from file:// in the `make offline` copy (Material
# would otherwise load it from a CDN; the shim does nothing when served over http).
# Math needs nothing here: gradflow_site/mathml.py typesets it to MathML at build time.
# The package comes from the npm registry (npm pack). Usage: vendor_assets.sh
set -euo pipefail
iframe_worker="1.0.4"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

iw="$root/docs/assets/vendor/iframe-worker"
(cd "$work" && npm pack "iframe-worker@$iframe_worker" --silent >/dev/null \
  && mkdir iw && tar xzf "iframe-worker-$iframe_worker.tgz" -C iw)
rm -rf "$iw" && mkdir -p "$iw"
cp "$work/iw/package/shim/index.js" "$iw/shim.js"
cp "$work/iw/package/LICENSE" "$iw/LICENSE"
echo "$iframe_worker" > "$iw/VERSION"
echo "iframe-worker $iframe_worker vendored into ${iw#"$root/"}"
