/**
 * Load a table folder from a URL (browser, or Node with fetch) or a local folder path (Node).
 */
import { StaticEmbedder } from './embedder.js';
import { FormatError } from './tokenizer.js';

const isUrl = (s) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s) || typeof window !== 'undefined';

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

const text = (buffer) => new TextDecoder('utf-8', { fatal: true }).decode(buffer);

/** Load a swembed table folder (config.json, vocab.txt, embeddings.npy, scales.npy, tokenizer.json). */
export async function loadModel(location) {
  const read = await folderReader(location);
  const need = async (name) => {
    const buffer = await read(name);
    if (buffer === null) throw new FormatError(`${location}: ${name} is missing`);
    return buffer;
  };
  const parseJson = (name, buffer) => {
    try {
      return JSON.parse(text(buffer));
    } catch (error) {
      throw new FormatError(`${location}/${name}: not valid JSON (${error.message})`);
    }
  };
  const config = parseJson('config.json', await need('config.json'));
  const backoff = (config.tokenization || {}).oov_backoff;
  const [vocab, embeddings, scales, tokenizer, codes] = await Promise.all([
    need('vocab.txt'), need('embeddings.npy'), read('scales.npy'), backoff === 'none' ? null : read('tokenizer.json'),
    read('codes.npy'),
  ]);
  if (tokenizer === null && backoff !== 'none' && config.tokenizer !== null) {
    throw new FormatError(`${location}: tokenizer.json is missing; the table's tokenisation needs it for the ` +
      'sub-word back-off (or config.json declares "tokenizer": null)');
  }
  return new StaticEmbedder({
    config, vocabText: text(vocab), embeddings, scales, codes,
    tokenizerJson: tokenizer ? parseJson('tokenizer.json', tokenizer) : null,
  });
}
