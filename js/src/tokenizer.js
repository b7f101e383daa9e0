/**
 * Text -> table rows and weights, as swembed/runtime/tokenizer.py does it (docs/format.md, "Tokenisation"):
 * Unicode normalisation, lower-casing, words = maximal runs of letters and digits (Python's [^\W_]+, which is
 * exactly Unicode categories L* and N*), a known word its row at weight 1, an unknown word its back-off rows.
 * Every character fact is Unicode 14.0.0's (unicode.js), as Python 3.11's.
 */
import { crc32Update } from './crc32.js';
import { WORDS, normalize, toLowerCase } from './unicode.js';

export const WORD_PATTERN = '[^\\W_]+';
const GRAM_SIZES = [3, 4, 5];
const OOV_CACHE_LIMIT = 1_000_000;
const encoder = new TextEncoder();

/**
 * A weight of the mean (oov_weight, an ensemble member's weight) lies in [1e-6, 1e6], as Python checks it
 * (swembed/runtime/tokenizer.py, WEIGHTS): no sum of rows overflows, no share of it underflows.
 */
export const WEIGHTS = [1e-6, 1e6];

export class FormatError extends Error {}

/** The tokenisation rules of config.json ("tokenization"), with the Python defaults for absent keys. */
export function tokenizationRules(spec = {}, where = 'config.json') {
  const rules = {
    word_pattern: WORD_PATTERN, lowercase: true, unicode_normalization: 'NFKC', oov_backoff: 'teacher_prefix',
    words: 'pattern', oov_weight: 1.0,
  };
  const unknown = Object.keys(spec).filter((key) => !(key in rules));
  if (unknown.length) {
    throw new FormatError(`${where}: tokenization has unknown key ${JSON.stringify(unknown[0])} (known: ` +
      `${Object.keys(rules).join(', ')})`);
  }
  Object.assign(rules, spec);
  if (rules.words !== 'pattern') {
    throw new FormatError(`${where}: tokenization words = ${JSON.stringify(rules.words)} is not supported by ` +
      'swembed.js (only "pattern"; teacher tokens and word segmenters need Python)');
  }
  if (rules.word_pattern !== WORD_PATTERN) {
    throw new FormatError(`${where}: tokenization word_pattern ${JSON.stringify(rules.word_pattern)} is not ` +
      `supported by swembed.js (only the default ${WORD_PATTERN})`);
  }
  if (!['pieces', 'teacher_prefix', 'none'].includes(rules.oov_backoff)) {
    throw new FormatError(`${where}: unknown tokenization oov_backoff ${JSON.stringify(rules.oov_backoff)}`);
  }
  if (!(typeof rules.oov_weight === 'number' && rules.oov_weight >= WEIGHTS[0] && rules.oov_weight <= WEIGHTS[1])) {
    throw new FormatError(`${where}: tokenization oov_weight must be between 1e-06 and 1e+06, got ` +
      `${JSON.stringify(rules.oov_weight)}`);
  }
  if (rules.unicode_normalization && !['NFC', 'NFD', 'NFKC', 'NFKD'].includes(rules.unicode_normalization)) {
    throw new FormatError(`${where}: unknown unicode_normalization ${JSON.stringify(rules.unicode_normalization)}`);
  }
  return rules;
}

/** Buckets of the character 3-, 4- and 5-grams of "<word>" (code points): CRC-32 of their UTF-8, mod buckets. */
export function charGramBuckets(word, buckets) {
  const points = Array.from(`<${word}>`, (c) => encoder.encode(c));
  const out = [];
  for (const n of GRAM_SIZES) {
    for (let i = 0; i + n <= points.length; i++) {
      let c = 0xffffffff;
      for (let k = i; k < i + n; k++) c = crc32Update(c, points[k]);
      out.push(((c ^ 0xffffffff) >>> 0) % buckets);
    }
  }
  return out;
}

export class WordTokenizer {
  /**
   * vocab: Map word -> row; pieces: a WordPiece (or null); pieceRows: Map piece token -> row;
   * gramRows: [start, end) of the gram rows (or null).
   */
  constructor(vocab, rules, pieces = null, pieceRows = new Map(), gramRows = null) {
    this.vocab = vocab;
    this.rules = rules;
    this.pieces = rules.oov_backoff === 'none' ? null : pieces;
    this.pieceRows = pieceRows;
    this.gramRows = gramRows;
    this.cache = new Map();
  }

  /** Normalise and (if the rules say so) lower-case. */
  prepare(text) {
    const normal = normalize(text, this.rules.unicode_normalization);
    return this.rules.lowercase ? toLowerCase(normal) : normal;
  }

  words(text) {
    return this.prepare(text).match(WORDS) || [];
  }

  /** {ids, weights} of a text: a known word's row at weight 1, an unknown word's back-off rows. */
  rows(text) {
    const ids = [];
    const weights = [];
    for (const word of this.words(text)) {
      const row = this.vocab.get(word);
      if (row !== undefined) {
        ids.push(row);
        weights.push(1);
      } else {
        const [rows, rowWeights] = this.backoff(word);
        for (let i = 0; i < rows.length; i++) {
          ids.push(rows[i]);
          weights.push(rowWeights[i]);
        }
      }
    }
    return { ids, weights };
  }

  /** Rows and weights standing in for an unknown word (cached). */
  backoff(word) {
    const cached = this.cache.get(word);
    if (cached) return cached;
    let halves = [];
    if (this.rules.oov_backoff === 'pieces') {
      if (this.pieces) {
        halves.push(this.pieces.encode(word).map((p) => this.pieceRows.get(p.token)).filter((r) => r !== undefined));
      }
      if (this.gramRows) {
        const [start, end] = this.gramRows;
        halves.push(charGramBuckets(word, end - start).map((b) => start + b));
      }
    } else if (this.rules.oov_backoff === 'teacher_prefix' && this.pieces) {
      const chars = Array.from(word);
      const ends = this.pieces.encode(word).map((p) => p.end);
      for (let k = ends.length - 2; k >= 0; k--) {
        const row = this.vocab.get(chars.slice(0, ends[k]).join(''));
        if (row !== undefined) {
          halves.push([row]);
          break;
        }
      }
    }
    halves = halves.filter((half) => half.length);
    const weight = this.rules.oov_weight;
    const result = [halves.flat(), halves.flatMap((half) => half.map(() => weight / halves.length / half.length))];
    if (this.cache.size < OOV_CACHE_LIMIT) this.cache.set(word, result);
    return result;
  }
}
