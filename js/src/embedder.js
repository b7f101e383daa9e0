/**
 * StaticEmbedder: a swembed table and its tokeniser. encode(text) is the weighted mean of the text's rows,
 * L2-normalised (per sub-space for an ensemble), as a Float32Array; a text with no row is the zero vector.
 */
import { halfToFloat, parseNpy } from './npy.js';
import { search, similarity } from './search.js';
import { FormatError, WordTokenizer, tokenizationRules } from './tokenizer.js';
import { PADDED } from './unicode.js';
import { WordPiece } from './wordpiece.js';

export const FORMAT_NAME = 'swe-static';
export const FORMAT_VERSION = 1;

export class StaticEmbedder {
  /**
   * Build from a folder's parts: config (parsed config.json), vocabText (vocab.txt), embeddings and scales
   * (.npy ArrayBuffers; scales for int8 only), tokenizerJson (parsed tokenizer.json, or null).
   */
  constructor({ config, vocabText, embeddings, scales = null, tokenizerJson = null, codes = null }) {
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
    const vocab = new Map();
    for (let i = 0; i < end; i++) vocab.set(words[i], i);
    const pieceRows = new Map();
    if (pieces) for (let i = pieces[0]; i < pieces[1]; i++) pieceRows.set(words[i], i);
    const needsPieces = rules.oov_backoff === 'teacher_prefix' || (rules.oov_backoff === 'pieces' && pieceRows.size);
    const wordPiece = needsPieces && tokenizerJson ? new WordPiece(tokenizerJson) : null;
    if (wordPiece) for (const token of pieceRows.keys()) if (!wordPiece.vocab.has(token)) pieceRows.delete(token);
    this.tokenizer = new WordTokenizer(vocab, rules, wordPiece, pieceRows, grams);
    const subspaces = config.ensemble && config.ensemble.subspaces;
    if (subspaces && subspaces.length) {
      const total = subspaces.reduce((a, s) => a + s.weight, 0);
      let at = 0;
      this.blocks = subspaces.map((s) => [at, (at += s.dim), Math.sqrt(s.weight / total)]);
    } else this.blocks = [[0, dim, 1]];
  }

  /** The sentence vector of one text. */
  encode(text) {
    const sum = new Float64Array(this.dim);
    const tokenizer = this.tokenizer;
    let total = 0;
    for (const word of tokenizer.words(text)) {
      const row = tokenizer.vocab.get(word);
      if (row !== undefined) {
        this.addRow(sum, row, 1);
        total += 1;
      } else {
        const [rows, weights] = tokenizer.backoff(word);
        for (let i = 0; i < rows.length; i++) {
          this.addRow(sum, rows[i], weights[i]);
          total += weights[i];
        }
      }
    }
    return this.normalize(sum, total);
  }

  /** One vector per text. */
  encodeBatch(texts) {
    return texts.map((text) => this.encode(text));
  }

  /** Cosine similarities of texts (search.js, `similarity`): as model.similarity in Python. */
  similarity(a, b) {
    return similarity(this, a, b);
  }

  /** Each query's topK passages of corpus by cosine (search.js, `search`): as model.search in Python. */
  search(queries, corpus, topK = 10) {
    return search(this, queries, corpus, topK);
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
      let norm = 0;
      for (let j = start; j < end; j++) norm += (sum[j] / total) ** 2;
      norm = Math.sqrt(norm) / scale;
      for (let j = start; j < end; j++) out[j] = norm > 0 ? sum[j] / total / norm : 0;
    }
    return out;
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
}
