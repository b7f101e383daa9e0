#!/usr/bin/env node
// Usage: node js/bin/check-conformance.mjs TABLE_DIR CONFORMANCE.json
// Prints {texts, minCosine, maxAbsDiff, failures} as JSON; exits 1 when a text's rows or vector disagree.
import { readFile } from 'node:fs/promises';

import { compareConformance, loadModel } from '../src/index.js';

const [table, file] = process.argv.slice(2);
if (!table || !file) {
  console.error('usage: check-conformance.mjs TABLE_DIR CONFORMANCE.json');
  process.exit(2);
}
const model = await loadModel(table);
const result = compareConformance(model, JSON.parse(await readFile(file, 'utf-8')));
console.log(JSON.stringify({ table, dtype: model.dtype, ...result }));
process.exit(result.failures.length ? 1 : 0);
