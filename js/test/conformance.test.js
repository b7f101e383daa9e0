// Node conformance test: each table of SWEMBED_CONFORMANCE ("TABLE_DIR=CONFORMANCE.json;...", written by
// `swembed export` and `swembed conformance`; tests/test_js_runtime.py sets it) must give the Python rows and
// vectors. Without SWEMBED_CONFORMANCE only the unit tests below run.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';

import { compareConformance, crc32, loadModel, parseNpy } from '../src/index.js';
import { charGramBuckets } from '../src/tokenizer.js';
import { halfToFloat } from '../src/npy.js';

/** A .npy file (format 1.0) of `data` (a typed array) with NumPy's `descr` and `shape`. */
function npy(descr, shape, data) {
  const header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')},), }`;
  const padded = header + ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const bytes = new Uint8Array(10 + padded.length + data.byteLength);
  bytes.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, padded.length & 0xff, padded.length >> 8]);
  bytes.set(new TextEncoder().encode(padded), 10);
  bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 10 + padded.length);
  return bytes.buffer;
}

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
  const bytes = npy('<f2', [2, 2], new Uint16Array([0x3c00, 0xc000, 0x3555, 0x0001]));
  const { dtype, shape, data } = parseNpy(bytes);
  assert.equal(dtype, 'float16');
  assert.deepEqual(shape, [2, 2]);
  const half = halfToFloat();
  assert.deepEqual(Array.from(data, (h) => half[h]), [1, -2, Math.fround(0.333251953125), 2 ** -24]);
  assert.throws(() => parseNpy(bytes.slice(0, 20)), /unreadable|truncated/);
});

test('int4 and codebook storage decode as swembed.runtime.storage writes them', async () => {
  const { StaticEmbedder } = await import('../src/index.js');
  const base = { format: 'swe-static', format_version: 1, dim: 3, tokenization: { oov_backoff: 'none' } };
  const vocabText = 'cat\ndog\n';
  const scales = npy('<f4', [2], new Float32Array([0.5, 2]));
  // int4: columns 2j (low nibble) and 2j+1 (high nibble), each q + 8; an odd dim pads a last nibble 8
  const packed = new Uint8Array([(8 + 1) | ((8 - 2) << 4), 8 + 7 | (8 << 4), (8 - 7) | ((8 + 3) << 4), 8 | (8 << 4)]);
  const int4 = new StaticEmbedder({ config: { ...base, storage: { kind: 'int4' } }, vocabText, scales,
    embeddings: npy('|u1', [2, 2], packed) });
  const expected = (v) => v.map((x) => x / Math.hypot(...v));
  assert.deepEqual(Array.from(int4.encode('cat')), expected([0.5, -1, 3.5]).map(Math.fround));
  assert.deepEqual(Array.from(int4.encode('dog')), expected([-14, 6, 0]).map(Math.fround));
  // codebook: row i = shared[codes[i]] * scales[i]
  const codebook = new StaticEmbedder({ config: { ...base, storage: { kind: 'codebook', centroids: 2 } }, vocabText,
    scales, embeddings: npy('<f4', [2, 3], new Float32Array([1, 2, 2, 0, 0, 1])),
    codes: npy('<u2', [2], new Uint16Array([1, 0])) });
  assert.deepEqual(Array.from(codebook.encode('cat dog')), expected([2, 4, 4.5]).map(Math.fround));
  assert.throws(() => new StaticEmbedder({ config: { ...base, storage: { kind: 'codebook' } }, vocabText, scales,
    embeddings: npy('<f4', [2, 3], new Float32Array(6)), codes: npy('<u2', [2], new Uint16Array([0, 2])) }), /codes/);
});

test('tables outside the portable subset are refused with a message', async () => {
  const { StaticEmbedder, FormatError } = await import('../src/index.js');
  const folder = (config) => ({ config: { format: 'swe-static', format_version: 1, ...config },
    vocabText: 'cat\ndog\n', embeddings: npy('<f4', [2, 4], new Float32Array(8)) });
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

test('vocab.txt is refused as Python refuses it: a BOM, a repeated, padded or empty word', async () => {
  const { StaticEmbedder, FormatError } = await import('../src/index.js');
  const folder = (vocabText, tokenization = { oov_backoff: 'none' }) => new StaticEmbedder({
    config: { format: 'swe-static', format_version: 1, tokenization }, vocabText,
    embeddings: npy('<f4', [3, 2], new Float32Array(6)) });
  assert.equal(folder('cat\ndog\r\nowl\r').rows, 3); // \n, \r\n and \r all end a line
  for (const [vocab, message] of [
    ['\ufeffcat\ndog\nowl\n', /byte-order mark/],
    ['cat\ndog\ncat\n', /vocab.txt:3: "cat" repeats line 1/],
    ['cat\n dog\nowl\n', /vocab.txt:2: " dog" is empty or has surrounding whitespace/],
    ['cat\ndog\u3000\nowl\n', /vocab.txt:2/],
    ['cat\n\nowl\n', /vocab.txt:2: "" is empty/],
    ['cat\ndog\nowl', /2 words in vocab.txt but 3 table rows/], // a last line without its newline is dropped
  ]) assert.throws(() => folder(vocab), (e) => e instanceof FormatError && message.test(e.message));
  assert.equal(folder('cat\ndog\u200b\nowl\n').rows, 3); // U+200B is not white space to str.isspace()
  assert.throws(() => folder('cat\ndog\nowl\n', { oov_backoff: 'none', lowercse: true }), /unknown key "lowercse"/);
});

test('characters assigned after Unicode 14.0.0 are neither words nor cased, as in Python 3.11', async () => {
  const { WordTokenizer, tokenizationRules } = await import('../src/index.js');
  const words = (text) => new WordTokenizer(new Map(), tokenizationRules({ oov_backoff: 'none' })).words(text);
  assert.deepEqual(words('abc\u{11f04}def x\u{31350}1'), ['abc', 'def', 'x', '1']); // Kawi, CJK ext H: 15.0
  assert.deepEqual(words('ΟΔΟΣ\u{10d50} ΑΣ\u{10d50}Α \ua7cb'), ['οδος', 'ας', 'α']); // Garay, U+A7CB: 16.0
  assert.deepEqual(words('\u{1e030}\u{1ccf0} İ'), ['i']); // modifier letter and outlined digit keep no NFKC form
});
