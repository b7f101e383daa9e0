#!/usr/bin/env node
// Usage: node js/bin/check-conformance.mjs TABLE_DIR CONFORMANCE.json [MIN_COSINE (default 0.9999)]
// Prints {texts, minCosine, maxAbsDiff, failures} as JSON; exit status 1 when a text's rows or vector disagree,
// 2 (one line on stderr naming the file and the problem) when the table or the file cannot be read.
// It sets process.exitCode rather than calling process.exit(), so that piped output is never cut short.
import { readFile } from 'node:fs/promises';

import { compareConformance, loadModel } from '../src/index.js';

async function main([table, file, minCosine = '0.9999']) {
  if (!table || !file) {
    console.error('usage: check-conformance.mjs TABLE_DIR CONFORMANCE.json');
    return 2;
  }
  let model;
  let record;
  try {
    model = await loadModel(table);
    record = JSON.parse(await readFile(file, 'utf-8'));
    if (record?.format !== 'swe-static-conformance' || !Array.isArray(record.texts)) {
      throw new Error('not a conformance file (written by swembed conformance)');
    }
  } catch (error) {
    const where = model ? `${file}: ` : '';
    console.error(`check-conformance: ${where}${error.message.split('\n')[0]}`);
    return 2;
  }
  const result = compareConformance(model, record, Number(minCosine));
  console.log(JSON.stringify({ table, dtype: model.dtype, ...result }));
  return result.failures.length ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
