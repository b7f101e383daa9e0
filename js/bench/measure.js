// Load time and encode throughput of one table, the same code in Node and in the browser (bench/bench.mjs).
import { loadModel } from '../src/index.js';

const now = () => performance.now();

/** {loadMs (median of `loads`), coldPerS (first pass, empty back-off cache), warmPerS (passes for >= seconds),
 * warmPerCpuS (the same per CPU second, Node only: comparable on a busy machine)}. */
export async function measure(location, sentences, { loads = 3, seconds = 3 } = {}) {
  const times = [];
  let model = null;
  for (let i = 0; i < loads; i++) {
    const t = now();
    model = await loadModel(location);
    times.push(now() - t);
  }
  times.sort((a, b) => a - b);
  let t = now();
  for (const s of sentences) model.encode(s);
  const coldPerS = sentences.length / ((now() - t) / 1000);
  let n = 0;
  const cpu = () => {
    const usage = globalThis.process?.cpuUsage?.();
    return usage ? (usage.user + usage.system) / 1e6 : null;
  };
  const cpuStart = cpu();
  t = now();
  while (now() - t < seconds * 1000) {
    for (const s of sentences) model.encode(s);
    n += sentences.length;
  }
  const warmPerS = n / ((now() - t) / 1000);
  const warmPerCpuS = cpuStart === null ? null : n / (cpu() - cpuStart); // Node only: CPU seconds of this process
  return { rows: model.rows, dim: model.dim, dtype: model.dtype, sentences: sentences.length,
    loadMs: times[Math.floor(times.length / 2)], coldPerS, warmPerS, warmPerCpuS };
}
