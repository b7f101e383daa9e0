#!/usr/bin/env node
// Usage: node js/bench/bench.mjs TABLE_DIR SENTENCES.txt [--seconds 3] [--chromium PATH] [--no-browser]
// Load time (median of 3 loads) and sentences/s (first pass with an empty back-off cache, then passes for at least
// --seconds) of swembed.js in Node and in headless Chromium; one JSON line each. The Python runtime's figures on
// the same texts: swembed bench TABLE_DIR --texts SENTENCES.txt
import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { launch, waitForDone } from '../tools/chromium.mjs';
import { serve } from '../tools/server.mjs';
import { measure } from './measure.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: {
  seconds: { type: 'string', default: '3' }, chromium: { type: 'string' }, 'no-browser': { type: 'boolean' },
} });
const [table, sentencesPath] = positionals;
if (!table || !sentencesPath) {
  console.error('usage: bench.mjs TABLE_DIR SENTENCES.txt [--seconds S] [--chromium PATH] [--no-browser]');
  process.exit(2);
}
const seconds = Number(values.seconds);
const sentences = (await readFile(sentencesPath, 'utf-8')).split('\n').filter((s) => s.trim());
const cpu = cpus()[0]?.model;
console.log(JSON.stringify({ runtime: `node ${process.version}`, cpu, ...(await measure(resolve(table), sentences, { seconds })) }));
if (!values['no-browser']) {
  const js = join(dirname(fileURLToPath(import.meta.url)), '..');
  const server = await serve({ '/js/': js, '/table/': table, '/sentences.txt': sentencesPath });
  const browser = await launch(values.chromium);
  try {
    await browser.open(`${server.url}/js/bench/bench.html?table=/table/&sentences=/sentences.txt&seconds=${seconds}`);
    const result = await browser.evaluate(waitForDone(600));
    console.log(JSON.stringify({ runtime: await browser.version(), cpu, ...result }));
  } finally {
    await browser.close();
    server.close();
  }
}
