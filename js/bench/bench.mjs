#!/usr/bin/env node
// Usage: node js/bench/bench.mjs TABLE_DIR SENTENCES.txt [--seconds 3] [--chromium PATH] [--no-browser]
//        [--python PYTHON]
// Load time and encode throughput of swembed.js in Node and in headless Chromium (and, with --python, of the
// Python runtime: bench_python.py), one JSON line each: load (median of 3), the first pass over the sentences
// (empty back-off cache: cold) and passes for at least --seconds (warm), each in wall time and in CPU time
// (Node: process.cpuUsage; Chromium: all its processes, from /proc; Python: process_time), the figure that stays
// comparable on a busy machine.
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { launch, waitForDone } from '../tools/chromium.mjs';
import { serve } from '../tools/server.mjs';
import { load, pass, warm } from './measure.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: {
  seconds: { type: 'string', default: '3' }, chromium: { type: 'string' }, 'no-browser': { type: 'boolean' },
  python: { type: 'string' },
} });
const [table, sentencesPath] = positionals;
if (!table || !sentencesPath) {
  console.error('usage: bench.mjs TABLE_DIR SENTENCES.txt [--seconds S] [--chromium PATH] [--no-browser]');
  process.exit(2);
}
const seconds = Number(values.seconds);
const sentences = (await readFile(sentencesPath, 'utf-8')).split('\n').filter((s) => s.trim());
const cpu = cpus()[0]?.model;
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

/** Run the bench's steps through `step(name, ...args)`, timing each with `cpuSeconds()`; one JSON summary. */
async function run(step, cpuSeconds) {
  const timed = async (...args) => {
    const cpu = cpuSeconds();
    const result = await step(...args);
    return { ...result, cpuS: cpuSeconds() - cpu };
  };
  const loads = [];
  for (let i = 0; i < 3; i++) loads.push(await timed('load'));
  loads.sort((a, b) => a.ms - b.ms);
  const { rows, dim, dtype, ms, cpuS } = loads[1];
  const cold = await timed('pass');
  const hot = await timed('warm', seconds);
  return { rows, dim, dtype, sentences: sentences.length, loadMs: ms, loadCpuMs: cpuS * 1000,
    coldPerS: cold.encoded / cold.wallS, coldPerCpuS: cold.encoded / cold.cpuS,
    warmPerS: hot.encoded / hot.wallS, warmPerCpuS: hot.encoded / hot.cpuS };
}

let model = null;
const nodeSteps = {
  load: async () => {
    const result = await load(resolve(table));
    model = result.model;
    return { ms: result.ms, rows: model.rows, dim: model.dim, dtype: model.dtype };
  },
  pass: () => pass(model, sentences),
  warm: (s) => warm(model, sentences, s),
};
const nodeCpu = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};
console.log(JSON.stringify({ runtime: `node ${process.version}`, cpu,
  ...(await run((name, ...args) => nodeSteps[name](...args), nodeCpu)) }));
model = null;
if (!values['no-browser']) {
  const js = join(dirname(fileURLToPath(import.meta.url)), '..');
  const server = await serve({ '/js/': js, '/table/': table, '/sentences.txt': sentencesPath });
  const browser = await launch(values.chromium);
  try {
    await browser.open(`${server.url}/js/bench/bench.html?table=/table/&sentences=/sentences.txt`);
    await browser.evaluate(waitForDone(600));
    const step = (name, ...args) => browser.evaluate(`window.bench.${name}(${args.map(Number).join(',')})`);
    const result = await run(step, () => treeCpuSeconds(browser.pid));
    console.log(JSON.stringify({ runtime: await browser.version(), cpu, ...result }));
  } finally {
    await browser.close();
    server.close();
  }
}
if (values.python) {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'bench_python.py');
  const line = execFileSync(values.python, [script, table, sentencesPath, String(seconds)], { encoding: 'utf-8' });
  console.log(JSON.stringify({ ...JSON.parse(line.trim().split('\n').pop()), cpu }));
}
