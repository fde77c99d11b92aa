// Run Material's own search worker (the bundled lunr index and query code) in Node on a built
// site's search index, as the browser does; print each query's result pages in rank order.
// usage: node tests/search_rank.mjs SITE_DIR QUERY... -> {"query": ["page/#anchor score", ...]}
import fs from "node:fs";
import vm from "node:vm";
const [site, ...queries] = process.argv.slice(2);
const dir = `${site}/assets/javascripts/workers`;
const file = fs.readdirSync(dir).find(f => /^search\..*\.min\.js$/.test(f));
const index = JSON.parse(fs.readFileSync(`${site}/search/search_index.json`, "utf8"));
const listeners = [];
let replies = [];
const ctx = {
  console, setTimeout, clearTimeout,
  addEventListener: (t, f) => listeners.push(f),
  postMessage: m => replies.push(m),
};
ctx.self = ctx; ctx.globalThis = ctx;
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(`${dir}/${file}`, "utf8"), ctx);
const send = data => listeners.forEach(f => f({ data }));
send({ type: 0, data: { ...index, options: { suggest: true } } });
await new Promise(r => setTimeout(r, 50));
const out = {};
for (const q of queries) {
  replies = [];
  send({ type: 2, data: q });
  await new Promise(r => setTimeout(r, 20));
  const res = replies.find(m => m.type === 3);
  out[q] = res ? res.data.items.map(group => group[0].location + " " + (group[0].score||0).toFixed(2)) : null;
}
console.log(JSON.stringify(out));
