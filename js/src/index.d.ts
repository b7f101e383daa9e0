// Types of swembed.js (src/index.js): read a swembed table folder (docs/format.md) and encode text as Python does.

/** A folder that is not a readable swe-static table, or one outside the portable subset; the message names it. */
export declare class FormatError extends Error {}
/** A tokenizer.json that is not a BERT-style WordPiece tokenizer. */
export declare class UnsupportedTokenizerError extends Error {}
/** An unreadable or truncated .npy file. */
export declare class NpyError extends Error {}

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
  /** The L2-normalised sentence vector of a text (the zero vector when no word has a row). */
  encode(text: string): Float32Array;
  encodeBatch(texts: string[]): Float32Array[];
  /** Cosine similarities, as model.similarity in Python (see `similarity`). */
  similarity(a: string, b: string): number;
  similarity(a: string | string[], b: string | string[]): Float32Array | Float32Array[];
  /** Each query's topK passages of corpus by cosine, best first, ties by lower index (see `search`). */
  search(queries: string, corpus: string[], topK?: number): Hit[];
  search(queries: string[], corpus: string[], topK?: number): Hit[][];
  meanRows(ids: number[], weights: number[]): Float32Array;
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

/** A passage found for a query: its row in the corpus, its cosine (float32), its id (the row). */
export interface Hit {
  index: number;
  score: number;
  id: number;
}
/** The float32 dot product of two vectors: their cosine, for sentence vectors. */
export declare function dot(a: Float32Array, b: Float32Array): number;
/** The topK of `vectors` nearest `query` by cosine, best first, equal scores by lower index. */
export declare function rank(query: Float32Array, vectors: Float32Array[], topK?: number): Hit[];
/** Cosine similarities of texts: a matrix (one row per text of a), a row when one side is a string, a number for
 * two strings (as model.similarity in Python). */
export declare function similarity(model: StaticEmbedder, a: string, b: string): number;
export declare function similarity(model: StaticEmbedder, a: string | string[],
  b: string | string[]): Float32Array | Float32Array[];
/** Each query's topK passages of corpus by cosine, best first, ties by lower index (as model.search in Python). */
export declare function search(model: StaticEmbedder, queries: string, corpus: string[], topK?: number): Hit[];
export declare function search(model: StaticEmbedder, queries: string[], corpus: string[], topK?: number): Hit[][];
