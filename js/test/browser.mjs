#!/usr/bin/env node
// The conformance check in headless Chromium:
//   node js/test/browser.mjs [--chromium PATH] [--min-cosine C] [--worker] [--unicode] --case TABLE=CONF ...
// Serves js/ and each table over HTTP, loads test/browser/conformance.html, prints one JSON summary line per
// table ({table, dtype, texts, minCosine, maxAbsDiff, failures}, or {table, error} when it cannot be read); with
// --worker each table is loaded and checked in a Web Worker; with --unicode one more line {unicode: digests} (the
// probe of js/test/unicode-probe.js). Exits 1 when any text disagrees or any table cannot be read.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { launch, waitForDone } from '../tools/chromium.mjs';
import { serve } from '../tools/server.mjs';

const { values } = parseArgs({ options: {
  chromium: { type: 'string' }, case: { type: 'string', multiple: true, default: [] },
  'min-cosine': { type: 'string', default: '0.9999' }, worker: { type: 'boolean' }, unicode: { type: 'boolean' },
} });
const js = join(dirname(fileURLToPath(import.meta.url)), '..');
const mounts = { '/js/': js };
const query = values.case.map((pair, i) => {
  const [table, file] = pair.split('=');
  mounts[`/t${i}/`] = table;
  mounts[`/c${i}.json`] = file;
  return `case=${encodeURIComponent(`/t${i}/|/c${i}.json`)}`;
});
query.push(`min=${values['min-cosine']}`);
if (values.worker) query.push('worker=1');
if (values.unicode) query.push('unicode=1');
const server = await serve(mounts);
const browser = await launch(values.chromium);
let failed = false;
try {
  await browser.open(`${server.url}/js/test/browser/conformance.html?${query.join('&')}`);
  const results = await browser.evaluate(waitForDone(60));
  const version = await browser.version();
  values.case.forEach((pair, i) => {
    const r = results.cases[i];
    failed ||= Boolean(r.error) || r.failures.length > 0 || !(r.minCosine >= Number(values['min-cosine']));
    console.log(JSON.stringify({ ...r, table: pair.split('=')[0], browser: version }));
  });
  if (values.unicode) console.log(JSON.stringify({ unicode: results.unicode, browser: version }));
} catch (error) {
  console.error(`browser test failed: ${error.message}\n${browser.console.join('\n')}`);
  failed = true;
} finally {
  await browser.close();
  server.close();
}
process.exitCode = failed ? 1 : 0;
