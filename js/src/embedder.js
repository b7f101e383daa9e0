/**
 * StaticEmbedder: a swembed table and its tokeniser. encode(text) is the weighted mean of the text's rows,
 * L2-normalised (per sub-space for an ensemble), as a Float32Array; a text with no row is the zero vector.
 */
import { halfToFloat, parseNpy } from './npy.js';
import { search, similarity } from './search.js';
import { FormatError, WEIGHTS, WordTokenizer, tokenizationRules } from './tokenizer.js';
import { PADDED } from './unicode.js';
import { WordPiece } from './wordpiece.js';

export const FORMAT_NAME = 'swe-static';
export const FORMAT_VERSION = 1;
const MAGNITUDES = [1e-15, 1e15]; // a non-zero row's largest |value| (and every scale), as Python checks it
const FLOAT32_TINY = 2 ** -126;
/** The file of each kind of row weights (config.json's kind_weights names them): a query's and a passage's rows in
 * its mean (encode's kinds), and the BM25 weight of a query word's term in lexical and hybrid search (search.js). */
export const KIND_WEIGHT_FILES = {
  query: 'query_weights.npy', document: 'document_weights.npy', lexical: 'lexical_weights.npy',
};
/** encode's kinds besides none. */
export const ENCODE_KINDS = ['query', 'document'];
const KIND_WEIGHT_RANGE = [1e-6, 1e6];

/** What encode and encodeBatch throw for an argument that is not a text (a TypeError). */
export class InputError extends TypeError {}

export class StaticEmbedder {
  /**
   * Build from a folder's parts: config (parsed config.json), vocabText (vocab.txt), embeddings and scales
   * (.npy ArrayBuffers; scales for int8 only), tokenizerJson (parsed tokenizer.json, or null), kindWeights
   * ({query, document}: the .npy ArrayBuffers of the row weights config.json's kind_weights names).
   */
  constructor({ config, vocabText, embeddings, scales = null, tokenizerJson = null, codes = null, kindWeights = {} }) {
    checkConfig(config);
    let table = parseNpy(embeddings, 'embeddings.npy');
    if (table.shape.length !== 2) throw new FormatError(`embeddings.npy: expected 2-D, got shape ${table.shape}`);
    const storage = storageKind(config);
    if (storage === 'int4') table = unpackInt4(table, config.dim);
    else if (!['float32', 'float16', 'int8'].includes(table.dtype)) {
      throw new FormatError(`embeddings.npy: expected float32, float16 or int8 rows, got ${table.dtype}`);
    }
    this.codes = null;
    if (storage === 'codebook') {
      if (!codes) throw new FormatError('a codebook table needs codes.npy');
      const parsed = parseNpy(codes, 'codes.npy');
      const data = parsed.dtype === 'int64' ? Int32Array.from(parsed.data, Number) : parsed.data;
      if (parsed.shape.length !== 1 || !['uint16', 'int32', 'int64', 'uint8'].includes(parsed.dtype) ||
          data.some((c) => c < 0 || c >= table.shape[0])) {
        throw new FormatError(`codes.npy: expected one integer code per row below ${table.shape[0]}`);
      }
      this.codes = data;
    }
    const rows = this.codes ? this.codes.length : table.shape[0];
    const dim = table.shape[1];
    const words = vocabText.split(/\r\n|\r|\n/);
    words.pop(); // what follows the last line end: empty when every line ends in one, as it must
    if (words.length !== rows) {
      throw new FormatError(`${words.length} words in vocab.txt but ${rows} table rows`);
    }
    this.scales = null;
    if (table.dtype === 'int8' || this.codes) {
      if (!scales) throw new FormatError('an int8, int4 or codebook table needs scales.npy (one float32 scale a row)');
      const parsed = parseNpy(scales, 'scales.npy');
      if (parsed.dtype !== 'float32' || parsed.shape.length !== 1 || parsed.shape[0] !== rows) {
        throw new FormatError(`scales.npy: expected ${rows} float32 scales, got ${parsed.shape} ${parsed.dtype}`);
      }
      this.scales = parsed.data;
    }
    this.storage = storage;
    this.config = config;
    this.dtype = table.dtype;
    this.rows = rows;
    this.dim = dim;
    this.data = table.data;
    this.words = words;
    this.half = table.dtype === 'float16' ? halfToFloat() : null;
    const range = (key) => {
      const spec = config[key];
      if (!spec) return null;
      const [start, end] = spec.rows;
      if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= rows)) {
        throw new FormatError(`config.json: ${key} rows ${JSON.stringify(spec.rows)} outside the ${rows} table rows`);
      }
      return [start, end];
    };
    const pieces = range('pieces');
    const grams = range('grams');
    const rules = tokenizationRules(config.tokenization || {});
    const end = pieces ? pieces[0] : rows;
    checkWords(words, end);
    checkValues(table, this.scales, words, this.codes !== null);
    const vocab = new Map();
    for (let i = 0; i < end; i++) vocab.set(words[i], i);
    const pieceRows = new Map();
    if (pieces) for (let i = pieces[0]; i < pieces[1]; i++) pieceRows.set(words[i], i);
    const needsPieces = rules.oov_backoff === 'teacher_prefix' || (rules.oov_backoff === 'pieces' && pieceRows.size);
    const wordPiece = needsPieces && tokenizerJson ? new WordPiece(tokenizerJson) : null;
    if (wordPiece) for (const token of pieceRows.keys()) if (!wordPiece.vocab.has(token)) pieceRows.delete(token);
    this.tokenizer = new WordTokenizer(vocab, rules, wordPiece, pieceRows, grams);
    this.kindWeights = readKindWeights(config, kindWeights, rows);
    const subspaces = config.ensemble && config.ensemble.subspaces;
    if (subspaces && subspaces.length) { // weights over the largest, as Python: their sum cannot overflow
      const top = Math.max(...subspaces.map((s) => s.weight));
      const total = subspaces.reduce((a, s) => a + s.weight / top, 0);
      let at = 0;
      this.blocks = subspaces.map((s) => [at, (at += s.dim), Math.sqrt(s.weight / top / total)]);
    } else this.blocks = [[0, dim, 1]];
  }

  /**
   * The sentence vector of one text. `kind` 'query' or 'document': a table with that kind's row weights multiplies
   * each row's weight in the mean by its own (rounded to float32, as Python); null (the default): none.
   */
  encode(text, kind = null) {
    if (typeof text !== 'string') {
      const hint = Array.isArray(text) ? ': give an array of texts to encodeBatch' : '';
      throw new InputError(`encode takes a string, got ${describe(text)}${hint}`);
    }
    const kindWeights = this.rowWeights(kind);
    const sum = new Float64Array(this.dim);
    const tokenizer = this.tokenizer;
    let total = 0;
    const add = (row, weight) => {
      const w = kindWeights ? Math.fround(weight * kindWeights[row]) : weight;
      this.addRow(sum, row, w);
      total += w;
    };
    for (const word of tokenizer.words(text)) {
      const row = tokenizer.vocab.get(word);
      if (row !== undefined) add(row, 1);
      else {
        const [rows, weights] = tokenizer.backoff(word);
        for (let i = 0; i < rows.length; i++) add(rows[i], weights[i]);
      }
    }
    return this.normalize(sum, total);
  }

  /** The row weights of `kind` (null: none, as for a table without them); an unknown kind is refused. */
  rowWeights(kind) {
    if (kind !== null && kind !== undefined && !ENCODE_KINDS.includes(kind)) {
      throw new RangeError(`kind must be one of ${ENCODE_KINDS.join(', ')} or null, got ${kind}`);
    }
    return (kind && this.kindWeights[kind]) || null;
  }

  /** One vector per text (an array, or any iterable, of strings), each encoded as `kind` (see encode). */
  encodeBatch(texts, kind = null) {
    if (typeof texts === 'string') {
      throw new InputError('encodeBatch takes an array of strings, got a string: give [text], or call encode(text)');
    }
    if (texts === null || typeof texts !== 'object' || typeof texts[Symbol.iterator] !== 'function') {
      throw new InputError(`encodeBatch takes an array of strings, got ${describe(texts)}`);
    }
    const list = Array.from(texts);
    const bad = list.findIndex((text) => typeof text !== 'string');
    if (bad >= 0) throw new InputError(`encodeBatch takes an array of strings; text ${bad} is ${describe(list[bad])}`);
    this.rowWeights(kind);
    return list.map((text) => this.encode(text, kind));
  }

  /** Cosine similarities of texts (search.js, `similarity`): as model.similarity in Python. */
  similarity(a, b, options = {}) {
    return similarity(this, a, b, options);
  }

  /** Each query's topK passages of corpus by cosine, BM25 or both (search.js, `search`): as model.search in Python. */
  search(queries, corpus, topK = 10, options = {}) {
    return search(this, queries, corpus, topK, options);
  }

  /** The weighted mean of table rows, normalised (what encode computes from a text's rows). */
  meanRows(ids, weights) {
    const sum = new Float64Array(this.dim);
    let total = 0;
    for (let k = 0; k < ids.length; k++) {
      this.addRow(sum, ids[k], weights[k]);
      total += weights[k];
    }
    return this.normalize(sum, total);
  }

  /** sum += weight * row (int8, int4 and codebook rows times their scale; half floats widened). */
  addRow(sum, row, weight) {
    const d = this.dim;
    const base = (this.codes ? this.codes[row] : row) * d;
    const data = this.data;
    const f = this.scales ? this.scales[row] * weight : weight;
    if (this.half) {
      const half = this.half;
      for (let j = 0; j < d; j++) sum[j] += half[data[base + j]] * f;
    } else {
      for (let j = 0; j < d; j++) sum[j] += data[base + j] * f;
    }
  }

  /** sum / total, L2-normalised per block (the whole vector, or each ensemble member); zero stays zero. */
  normalize(sum, total) {
    const out = new Float32Array(this.dim);
    if (!(total > 0)) return out;
    for (const [start, end, scale] of this.blocks) {
      if (scale < FLOAT32_TINY) continue; // a weight too small beside the largest to count (Python: in float32)
      let norm = 0;
      for (let j = start; j < end; j++) norm += (sum[j] / total) ** 2;
      norm = Math.sqrt(norm) / scale;
      for (let j = start; j < end; j++) out[j] = norm > 0 ? sum[j] / total / norm : 0;
    }
    return out;
  }
}

/** config.json's kind_weights read as Python reads them (folder.py, _read_kind_weights): kind -> Float32Array. */
function readKindWeights(config, buffers, rows) {
  const named = config.kind_weights;
  if (named === undefined || named === null) return {};
  if (typeof named !== 'object' || Array.isArray(named) ||
      Object.entries(named).some(([kind, file]) => KIND_WEIGHT_FILES[kind] !== file)) {
    throw new FormatError(`config.json: kind_weights must be an object of some of ${JSON.stringify(KIND_WEIGHT_FILES)}, ` +
      `got ${JSON.stringify(named)}`);
  }
  const out = {};
  for (const [kind, file] of Object.entries(named)) {
    if (!buffers[kind]) throw new FormatError(`${file} is missing (kind_weights in config.json names it)`);
    const parsed = parseNpy(buffers[kind], file);
    if (parsed.dtype !== 'float32' || parsed.shape.length !== 1 || parsed.shape[0] !== rows) {
      throw new FormatError(`${file}: expected (${rows},) float32, one weight per table row, got shape ` +
        `${parsed.shape} ${parsed.dtype}`);
    }
    const row = parsed.data.findIndex((w) => !(w >= KIND_WEIGHT_RANGE[0] && w <= KIND_WEIGHT_RANGE[1]));
    if (row >= 0) {
      throw new FormatError(`${file}: row ${row} has weight ${parsed.data[row]}, outside 1e-06 to 1e+06 (the first ` +
        'such row)');
    }
    out[kind] = parsed.data;
  }
  return out;
}

/** A value for a message: its type, and the value itself where it is short. */
function describe(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  const shown = typeof value === 'object' || typeof value === 'function' ? '' : ` (${String(value).slice(0, 60)})`;
  return `${typeof value}${shown}`;
}

/** x as Python's '%.3g' writes it (the magnitude in a refusal, as Python's message has it). */
function formatG3(x) {
  const [mantissa, exponent] = x.toExponential(2).split('e');
  const e = Number(exponent);
  if (e < -4 || e >= 3) {
    return `${mantissa.replace(/\.?0+$/, '')}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  return x.toFixed(Math.max(0, 2 - e)).replace(/(\.\d*?)0+$/, '$1').replace(/\.$/, '');
}

/** Whether a row's largest |value| (NaN for a row holding one) is zero or within MAGNITUDES. */
const usable = (peak) => peak === 0 || (peak >= MAGNITUDES[0] && peak <= MAGNITUDES[1]);

function problem(peak) {
  if (!Number.isFinite(peak)) return 'holds NaN or infinite values';
  return `holds values of magnitude ${formatG3(peak)}, outside 1e-15 to 1e+15 (its vectors would underflow or ` +
    'overflow float32)';
}

/**
 * The table's values as Python checks them at load (swembed/runtime/folder.py, first_bad_row): every scale, then
 * every row of a float table (a codebook's shared rows), finite with a largest |value| of 0 or within MAGNITUDES;
 * else the first bad row is refused, named as Python names it.
 */
function checkValues(table, scales, words, coded) {
  const fail = (file, row, peak, label) => {
    const named = label && row < words.length ? ` (${JSON.stringify(words[row])})` : '';
    throw new FormatError(`${file}: row ${row}${named} ${problem(peak)} (the first such row); the table is damaged: ` +
      'rebuild or re-export the model');
  };
  if (scales) {
    const row = scales.findIndex((s) => !usable(Math.abs(s)));
    if (row >= 0) fail('scales.npy', row, Math.abs(scales[row]), true);
  }
  if (table.dtype !== 'float32' && table.dtype !== 'float16') return;
  const [rows, d] = table.shape;
  const value = table.dtype === 'float16' ? ((h) => (v) => h[v])(halfToFloat()) : (v) => v;
  for (let r = 0; r < rows; r++) {
    let peak = 0;
    for (let j = r * d; j < (r + 1) * d; j++) {
      const v = Math.abs(value(table.data[j]));
      if (!(v <= peak)) peak = v; // NaN sticks: no later comparison replaces it
      if (Number.isNaN(peak)) break;
    }
    if (!usable(peak)) fail('embeddings.npy', r, peak, !coded);
  }
}

/** The storage config.json declares: dense (absent), int4 or codebook (docs/format.md, "Compact storage"). */
function storageKind(config) {
  const storage = config.storage;
  const kind = storage && typeof storage === 'object' ? storage.kind ?? 'dense' : storage ?? 'dense';
  if (!['dense', 'int4', 'codebook'].includes(kind)) {
    throw new FormatError(`config.json: storage kind must be dense, int4 or codebook, got ${JSON.stringify(kind)}`);
  }
  return kind;
}

/** An int4 table (two columns a byte, low nibble first, each q + 8) as int8 values. */
function unpackInt4(table, dim) {
  const [rows, width] = table.shape;
  if (table.dtype !== 'uint8' || !Number.isInteger(dim) || width !== Math.ceil(dim / 2)) {
    throw new FormatError(`embeddings.npy: an int4 table is (rows, ceil(dim/2)) uint8 with the dim in config.json, ` +
      `got ${table.shape} ${table.dtype}, dim ${JSON.stringify(dim)}`);
  }
  const out = new Int8Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < dim; j++) {
      const byte = table.data[r * width + (j >> 1)];
      out[r * dim + j] = (j & 1 ? byte >> 4 : byte & 0x0f) - 8;
    }
  }
  return { dtype: 'int8', shape: [rows, dim], data: out };
}

/**
 * vocab.txt as Python's reader checks it (swembed/runtime/folder.py, check_words): no byte-order mark, and in the
 * word rows [0, end) no empty label, none with surrounding white space, none twice (each would silently never
 * match, or match another row).
 */
function checkWords(words, end) {
  if (words.length && words[0].startsWith('\ufeff')) {
    throw new FormatError('vocab.txt: starts with a byte-order mark (U+FEFF); save it as UTF-8 without one');
  }
  const first = new Map();
  for (let i = 0; i < end; i++) {
    const word = words[i];
    if (!word || PADDED.test(word)) {
      throw new FormatError(`vocab.txt:${i + 1}: ${JSON.stringify(word)} is empty or has surrounding whitespace; ` +
        'words are matched exactly');
    }
    if (first.has(word)) {
      throw new FormatError(`vocab.txt:${i + 1}: ${JSON.stringify(word)} repeats line ${first.get(word) + 1}; each ` +
        'word must be on one line only');
    }
    first.set(word, i);
  }
}

function checkConfig(config) {
  if (!config || config.format !== FORMAT_NAME) {
    throw new FormatError(`config.json: format is ${JSON.stringify(config && config.format)}, expected "${FORMAT_NAME}"`);
  }
  if ((config.format_version ?? 0) > FORMAT_VERSION) {
    throw new FormatError(`config.json: format_version ${config.format_version} is newer than swembed.js reads`);
  }
  if (config.languages && Object.keys(config.languages).length) {
    throw new FormatError('config.json: multilingual tables (languages) are not supported by swembed.js yet');
  }
  checkEnsemble(config.ensemble);
}

/** An ensemble's sub-spaces as Python checks them (folder.py, _check_ensemble): dims >= 1, weights in WEIGHTS. */
function checkEnsemble(ensemble) {
  if (ensemble === undefined || ensemble === null) return;
  const subspaces = typeof ensemble === 'object' ? ensemble.subspaces ?? [] : null;
  const valid = (s) => s && typeof s === 'object' && Number.isInteger(s.dim) && s.dim >= 1 &&
    typeof s.weight === 'number' && s.weight > 0 && s.weight < Infinity;
  if (!Array.isArray(subspaces) || !subspaces.every(valid)) {
    throw new FormatError('config.json: ensemble subspaces must be a list of {"dim": an integer >= 1, "weight": a ' +
      `number above 0}, got ${JSON.stringify(subspaces)}`);
  }
  subspaces.forEach((s, i) => {
    if (!(s.weight >= WEIGHTS[0] && s.weight <= WEIGHTS[1])) {
      throw new FormatError(`config.json: ensemble subspace ${i} weight must be between 1e-06 and 1e+06 (weights ` +
        `are relative: scale them all), got ${JSON.stringify(s.weight)}`);
    }
  });
}
