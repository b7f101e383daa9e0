#!/usr/bin/env node
// The demo in headless Chromium: node js/demo/check.mjs TABLE_DIR SENTENCES.txt --query "..." [--screenshot P]
// [--chromium PATH]. Prints {rows, dim, dtype, sentences, loadMs, encodeMs, answer, browser} as JSON; exits 1
// when the page fails or answers nothing.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { launch, waitForDone } from '../tools/chromium.mjs';
import { serve } from '../tools/server.mjs';

const { values, positionals } = parseArgs({ allowPositionals: true, options: {
  query: { type: 'string', default: 'a cat sleeping on the sofa' }, screenshot: { type: 'string' },
  chromium: { type: 'string' }, seconds: { type: 'string', default: '120' },
} });
const [table, sentences] = positionals;
const js = join(dirname(fileURLToPath(import.meta.url)), '..');
const server = await serve({ '/js/': js, '/js/demo/table/': table, '/js/demo/sentences.txt': sentences });
const browser = await launch(values.chromium, { width: 1000, height: 760 });
let ok = false;
try {
  await browser.open(`${server.url}/js/demo/?q=${encodeURIComponent(values.query)}`);
  const result = await browser.evaluate(waitForDone(Number(values.seconds)));
  if (values.screenshot) await browser.screenshot(values.screenshot);
  console.log(JSON.stringify({ ...result, browser: await browser.version() }));
  ok = Boolean(result.answer && result.answer.top.length);
} catch (error) {
  console.error(`demo failed: ${error.message}\n${browser.console.join('\n')}`);
} finally {
  await browser.close();
  server.close();
}
process.exit(ok ? 0 : 1);
