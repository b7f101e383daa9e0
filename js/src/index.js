/** swembed.js: read a swembed table folder and encode text exactly as the Python runtime (docs/format.md). */
export { StaticEmbedder, FORMAT_NAME, FORMAT_VERSION, InputError } from './embedder.js';
export { loadModel, folderReader } from './load.js';
export { WordTokenizer, charGramBuckets, tokenizationRules, FormatError } from './tokenizer.js';
export { WordPiece, UnsupportedTokenizerError } from './wordpiece.js';
export { parseNpy, NpyError } from './npy.js';
export { crc32 } from './crc32.js';
export { compareConformance } from './conformance.js';
export {
  BM25_B, BM25_K1, HYBRID_ALPHA, WINDOW_ALPHA, WINDOW_GAMMA, WINDOW_SHORTLIST, WINDOW_SHORTLIST_FROM, WINDOW_WIDTH, bm25,
  dot, hybrid, rank, search, similarity, wordWindows,
} from './search.js';
export { stem } from './stemmer.js';
export { UNICODE_VERSION } from './unicode.js';
