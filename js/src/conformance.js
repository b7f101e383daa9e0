/**
 * Check an embedder against a conformance file written by `swembed conformance` (texts, their table rows and
 * weights, and the Python vectors): rows must match exactly, vectors to cosine >= minCosine (the query_vector and
 * document_vector of a table with query or document weights too, encoded with that kind).
 */

export function cosine(a, b) {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  if (na === 0 && nb === 0) return 1; // both the zero vector (a text with no row)
  if (na === 0 || nb === 0) return 0;
  return dot / Math.sqrt(na * nb);
}

/** {texts, minCosine, maxAbsDiff, failures: [{index, text, problem}]} of model against a parsed conformance file. */
export function compareConformance(model, conformance, minCosine = 0.9999) {
  const failures = [];
  let worst = 1;
  let maxAbsDiff = 0;
  if (conformance.dim !== model.dim) {
    failures.push({ index: -1, text: '', problem: `the file is for dim ${conformance.dim}, the table has ${model.dim}` });
  }
  conformance.texts.forEach((item, index) => {
    const { ids, weights } = model.tokenizer.rows(item.text);
    const sameRows = ids.length === item.rows.length && ids.every((r, i) => r === item.rows[i]);
    const sameWeights = weights.length === item.weights.length &&
      weights.every((w, i) => Math.abs(w - item.weights[i]) <= 1e-6 * Math.abs(item.weights[i]));
    if (!sameRows || !sameWeights) {
      failures.push({ index, text: item.text, problem: `rows ${JSON.stringify(ids)} weights ${JSON.stringify(weights)}, ` +
        `expected ${JSON.stringify(item.rows)} ${JSON.stringify(item.weights)}` });
    }
    for (const kind of [null, 'query', 'document']) { // a table with a kind's weights: its vector too
      const expected = item[kind ? `${kind}_vector` : 'vector'];
      if (!expected) continue;
      const vector = model.encode(item.text, kind);
      const c = cosine(vector, expected);
      for (let i = 0; i < vector.length; i++) maxAbsDiff = Math.max(maxAbsDiff, Math.abs(vector[i] - expected[i]));
      worst = Math.min(worst, c);
      if (!(c >= minCosine)) failures.push({ index, text: item.text, problem: `${kind || ''} cosine ${c} < ${minCosine}` });
    }
  });
  return { texts: conformance.texts.length, minCosine: worst, maxAbsDiff, failures };
}
