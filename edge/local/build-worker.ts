// `npm run build`: writes the Worker bundle that wrangler deploys (wrangler.toml [build]).
import * as esbuild from "esbuild";
import { REPO_ROOT, WORKER_BUILD } from "./bundle";

const outfile = `${REPO_ROOT}.build/worker/index.js`;
const result = await esbuild.build({ ...WORKER_BUILD, outfile, metafile: true });
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(`worker bundle: ${outfile} (${(bytes / 1024 / 1024).toFixed(2)} MiB)`);
