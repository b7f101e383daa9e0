// One table against its conformance file, in a page or a Web Worker: the summary, or {table, error} when the
// table (or the file) cannot be read (js/test/browser.mjs prints either).
import { compareConformance, loadModel } from '/js/src/index.js';

export async function check(table, file, minCosine) {
  try {
    const model = await loadModel(table);
    const record = await (await fetch(file)).json();
    return { table, dtype: model.dtype, ...compareConformance(model, record, minCosine) };
  } catch (error) {
    return { table, error: `${error.constructor.name}: ${error.message}` };
  }
}
