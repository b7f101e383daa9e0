#!/usr/bin/env node
// Usage: node js/demo/serve.mjs TABLE_DIR SENTENCES.txt [PORT]: serves the demo; open the printed URL.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { serve } from '../tools/server.mjs';

const [table, sentences] = process.argv.slice(2);
if (!table || !sentences) {
  console.error('usage: serve.mjs TABLE_DIR SENTENCES.txt');
  process.exit(2);
}
const js = join(dirname(fileURLToPath(import.meta.url)), '..');
const server = await serve({ '/js/': js, '/js/demo/table/': table, '/js/demo/sentences.txt': sentences });
console.log(`${server.url}/js/demo/ (Ctrl-C to stop)`);
