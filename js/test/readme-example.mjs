#!/usr/bin/env node
// The browser example of js/README.md (its ```html block), run as written in headless Chromium:
//   node js/test/readme-example.mjs TABLE [--chromium PATH]
// serves the page at /index.html, js/ at /swembed/ and TABLE at /models/edge-int8/, and prints {text, browser}:
// what the page shows. Exit status 1 when it shows no "cosine" within 60 s.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { launch } from '../tools/chromium.mjs';
import { serve } from '../tools/server.mjs';

const { values, positionals } = parseArgs({ options: { chromium: { type: 'string' } }, allowPositionals: true });
const js = join(dirname(fileURLToPath(import.meta.url)), '..');
const example = (await readFile(join(js, 'README.md'), 'utf-8')).match(/```html\n([\s\S]*?)```/);
if (!example || positionals.length !== 1) {
  console.error(example ? 'usage: readme-example.mjs TABLE [--chromium PATH]' : 'js/README.md has no ```html block');
  process.exit(2);
}
const folder = await mkdtemp(join(tmpdir(), 'swembed-readme-'));
await writeFile(join(folder, 'index.html'), `<!doctype html>\n<meta charset="utf-8">\n<body></body>\n${example[1]}`);
const server = await serve({ '/index.html': join(folder, 'index.html'), '/swembed/': js,
  '/models/edge-int8/': positionals[0] });
const browser = await launch(values.chromium);
try {
  await browser.open(`${server.url}/index.html`);
  const text = await browser.evaluate(`new Promise((resolve) => {
    const deadline = Date.now() + 60000;
    const check = () => document.body.textContent.startsWith('cosine') || Date.now() > deadline
      ? resolve(document.body.textContent) : setTimeout(check, 50);
    check();
  })`);
  console.log(JSON.stringify({ text, browser: await browser.version() }));
  process.exitCode = text.startsWith('cosine') ? 0 : 1;
  if (process.exitCode) console.error(browser.console.join('\n'));
} finally {
  await browser.close();
  server.close();
  await rm(folder, { recursive: true, force: true });
}
