#!/usr/bin/env node
// Usage: node js/bench/bench.mjs TABLE_DIR SENTENCES.txt [--seconds 3] [--chromium PATH] [--no-browser]
// swembed.js in Node and in headless Chromium, one JSON line each: load time (median of 3 loads), sentences/s of
// the first pass (empty back-off cache) and of passes for at least --seconds (warm), and the warm rate per CPU
// second (Node: this process; Chromium: all its processes, from /proc), the figure that stays comparable on a
// busy machine. The Python runtime's figures on the same texts: swembed bench TABLE_DIR --texts SENTENCES.txt
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { launch, waitForDone } from '../tools/chromium.mjs';
import { serve } from '../tools/server.mjs';
import { prepare, warm } from './measure.js';

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
const rates = ({ encoded, wallS }, cpuS) => ({ warmPerS: encoded / wallS, warmPerCpuS: cpuS ? encoded / cpuS : null });

/** CPU seconds (user + system) of process `root` and all its descendants, from /proc (Linux). */
function treeCpuSeconds(root) {
  const stats = new Map();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf-8').split(') ')[1].split(' ');
      stats.set(Number(pid), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
    } catch { /* the process ended meanwhile */ }
  }
  let ticks = 0;
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop();
    ticks += stats.get(pid)?.ticks || 0;
    for (const [child, s] of stats) if (s.ppid === pid) todo.push(child);
  }
  return ticks / 100; // USER_HZ
}

const node = await prepare(resolve(table), sentences);
const before = process.cpuUsage();
const nodeWarm = warm(node.model, sentences, seconds);
const used = process.cpuUsage(before);
console.log(JSON.stringify({ runtime: `node ${process.version}`, cpu, rows: node.model.rows, dim: node.model.dim,
  dtype: node.model.dtype, sentences: sentences.length, loadMs: node.loadMs, coldPerS: node.coldPerS,
  ...rates(nodeWarm, (used.user + used.system) / 1e6) }));
if (!values['no-browser']) {
  const js = join(dirname(fileURLToPath(import.meta.url)), '..');
  const server = await serve({ '/js/': js, '/table/': table, '/sentences.txt': sentencesPath });
  const browser = await launch(values.chromium);
  try {
    await browser.open(`${server.url}/js/bench/bench.html?table=/table/&sentences=/sentences.txt`);
    const result = await browser.evaluate(waitForDone(600));
    const start = treeCpuSeconds(browser.pid);
    const browserWarm = await browser.evaluate(`window.warm(${seconds})`);
    const cpuS = treeCpuSeconds(browser.pid) - start;
    console.log(JSON.stringify({ runtime: await browser.version(), cpu, ...result, ...rates(browserWarm, cpuS) }));
  } finally {
    await browser.close();
    server.close();
  }
}
