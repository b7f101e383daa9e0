/**
 * Ranking by cosine, as Python ranks (swembed/runtime/search.py): sentence vectors are unit vectors (or zero), so a
 * float32 dot product is their cosine; hits come best first, equal scores by lower index.
 */

/** The float32 dot product of two vectors (summed in float64, rounded to float32 once). */
export function dot(a, b) {
  let sum = 0;
  for (let j = 0; j < a.length; j++) sum += a[j] * b[j];
  return Math.fround(sum);
}

function checkTopK(topK) {
  if (!Number.isInteger(topK) || topK < 1) throw new RangeError(`topK must be an integer of at least 1, got ${topK}`);
}

/** The topK rows of `vectors` (an array of Float32Array) nearest `query`: [{index, score, id}], id = index. */
export function rank(query, vectors, topK = 10) {
  checkTopK(topK);
  if (!vectors.length) throw new RangeError('search needs a corpus of at least one passage; this one is empty');
  const scores = Float32Array.from(vectors, (v) => dot(query, v));
  const order = Uint32Array.from(scores.keys()).sort((a, b) => scores[b] - scores[a] || a - b);
  return Array.from(order.subarray(0, Math.min(topK, order.length)), (i) => ({ index: i, score: scores[i], id: i }));
}

/**
 * Cosine similarities of texts `a` with texts `b`: one Float32Array per text of `a` (length b.length); a single
 * string on one side drops that axis (one Float32Array), two strings give a number (as model.similarity in Python).
 */
export function similarity(model, a, b) {
  const left = model.encodeBatch(typeof a === 'string' ? [a] : a);
  const right = model.encodeBatch(typeof b === 'string' ? [b] : b);
  const rows = left.map((u) => Float32Array.from(right, (v) => dot(u, v)));
  if (typeof a === 'string' && typeof b === 'string') return rows[0][0];
  if (typeof a === 'string') return rows[0];
  return typeof b === 'string' ? Float32Array.from(rows, (row) => row[0]) : rows;
}

/** Each query's topK passages of `corpus` by cosine, best first ({index, score, id}); one string query: its list. */
export function search(model, queries, corpus, topK = 10) {
  checkTopK(topK);
  const vectors = model.encodeBatch(corpus);
  const found = model.encodeBatch(typeof queries === 'string' ? [queries] : queries)
    .map((q) => rank(q, vectors, topK));
  return typeof queries === 'string' ? found[0] : found;
}
