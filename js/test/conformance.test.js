// Node conformance test: each table of SWEMBED_CONFORMANCE ("TABLE_DIR=CONFORMANCE.json;...", written by
// `swembed export` and `swembed conformance`; tests/test_js_runtime.py sets it) must give the Python rows and
// vectors. Without SWEMBED_CONFORMANCE only the unit tests below run.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';

import { compareConformance, crc32, loadModel, parseNpy } from '../src/index.js';
import { charGramBuckets } from '../src/tokenizer.js';
import { halfToFloat } from '../src/npy.js';

const cases = (process.env.SWEMBED_CONFORMANCE || '').split(';').filter(Boolean).map((pair) => pair.split('='));

for (const [table, file] of cases) {
  test(`conformance of ${table}`, async (t) => {
    const model = await loadModel(table);
    const record = JSON.parse(await readFile(file, 'utf-8'));
    const result = compareConformance(model, record);
    t.diagnostic(JSON.stringify({ table, dtype: model.dtype, texts: result.texts, minCosine: result.minCosine,
      maxAbsDiff: result.maxAbsDiff }));
    assert.deepEqual(result.failures, []);
    assert.ok(result.minCosine >= 0.9999);
  });
}

test('crc32 matches zlib', () => {
  assert.equal(crc32(new TextEncoder().encode('123456789')), 0xcbf43926);
  assert.equal(crc32(new Uint8Array()), 0);
});

test('char grams are counted in code points, hashed as UTF-8', () => {
  // "<a>" has one 3-gram; "<😀>" too (one code point, two UTF-16 units)
  assert.equal(charGramBuckets('a', 1 << 20).length, 1);
  assert.deepEqual(charGramBuckets('😀', 1 << 30), [crc32(new TextEncoder().encode('<😀>')) % (1 << 30)]);
  assert.equal(charGramBuckets('word', 100).length, 4 + 3 + 2);
});

test('npy parsing and half floats', () => {
  const header = "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 2), }";
  const padded = header + ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const bytes = new Uint8Array(10 + padded.length + 8);
  bytes.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, padded.length & 0xff, padded.length >> 8]);
  bytes.set(new TextEncoder().encode(padded), 10);
  new Uint16Array(bytes.buffer, 10 + padded.length, 4).set([0x3c00, 0xc000, 0x3555, 0x0001]);
  const { dtype, shape, data } = parseNpy(bytes.buffer);
  assert.equal(dtype, 'float16');
  assert.deepEqual(shape, [2, 2]);
  const half = halfToFloat();
  assert.deepEqual(Array.from(data, (h) => half[h]), [1, -2, Math.fround(0.333251953125), 2 ** -24]);
  assert.throws(() => parseNpy(bytes.buffer.slice(0, 20)), /unreadable|truncated/);
});

test('tables outside the portable subset are refused with a message', async () => {
  const { StaticEmbedder, FormatError } = await import('../src/index.js');
  const npy = (rows, dim) => {
    const header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${rows}, ${dim}), }`;
    const padded = header + ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
    const bytes = new Uint8Array(10 + padded.length + rows * dim * 4);
    bytes.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, padded.length & 0xff, padded.length >> 8]);
    bytes.set(new TextEncoder().encode(padded), 10);
    return bytes.buffer;
  };
  const folder = (config) => ({ config: { format: 'swe-static', format_version: 1, ...config },
    vocabText: 'cat\ndog\n', embeddings: npy(2, 4) });
  assert.equal(new StaticEmbedder(folder({ tokenization: { oov_backoff: 'none' } })).encode('cat').length, 4);
  for (const [config, message] of [
    [{ tokenization: { words: 'teacher' } }, /words = "teacher" is not supported/],
    [{ tokenization: { word_pattern: '\\w+' } }, /word_pattern/],
    [{ languages: { en: { rows: [0, 1] }, de: { rows: [1, 2] } } }, /multilingual/],
    [{ format_version: 2 }, /newer/],
    [{ pieces: { rows: [1, 3] } }, /outside the 2 table rows/],
  ]) assert.throws(() => new StaticEmbedder(folder(config)), (e) => e instanceof FormatError && message.test(e.message));
  assert.throws(() => new StaticEmbedder({ ...folder({}), vocabText: 'cat\n' }), /1 words in vocab.txt but 2/);
});
