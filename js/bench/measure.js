// The steps of the bench (bench/bench.mjs), the same code in Node and in the browser; the caller times each step's
// CPU (Node: process.cpuUsage; Chromium: its processes in /proc) around these calls.
import { loadModel } from '../src/index.js';

const now = () => performance.now();

/** Load the table: {model, ms}. */
export async function load(location) {
  const t = now();
  const model = await loadModel(location);
  return { model, ms: now() - t };
}

/** Encode every sentence once, in order: {encoded, wallS}. The first pass after a load fills the back-off cache. */
export function pass(model, sentences) {
  const t = now();
  for (const s of sentences) model.encode(s);
  return { encoded: sentences.length, wallS: (now() - t) / 1000 };
}

/** Encode the sentences over and over for at least `seconds`: {encoded, wallS}. */
export function warm(model, sentences, seconds) {
  let n = 0;
  const t = now();
  while (now() - t < seconds * 1000) {
    for (const s of sentences) model.encode(s);
    n += sentences.length;
  }
  return { encoded: n, wallS: (now() - t) / 1000 };
}
