// `node --import tsx edge/local/main.ts`: `npm start` under the TypeScript loader (some tests and
// benchmarks spawn it so); the same build and service as edge/local/start.mjs.
import "./start.mjs";
