#!/usr/bin/env bash
# Vendor the front-end packages the site serves itself, so no page makes a third-party request:
# - KaTeX (math): the minified JS and CSS, the auto-render extension and the woff2 fonts, with
#   the CSS rewritten to reference woff2 only (every browser that runs KaTeX reads woff2; the
#   local-asset check then finds every font);
# - iframe-worker's shim, which lets search run from file:// in the `make offline` copy (Material
#   would otherwise load it from a CDN; the shim does nothing when served over http).
# Packages come from the npm registry (npm pack). Usage: vendor_assets.sh [katex-version]
set -euo pipefail
version="${1:-0.19.1}"
iframe_worker="1.0.4"
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/docs/assets/vendor/katex"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "katex@$version" --silent >/dev/null && tar xzf "katex-$version.tgz")
dist="$work/package/dist"
rm -rf "$dest" && mkdir -p "$dest/fonts" "$dest/contrib"
cp "$dist/katex.min.js" "$dest/"
cp "$dist/contrib/auto-render.min.js" "$dest/contrib/"
cp "$dist"/fonts/*.woff2 "$dest/fonts/"
cp "$work/package/LICENSE" "$dest/LICENSE"
sed -E 's/,url\(fonts\/[A-Za-z0-9_-]+\.woff\) format\("woff"\),url\(fonts\/[A-Za-z0-9_-]+\.ttf\) format\("truetype"\)//g' \
  "$dist/katex.min.css" > "$dest/katex.min.css"
echo "$version" > "$dest/VERSION"
if grep -qE '\.(woff|ttf)\)' "$dest/katex.min.css"; then
  echo "vendor_katex: the CSS still references woff/ttf fonts; the rewrite needs updating" >&2
  exit 1
fi
echo "KaTeX $version vendored into ${dest#"$root/"}"

iw="$root/docs/assets/vendor/iframe-worker"
(cd "$work" && npm pack "iframe-worker@$iframe_worker" --silent >/dev/null \
  && mkdir iw && tar xzf "iframe-worker-$iframe_worker.tgz" -C iw)
rm -rf "$iw" && mkdir -p "$iw"
cp "$work/iw/package/shim/index.js" "$iw/shim.js"
cp "$work/iw/package/LICENSE" "$iw/LICENSE"
echo "$iframe_worker" > "$iw/VERSION"
echo "iframe-worker $iframe_worker vendored into ${iw#"$root/"}"
