// Semantic search over a sentence file, fully client-side: the table folder and the sentences are fetched from
// URLs (?table=... default ./table/, ?sentences=... default ./sentences.txt), every sentence is encoded once,
// a query is encoded and ranked by cosine (the package's `rank`: ties by lower index, as Python's search). ?q=...
// searches at once. window.swembedDone resolves to the timings and the first answer (for demo/check.mjs).
import { loadModel, rank } from '../src/index.js';

const params = new URLSearchParams(location.search);
const tableUrl = new URL(params.get('table') || './table/', location.href).href;
const sentencesUrl = new URL(params.get('sentences') || './sentences.txt', location.href).href;
const $ = (id) => document.getElementById(id);
const format = (n) => n.toLocaleString('en-US', { maximumFractionDigits: 0 });

function search(model, vectors, sentences, query, k = 10) {
  const start = performance.now();
  const top = rank(model.encode(query), vectors, k);
  return { query, ms: performance.now() - start,
    top: top.map(({ index, score }) => ({ index, score, text: sentences[index] })) };
}

function show(answer) {
  $('results').replaceChildren(...answer.top.map(({ score, text }) => {
    const li = document.createElement('li');
    const s = document.createElement('span');
    s.className = 'score';
    s.textContent = score.toFixed(3);
    li.append(s, text);
    return li;
  }));
  $('timing').textContent = `“${answer.query}”: ranked ${format(window.demo.sentences.length)} sentences in ` +
    `${answer.ms.toFixed(1)} ms`;
}

async function main() {
  const t0 = performance.now();
  const model = await loadModel(tableUrl);
  const loadMs = performance.now() - t0;
  const sentences = (await (await fetch(sentencesUrl)).text()).split('\n').filter((s) => s.trim());
  const t1 = performance.now();
  const vectors = model.encodeBatch(sentences);
  const encodeMs = performance.now() - t1;
  window.demo = { model, vectors, sentences };
  $('status').textContent = `table ${model.rows.toLocaleString('en-US')} rows × ${model.dim} ${model.dtype}, ` +
    `loaded in ${format(loadMs)} ms; ${format(sentences.length)} sentences encoded in ${format(encodeMs)} ms ` +
    `(${format(sentences.length / (encodeMs / 1000))} sentences/s), all in this page`;
  $('search').addEventListener('submit', (event) => {
    event.preventDefault();
    show(search(model, vectors, sentences, $('query').value));
  });
  let first = null;
  if (params.get('q')) {
    $('query').value = params.get('q');
    first = search(model, vectors, sentences, params.get('q'));
    show(first);
  }
  return { rows: model.rows, dim: model.dim, dtype: model.dtype, sentences: sentences.length, loadMs, encodeMs,
    answer: first };
}

window.swembedDone = main().catch((error) => {
  $('status').textContent = `error: ${error.message}`;
  throw error;
});
