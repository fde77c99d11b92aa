#!/usr/bin/env bash
# Vendor KaTeX into docs/assets/vendor/katex so math renders with no third-party request.
# Takes the package from the npm registry (npm pack), keeps the minified JS and CSS, the
# auto-render extension and the woff2 fonts, and rewrites the CSS to reference woff2 only
# (every browser that runs KaTeX reads woff2; the local-asset check then finds every font).
set -euo pipefail
version="${1:-0.19.1}"
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
