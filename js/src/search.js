/**
 * Ranking by cosine, as Python ranks (swembed/runtime/search.py): sentence vectors are unit vectors (or zero), so a
 * float32 dot product is their cosine; hits come best first, equal scores by lower index. Lexical and hybrid
 * ranking as Python's (swembed/runtime/lexical.py): BM25 over the table's words, each stemmed (stemmer.js), and per
 * query the z-scores of the cosines and of BM25 mixed by alpha.
 */
import { stem } from './stemmer.js';

/** swembed.runtime.lexical's defaults (chosen on dev data: reports/hybrid.md). */
export const BM25_K1 = 1.5;
export const BM25_B = 0.9;
export const HYBRID_ALPHA = 0.55;
const MODES = ['dense', 'hybrid', 'lexical'];
/** swembed.runtime.windows' defaults: a window's words, and the weight of a passage's best window's cosine. */
export const WINDOW_WIDTH = 8;
export const WINDOW_GAMMA = 0.5;
/** The hybrid's default alpha where passages are read with windows (swembed.runtime.windows.ALPHA). */
export const WINDOW_ALPHA = 0.8;
/** A dense search over more than WINDOW_SHORTLIST_FROM passages reads windows for each query's WINDOW_SHORTLIST
 * highest cosines alone (swembed.runtime.windows.SHORTLIST, SHORTLIST_FROM). */
export const WINDOW_SHORTLIST = 1000;
export const WINDOW_SHORTLIST_FROM = 20000;
/** Python's str.split() white space (swembed.runtime.windows.WHITESPACE), the same characters. */
const WHITESPACE = /[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

/** The float32 dot product of two vectors (summed in float64, rounded to float32 once). */
export function dot(a, b) {
  let sum = 0;
  for (let j = 0; j < a.length; j++) sum += a[j] * b[j];
  return Math.fround(sum);
}

function checkTopK(topK) {
  if (!Number.isInteger(topK) || topK < 1) throw new RangeError(`topK must be an integer of at least 1, got ${topK}`);
}

/** The rows of the topK highest `scores`, highest first, equal scores by lower row. */
function best(scores, topK) {
  const order = Uint32Array.from(scores.keys()).sort((a, b) => scores[b] - scores[a] || a - b);
  return order.subarray(0, Math.min(topK, order.length));
}

/** The topK rows of `vectors` (an array of Float32Array) nearest `query`: [{index, score, id, dense}], id = index,
 * dense = score (the cosine). */
export function rank(query, vectors, topK = 10) {
  checkTopK(topK);
  if (!vectors.length) throw new RangeError('search needs a corpus of at least one passage; this one is empty');
  const scores = Float32Array.from(vectors, (v) => dot(query, v));
  return Array.from(best(scores, topK), (i) => ({ index: i, score: scores[i], id: i, dense: scores[i] }));
}

/**
 * BM25 of every passage of `corpus` for each query (one Float32Array per query), over the terms of each text: the
 * words the model's tokenizer splits it into, each stemmed (`stemmed = false`: as they are): Lucene's idf
 * ln(1 + (N - df + 0.5) / (df + 0.5)) and saturation tf / (tf + k1 (1 - b + b length / average length)); a repeated
 * query term counts each time. A table with lexical weights (kind_weights "lexical") multiplies each query word's
 * term weights by its row's weight (float32; a word without a row: 1), as Python does.
 */
export function bm25(model, queries, corpus, { k1 = BM25_K1, b = BM25_B, stemmed = true } = {}) {
  const cache = new Map(); // a corpus repeats its words: each distinct word is stemmed once
  const termsOf = (words) => (stemmed ? words.map((w) => cache.get(w) ?? cache.set(w, stem(w)).get(w)) : words);
  const terms = (text) => termsOf(model.tokenizer.words(text));
  const postings = new Map(); // word -> [passage, count, passage, count, ...], passages rising
  const lengths = new Float64Array(corpus.length);
  corpus.forEach((text, i) => {
    const counts = new Map();
    for (const word of terms(text)) counts.set(word, (counts.get(word) || 0) + 1);
    for (const [word, count] of counts) {
      if (!postings.has(word)) postings.set(word, []);
      postings.get(word).push(i, count);
      lengths[i] += count;
    }
  });
  const n = corpus.length;
  const average = lengths.reduce((sum, x) => sum + x, 0) / Math.max(n, 1);
  const lexicalWeights = model.kindWeights.lexical || null;
  const weightOf = (word) => {
    const row = lexicalWeights ? model.tokenizer.vocab.get(word) : undefined;
    return row === undefined ? 1 : lexicalWeights[row];
  };
  return queries.map((query) => {
    const scores = new Float64Array(n);
    const words = model.tokenizer.words(query);
    termsOf(words).forEach((term, i) => {
      const found = postings.get(term);
      if (!found) return;
      const df = found.length / 2;
      const idf = Math.log1p((n - df + 0.5) / (df + 0.5));
      const weight = weightOf(words[i]);
      for (let j = 0; j < found.length; j += 2) {
        const [row, tf] = [found[j], found[j + 1]];
        const posted = Math.fround(idf * tf / (tf + k1 * (1 - b + (b * lengths[row]) / Math.max(average, 1e-12))));
        scores[row] += weight === 1 ? posted : Math.fround(posted * weight);
      }
    });
    return Float32Array.from(scores);
  });
}

/** Each value minus the mean, times `weight` over the standard deviation (all 0 when every value is the same), in
 * float32 as Python computes it (the mean and deviation summed in float64). */
function standardised(scores, weight) {
  const mean = scores.reduce((sum, x) => sum + x, 0) / scores.length;
  const spread = Math.sqrt(scores.reduce((sum, x) => sum + (x - mean) ** 2, 0) / scores.length);
  const [centre, scale] = [Math.fround(mean), Math.fround(spread > 0 ? weight / spread : 0)];
  return Float32Array.from(scores, (x) => Math.fround(x - centre) * scale);
}

/** The hybrid score of one query: alpha * z(cosines) + (1 - alpha) * z(bm25), as float32. */
export function hybrid(cosines, lexical, alpha = HYBRID_ALPHA) {
  const words = standardised(lexical, 1 - alpha);
  return standardised(cosines, alpha).map((z, i) => z + words[i]);
}

function checkOptions(mode, alpha, windows) {
  if (!MODES.includes(mode)) throw new RangeError(`mode must be one of ${MODES.join(', ')}, got ${mode}`);
  if (typeof alpha !== 'number' || !(alpha >= 0 && alpha <= 1)) {
    throw new RangeError(`alpha must be a number from 0 to 1, got ${alpha}`);
  }
  if (windows !== null && !(Number.isInteger(windows) && windows >= 2)) {
    throw new RangeError(`windows must be a number of words of at least 2 (or null: no windows), got ${windows}`);
  }
}

/**
 * `text`'s windows of `width` words every floor(width / 2), the last ending at the text's end, each its words joined
 * by one space; none for a text of `width` words or fewer (swembed.runtime.windows.word_windows).
 */
export function wordWindows(text, width) {
  const words = text.split(WHITESPACE).filter((word) => word.length > 0);
  if (words.length <= width) return [];
  const step = Math.floor(width / 2);
  const found = [];
  for (let start = 0; start < words.length - width + step; start += step) {
    found.push(words.slice(start, start + width).join(' '));
  }
  return found;
}

/**
 * A function of a query vector giving its dense score with every passage: the cosine, or with `windows` (words) the
 * cosine plus WINDOW_GAMMA times the passage's best window's cosine (a passage without windows: its own), in float32
 * as Python's SearchIndex scores it. `shortlist` (a dense search): over more than WINDOW_SHORTLIST_FROM passages,
 * windows are read for the query's WINDOW_SHORTLIST highest cosines alone; any other passage scores
 * (1 + WINDOW_GAMMA) times its cosine (swembed.runtime.windows.shortlisted).
 */
function denseScorer(model, corpus, vectors, windows, shortlist) {
  if (windows === null) return (q) => Float32Array.from(vectors, (v) => dot(q, v));
  const owned = corpus.map((text) => wordWindows(text, windows));
  const encoded = model.encodeBatch(owned.flat(), 'document');
  const offsets = [0];
  for (const found of owned) offsets.push(offsets[offsets.length - 1] + found.length);
  const gamma = Math.fround(WINDOW_GAMMA);
  const short = shortlist && vectors.length > WINDOW_SHORTLIST_FROM;
  return (q) => {
    const cosines = Float32Array.from(vectors, (v) => dot(q, v));
    const scores = Float32Array.from(cosines, (whole) => Math.fround(whole + Math.fround(gamma * whole)));
    for (const i of short ? best(cosines, WINDOW_SHORTLIST) : cosines.keys()) {
      let top = -Infinity;
      for (let j = offsets[i]; j < offsets[i + 1]; j++) top = Math.max(top, dot(q, encoded[j]));
      if (top !== -Infinity) scores[i] = Math.fround(cosines[i] + Math.fround(gamma * top));
    }
    return scores;
  };
}

/**
 * Cosine similarities of texts `a` with texts `b`: one Float32Array per text of `a` (length b.length); a single
 * string on one side drops that axis (one Float32Array), two strings give a number (as model.similarity in Python);
 * `kindA`/`kindB`: each side's encode kind ('query', 'document').
 */
export function similarity(model, a, b, { kindA = null, kindB = null } = {}) {
  const left = model.encodeBatch(typeof a === 'string' ? [a] : a, kindA);
  const right = model.encodeBatch(typeof b === 'string' ? [b] : b, kindB);
  const rows = left.map((u) => Float32Array.from(right, (v) => dot(u, v)));
  if (typeof a === 'string' && typeof b === 'string') return rows[0][0];
  if (typeof a === 'string') return rows[0];
  return typeof b === 'string' ? Float32Array.from(rows, (row) => row[0]) : rows;
}

/**
 * Each query's topK passages of `corpus`, best first ({index, score, id, dense, lexical}); one string query: its
 * list. `mode`: 'dense' (cosine, the default), 'lexical' (BM25) or 'hybrid' (both, weighed by `alpha`: default
 * HYBRID_ALPHA, WINDOW_ALPHA with windows), as
 * model.search(..., mode, alpha) in Python; `dense` is each hit's cosine, `lexical` its BM25 (lexical and hybrid).
 * Queries encode as kind 'query', passages as 'document' (a table's query weights apply to the queries). `windows`
 * (words, e.g. WINDOW_WIDTH): each passage of more than that many words is also read as windows of them, and its
 * dense score adds its best window's cosine (as model.search(..., windows=...) in Python); `dense` is then that score.
 */
export function search(model, queries, corpus, topK = 10, { mode = 'dense', alpha = null, windows = null } = {}) {
  checkTopK(topK);
  if (alpha === null) alpha = windows === null ? HYBRID_ALPHA : WINDOW_ALPHA;
  checkOptions(mode, alpha, windows);
  const vectors = model.encodeBatch(corpus, 'document');
  const asked = typeof queries === 'string' ? [queries] : queries;
  const encoded = model.encodeBatch(asked, 'query');
  let found;
  if (mode === 'dense' && windows === null) found = encoded.map((q) => rank(q, vectors, topK));
  else {
    if (!vectors.length) throw new RangeError('search needs a corpus of at least one passage; this one is empty');
    const lexical = mode === 'dense' ? null : bm25(model, [...asked], corpus);
    const denseOf = denseScorer(model, corpus, vectors, windows, mode === 'dense');
    found = encoded.map((q, i) => {
      const cosines = denseOf(q);
      if (lexical === null) {
        return Array.from(best(cosines, topK), (j) => ({ index: j, score: cosines[j], id: j, dense: cosines[j] }));
      }
      const scores = mode === 'lexical' ? lexical[i] : hybrid(cosines, lexical[i], alpha);
      return Array.from(best(scores, topK), (j) => ({ index: j, score: scores[j], id: j, dense: cosines[j],
        lexical: lexical[i][j] }));
    });
  }
  return typeof queries === 'string' ? found[0] : found;
}
