#!/usr/bin/env node
// The conformance check in headless Chromium: node js/test/browser.mjs [--chromium PATH] --case TABLE=CONF ...
// Serves js/ and each table over HTTP, loads test/browser/conformance.html, prints one JSON summary line per
// table ({table, dtype, texts, minCosine, maxAbsDiff, failures}); exits 1 when any text disagrees.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { launch, waitForDone } from '../tools/chromium.mjs';
import { serve } from '../tools/server.mjs';

const { values } = parseArgs({ options: {
  chromium: { type: 'string' }, case: { type: 'string', multiple: true, default: [] },
  'min-cosine': { type: 'string', default: '0.9999' },
} });
const js = join(dirname(fileURLToPath(import.meta.url)), '..');
const mounts = { '/js/': js };
const query = values.case.map((pair, i) => {
  const [table, file] = pair.split('=');
  mounts[`/t${i}/`] = table;
  mounts[`/c${i}.json`] = file;
  return `case=${encodeURIComponent(`/t${i}/|/c${i}.json`)}`;
});
const server = await serve(mounts);
const browser = await launch(values.chromium);
let failed = false;
try {
  await browser.open(`${server.url}/js/test/browser/conformance.html?${query.join('&')}`);
  const results = await browser.evaluate(waitForDone(60));
  const version = await browser.version();
  values.case.forEach((pair, i) => {
    const r = results[i];
    failed ||= r.failures.length > 0 || !(r.minCosine >= Number(values['min-cosine']));
    console.log(JSON.stringify({ ...r, table: pair.split('=')[0], browser: version }));
  });
} catch (error) {
  console.error(`browser test failed: ${error.message}\n${browser.console.join('\n')}`);
  failed = true;
} finally {
  await browser.close();
  server.close();
}
process.exit(failed ? 1 : 0);
