// Load time and encode throughput of one table, the same code in Node and in the browser (bench/bench.mjs).
import { loadModel } from '../src/index.js';

const now = () => performance.now();

/** Load the table `loads` times; {model, loadMs (median), coldPerS (first pass over the sentences, empty back-off
 * cache)}. */
export async function prepare(location, sentences, loads = 3) {
  const times = [];
  let model = null;
  for (let i = 0; i < loads; i++) {
    const t = now();
    model = await loadModel(location);
    times.push(now() - t);
  }
  times.sort((a, b) => a - b);
  const t = now();
  for (const s of sentences) model.encode(s);
  const coldPerS = sentences.length / ((now() - t) / 1000);
  return { model, loadMs: times[Math.floor(times.length / 2)], coldPerS };
}

/** Encode the sentences over and over for at least `seconds`: {sentences encoded, wall seconds}. */
export function warm(model, sentences, seconds) {
  let n = 0;
  const t = now();
  while (now() - t < seconds * 1000) {
    for (const s of sentences) model.encode(s);
    n += sentences.length;
  }
  return { encoded: n, wallS: (now() - t) / 1000 };
}
