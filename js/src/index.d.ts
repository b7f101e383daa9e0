// Types of swembed.js (src/index.js): read a swembed table folder (docs/format.md) and encode text as Python does.

/** A folder that is not a readable swe-static table, or one outside the portable subset; the message names it. */
export declare class FormatError extends Error {}
/** A tokenizer.json that is not a BERT-style WordPiece tokenizer. */
export declare class UnsupportedTokenizerError extends Error {}
/** An unreadable or truncated .npy file. */
export declare class NpyError extends Error {}
/** An argument of encode or encodeBatch that is not a text (a string) or an array of texts. */
export declare class InputError extends TypeError {}

export declare const FORMAT_NAME: 'swe-static';
export declare const FORMAT_VERSION: 1;
/** The Unicode version of the tokenisation's character data (format_version 1: '14.0.0'). */
export declare const UNICODE_VERSION: string;

/** config.json's "tokenization" (docs/format.md), with the defaults filled in. */
export interface TokenizationRules {
  word_pattern: string;
  lowercase: boolean;
  unicode_normalization: 'NFC' | 'NFD' | 'NFKC' | 'NFKD' | '';
  oov_backoff: 'pieces' | 'teacher_prefix' | 'none';
  words: 'pattern';
  oov_weight: number;
}

/** The rows of a text and their weights in the mean. */
export interface Rows {
  ids: number[];
  weights: number[];
}

/** One teacher token of a word, with its [start, end) in the word's code points. */
export interface Piece {
  token: string;
  start: number;
  end: number;
}

export declare class WordPiece {
  constructor(tokenizerJson: object, name?: string);
  vocab: Map<string, number>;
  encode(word: string): Piece[];
}

export declare class WordTokenizer {
  constructor(vocab: Map<string, number>, rules: TokenizationRules, pieces?: WordPiece | null,
    pieceRows?: Map<string, number>, gramRows?: [number, number] | null);
  vocab: Map<string, number>;
  rules: TokenizationRules;
  /** Normalised and (if the rules say so) lower-cased text. */
  prepare(text: string): string;
  words(text: string): string[];
  rows(text: string): Rows;
  /** [rows, weights] standing in for an unknown word. */
  backoff(word: string): [number[], number[]];
}

/** The parts of a table folder, as StaticEmbedder's constructor takes them. */
export interface FolderParts {
  config: object;
  vocabText: string;
  embeddings: ArrayBuffer;
  scales?: ArrayBuffer | null;
  codes?: ArrayBuffer | null;
  tokenizerJson?: object | null;
  /** The .npy bytes of the row weights config.json's kind_weights names (query_weights.npy, document_weights.npy,
   * lexical_weights.npy). */
  kindWeights?: { query?: ArrayBuffer; document?: ArrayBuffer; lexical?: ArrayBuffer };
}

export declare class StaticEmbedder {
  constructor(parts: FolderParts);
  readonly dim: number;
  readonly rows: number;
  readonly dtype: 'float32' | 'float16' | 'int8';
  readonly storage: 'dense' | 'int4' | 'codebook';
  readonly config: object;
  readonly words: string[];
  readonly tokenizer: WordTokenizer;
  /** Each kind's row weights (config.json's kind_weights): absent for a table without them; lexical: each query
   * word's weight on its BM25 term weights in lexical and hybrid search. */
  readonly kindWeights: { query?: Float32Array; document?: Float32Array; lexical?: Float32Array };
  /** The L2-normalised sentence vector of a text (the zero vector when no word has a row); `kind` 'query' or
   * 'document' applies that kind's row weights where the table has them (docs/format.md). */
  encode(text: string, kind?: EncodeKind | null): Float32Array;
  /** One vector per text (an array, or any iterable, of strings); anything else throws an InputError. */
  encodeBatch(texts: Iterable<string>, kind?: EncodeKind | null): Float32Array[];
  /** Cosine similarities, as model.similarity in Python (see `similarity`). */
  similarity(a: string, b: string, options?: SimilarityOptions): number;
  similarity(a: string | string[], b: string | string[], options?: SimilarityOptions): Float32Array | Float32Array[];
  /** Each query's topK passages of corpus by cosine, BM25 or both, best first, ties by lower index (see `search`). */
  search(queries: string, corpus: string[], topK?: number, options?: SearchOptions): Hit[];
  search(queries: string[], corpus: string[], topK?: number, options?: SearchOptions): Hit[][];
  meanRows(ids: number[], weights: number[]): Float32Array;
}

/** What a text is to a search: its encode kind. */
export type EncodeKind = 'query' | 'document';
/** Each side's encode kind in `similarity`. */
export interface SimilarityOptions {
  kindA?: EncodeKind | null;
  kindB?: EncodeKind | null;
}

/** A folder path (Node) or a URL (browsers, Web Workers, Node with fetch): a relative path is a URL in a browser. */
export declare function loadModel(location: string | URL): Promise<StaticEmbedder>;
/** name -> the file's bytes, or null when it does not exist. */
export declare function folderReader(location: string | URL): Promise<(name: string) => Promise<ArrayBuffer | null>>;
export declare function tokenizationRules(spec?: Partial<TokenizationRules>, where?: string): TokenizationRules;
export declare function charGramBuckets(word: string, buckets: number): number[];

export interface NpyArray {
  dtype: string;
  shape: number[];
  data: Float32Array | Uint16Array | Int8Array | Uint8Array | Int32Array | BigInt64Array;
}
export declare function parseNpy(buffer: ArrayBuffer, name?: string): NpyArray;
export declare function crc32(bytes: Uint8Array): number;

export interface ConformanceFailure {
  index: number;
  text: string;
  problem: string;
}
export interface ConformanceResult {
  texts: number;
  minCosine: number;
  maxAbsDiff: number;
  failures: ConformanceFailure[];
}
/** Check a table against a parsed file of `swembed conformance`: rows exactly, vectors to minCosine (0.9999). */
export declare function compareConformance(model: StaticEmbedder, conformance: object,
  minCosine?: number): ConformanceResult;

/** A passage found for a query: its row in the corpus, its score (float32: the cosine; a lexical or hybrid search:
 * that score), its id (the row), its cosine, and its BM25 score (lexical and hybrid searches). */
export interface Hit {
  index: number;
  score: number;
  id: number;
  dense: number;
  lexical?: number;
}
/** How `search` ranks: by cosine ('dense', the default), BM25 ('lexical') or both ('hybrid', weighed by alpha);
 * `windows` (words): each longer passage's dense score adds its best window's cosine (null: none, the default). */
export interface SearchOptions {
  mode?: 'dense' | 'lexical' | 'hybrid';
  alpha?: number;
  windows?: number | null;
}
/** swembed.runtime.windows' defaults: a window's words, the weight of a passage's best window's cosine. */
export declare const WINDOW_WIDTH: number;
export declare const WINDOW_GAMMA: number;
export declare const WINDOW_ALPHA: number;
export declare const WINDOW_SHORTLIST: number;
export declare const WINDOW_SHORTLIST_FROM: number;
/** A text's windows of `width` words every floor(width / 2), the last ending at its end (none for a text of
 * `width` words or fewer), as Python's swembed.runtime.windows.word_windows. */
export declare function wordWindows(text: string, width: number): string[];
/** swembed.runtime.lexical's defaults: BM25's k1 and b, the hybrid's weight of the cosine. */
export declare const BM25_K1: number;
export declare const BM25_B: number;
export declare const HYBRID_ALPHA: number;
/** BM25 of every passage of corpus for each query, over the table's words, stemmed unless `stemmed` is false (as
 * Python's lexical search). */
export declare function bm25(model: StaticEmbedder, queries: string[], corpus: string[],
  settings?: { k1?: number; b?: number; stemmed?: boolean }): Float32Array[];
/** Snowball's English (Porter2) stem of a word of the letters a-z; any other word unchanged (as Python's
 * swembed.runtime.stemmer.stem). */
export declare function stem(word: string): string;
/** One query's hybrid scores: alpha * z(cosines) + (1 - alpha) * z(bm25), per passage. */
export declare function hybrid(cosines: Float32Array, lexical: Float32Array, alpha?: number): Float32Array;
/** The float32 dot product of two vectors: their cosine, for sentence vectors. */
export declare function dot(a: Float32Array, b: Float32Array): number;
/** The topK of `vectors` nearest `query` by cosine, best first, equal scores by lower index. */
export declare function rank(query: Float32Array, vectors: Float32Array[], topK?: number): Hit[];
/** Cosine similarities of texts: a matrix (one row per text of a), a row when one side is a string, a number for
 * two strings (as model.similarity in Python). */
export declare function similarity(model: StaticEmbedder, a: string, b: string, options?: SimilarityOptions): number;
export declare function similarity(model: StaticEmbedder, a: string | string[],
  b: string | string[], options?: SimilarityOptions): Float32Array | Float32Array[];
/** Each query's topK passages of corpus by cosine, BM25 or both, best first, ties by lower index (as model.search
 * in Python, with its mode and alpha). */
export declare function search(model: StaticEmbedder, queries: string, corpus: string[], topK?: number,
  options?: SearchOptions): Hit[];
export declare function search(model: StaticEmbedder, queries: string[], corpus: string[], topK?: number,
  options?: SearchOptions): Hit[][];
