/**
 * Load a table folder from a URL (browser, or Node with fetch) or a local folder path (Node).
 */
import { KIND_WEIGHT_FILES, StaticEmbedder } from './embedder.js';
import { FormatError } from './tokenizer.js';

/** A URL, or any location where there is no file system to read (a page or a Web Worker: a path is a URL there). */
const isUrl = (s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s) || typeof globalThis.location !== 'undefined' ||
  typeof globalThis.process?.versions?.node !== 'string';

/** A reader of the folder's files: name -> ArrayBuffer, or null when the file does not exist. */
export async function folderReader(location) {
  const where = String(location);
  if (isUrl(where)) {
    const base = new URL(where.endsWith('/') ? where : `${where}/`, globalThis.location ? globalThis.location.href : undefined);
    return async (name) => {
      const response = await fetch(new URL(name, base));
      if (response.status === 404) return null;
      if (!response.ok) throw new FormatError(`${new URL(name, base)}: HTTP ${response.status}`);
      return response.arrayBuffer();
    };
  }
  const { readFile } = await import('node:fs/promises');
  const { join } = await import('node:path');
  return async (name) => {
    try {
      const bytes = await readFile(join(where, name));
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    } catch (error) {
      if (error.code === 'ENOENT') return null;
      throw error;
    }
  };
}

// A byte-order mark is kept, not skipped: Python reads the files as plain UTF-8 and refuses one (docs/format.md).
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Load a swembed table folder (config.json, vocab.txt, embeddings.npy, scales.npy, tokenizer.json, and the
 * query_weights.npy / document_weights.npy that config.json's kind_weights names). */
export async function loadModel(location) {
  const read = await folderReader(location);
  const need = async (name) => {
    const buffer = await read(name);
    if (buffer === null) throw new FormatError(`${location}: ${name} is missing`);
    return buffer;
  };
  const text = (name, buffer) => {
    try {
      return decoder.decode(buffer);
    } catch {
      throw new FormatError(`${location}/${name}: not UTF-8`);
    }
  };
  const parseJson = (name, buffer) => {
    const decoded = text(name, buffer);
    try {
      return JSON.parse(decoded);
    } catch (error) {
      throw new FormatError(`${location}/${name}: not valid JSON (${error.message})`);
    }
  };
  const config = parseJson('config.json', await need('config.json'));
  const backoff = (config.tokenization || {}).oov_backoff;
  // "tokenizer": null declares that the table has no sub-word tokenizer: a tokenizer.json beside it is not read
  const wantsTokenizer = backoff !== 'none' && config.tokenizer !== null;
  const [vocab, embeddings, scales, tokenizer, codes] = await Promise.all([
    need('vocab.txt'), need('embeddings.npy'), read('scales.npy'), wantsTokenizer ? read('tokenizer.json') : null,
    read('codes.npy'),
  ]);
  if (tokenizer === null && wantsTokenizer) {
    throw new FormatError(`${location}: tokenizer.json is missing; the table's tokenisation needs it for the ` +
      'sub-word back-off (or config.json declares "tokenizer": null)');
  }
  const tokenizerJson = tokenizer ? parseJson('tokenizer.json', tokenizer) : null;
  const named = config.kind_weights && typeof config.kind_weights === 'object' ? config.kind_weights : {};
  const kindWeights = {}; // only the files config.json names, under their fixed names (the embedder checks both)
  for (const kind of Object.keys(named)) {
    if (KIND_WEIGHT_FILES[kind] === named[kind]) kindWeights[kind] = await read(KIND_WEIGHT_FILES[kind]);
  }
  try {
    const vocabText = text('vocab.txt', vocab);
    return new StaticEmbedder({ config, vocabText, embeddings, scales, codes, tokenizerJson, kindWeights });
  } catch (error) {
    if (!error.message.startsWith(String(location))) error.message = `${location}: ${error.message}`;
    throw error; // the folder named, the class kept (FormatError, NpyError, UnsupportedTokenizerError)
  }
}
