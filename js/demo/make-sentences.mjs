#!/usr/bin/env node
// Usage: node js/demo/make-sentences.mjs CORPUS(.txt or .txt.gz, one sentence per line) N > sentences.txt
// N sentences spread evenly over the corpus (every k-th line), for the demo and the bench; never committed.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

const [path, count = '5000'] = process.argv.slice(2);
if (!path) {
  console.error('usage: make-sentences.mjs CORPUS.txt[.gz] [N]');
  process.exit(2);
}
const bytes = readFileSync(path);
const lines = (path.endsWith('.gz') ? gunzipSync(bytes) : bytes).toString('utf-8').split('\n').filter((s) => s.trim());
const n = Math.min(Number(count), lines.length);
const step = lines.length / n;
const out = [];
for (let i = 0; i < n; i++) out.push(lines[Math.floor(i * step)].trim());
process.stdout.write(`${out.join('\n')}\n`);
