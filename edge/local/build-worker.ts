// `npm run build`: writes the Worker bundle that wrangler deploys (wrangler.toml [build]), the
// same bundle `npm start` runs (edge/local/bundle.ts).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { bundleWorker, REPO_ROOT } from "./bundle";

const outfile = `${REPO_ROOT}.build/worker/index.js`;
const script = await bundleWorker();
mkdirSync(dirname(outfile), { recursive: true });
writeFileSync(outfile, script);
console.log(`worker bundle: ${outfile} (${(Buffer.byteLength(script) / 1024 / 1024).toFixed(2)} MiB)`);
