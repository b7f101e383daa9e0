/**
 * Probe texts around every code point (alone, after and before a capital sigma, after a base letter, before a
 * combining accent), split into words by the table tokenisation, hashed per block of code points: the same in
 * Node and in a browser. tests/test_js_runtime.py computes the digests with the Python runtime and compares.
 */
import { WordTokenizer, tokenizationRules } from '../src/tokenizer.js';

export const BLOCK = 4096;
// Planes 0-3 and 14: every code point assigned by Unicode 17 but private use (planes 4-13 hold none)
export const PLANES = [[0, 0x40000], [0xe0000, 0xf0000]];
export const RULES = [
  { unicode_normalization: 'NFKC', lowercase: true },
  { unicode_normalization: 'NFD', lowercase: false },
];

/** The probes of code points [start, end), one a line. */
export function probeText(start, end) {
  const parts = [];
  for (let cp = start; cp < end; cp++) {
    const c = String.fromCodePoint(cp);
    parts.push(c, `AΣ${c}A`, `AΣ${c}`, `e${c}`, `${c}\u0301`);
  }
  return parts.join('\n');
}

/** For each of RULES, the hex SHA-256 (first 16 digits) of the words of each block of PLANES, joined by spaces. */
export async function probeDigests() {
  const out = [];
  for (const rules of RULES) {
    const tokenizer = new WordTokenizer(new Map(), tokenizationRules({ ...rules, oov_backoff: 'none' }));
    const digests = [];
    for (const start of PLANES.flatMap(([a, b]) => Array.from({ length: (b - a) / BLOCK }, (_, i) => a + i * BLOCK))) {
      const words = tokenizer.words(probeText(start, start + BLOCK)).join(' ');
      const hash = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(words));
      digests.push(Array.from(new Uint8Array(hash).slice(0, 8), (b) => b.toString(16).padStart(2, '0')).join(''));
    }
    out.push(digests);
  }
  return out;
}
