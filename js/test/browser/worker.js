// A module Web Worker: checks the cases it is sent ([[table, file], ...], minCosine) and posts the results back.
import { check } from './check.js';

self.onmessage = async ({ data: { cases, minCosine } }) => {
  const results = [];
  for (const [table, file] of cases) results.push({ ...(await check(table, file, minCosine)), worker: true });
  self.postMessage(results);
};
