/**
 * The character facts of the format's tokenisation, pinned to Unicode 14.0.0 (docs/format.md, "Unicode version"):
 * normalisation, lower-casing and word characters exactly as Python's unicodedata 14.0.0, whatever Unicode version
 * the JavaScript engine ships. The facts are read from unicode-14.0.0.js (written by js/tools/unicode_tables.py).
 */
import * as data from './unicode-14.0.0.js';

export const UNICODE_VERSION = data.UNICODE_VERSION;

/** [[start, end], ...] (inclusive) from the packed form: each entry `gap.length` in base 36 after the last end. */
function unpackRanges(packed) {
  let at = 0;
  return packed.split(' ').map((entry) => {
    const [gap, length] = entry.split('.').map((n) => parseInt(n, 36));
    const start = at + gap;
    at = start + length;
    return [start, at];
  });
}

const escape = (cp) => `\\u{${cp.toString(16)}}`;
/** A regex character class (for a `u` regex) of the packed ranges. */
const characterClass = (packed) => `[${unpackRanges(packed)
  .map(([a, b]) => (a === b ? escape(a) : `${escape(a)}-${escape(b)}`)).join('')}]`;

/** Every maximal run of word characters (categories L* and N* of Unicode 14.0.0: Python's `[^\W_]+`). */
export const WORDS = new RegExp(`${characterClass(data.WORD)}+`, 'gu');
const ASSIGNED = unpackRanges(data.ASSIGNED);
const ASSIGNED_RUN = new RegExp(`${characterClass(data.ASSIGNED)}+`, 'gu');
const ASSIGNED_BMP = new Uint8Array(0x10000); // 1: assigned in 14.0.0 (surrogates are: category Cs)
for (const [start, end] of ASSIGNED) ASSIGNED_BMP.fill(1, start, Math.min(end, 0xffff) + 1);
const ASCII = /^[\0-\x7f]*$/;
/** A label that starts or ends with white space (Python's `str.isspace()`: what `str.strip()` removes). */
export const PADDED = new RegExp(`^${characterClass(data.SPACE)}|${characterClass(data.SPACE)}$`, 'u');

/** Whether the text holds a code point that 14.0.0 does not assign (one a later version added). */
function hasUnassigned(text) {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdbff) {
      if (!ASSIGNED_BMP[unit]) return true;
    } else {
      const cp = text.codePointAt(i);
      if (cp > 0xffff) {
        i += 1;
        if (!inRanges(ASSIGNED, cp)) return true;
      }
    }
  }
  return false;
}

/**
 * Unicode normalisation as of 14.0.0: each run of code points assigned in 14.0.0 is normalised by the engine
 * (Unicode's normalisation stability policy makes that the 14.0.0 result); a code point assigned later is
 * kept as it is (14.0.0 knows no decomposition, composition or combining class of it, so it bounds the runs).
 */
export function normalize(text, form) {
  if (!form || ASCII.test(text)) return text;
  if (!hasUnassigned(text)) return text.normalize(form); // one run: the whole text
  return text.replace(ASSIGNED_RUN, (run) => run.normalize(form));
}

const LOWER = new Map(Object.entries(data.LOWER_LONG).map(([cp, text]) => [Number(cp), text]));
let lastCodePoint = 0;
for (const entry of data.LOWER.split(' ')) {
  const [gap, delta] = entry.split('.').map((n) => parseInt(n, 36));
  lastCodePoint += gap;
  LOWER.set(lastCodePoint, String.fromCodePoint(lastCodePoint + delta));
}
const CAPITAL_SIGMA = 0x3a3;
const HAS_LOWER = new RegExp(`[${[...LOWER.keys(), CAPITAL_SIGMA].map(escape).join('')}]`, 'gu');
const CASED = unpackRanges(data.CASED);
const CASE_IGNORABLE = unpackRanges(data.CASE_IGNORABLE);

/** Whether the sorted inclusive ranges hold `cp` (binary search). */
function inRanges(ranges, cp) {
  let low = 0;
  let high = ranges.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    if (cp < ranges[mid][0]) high = mid - 1;
    else if (cp > ranges[mid][1]) low = mid + 1;
    else return true;
  }
  return false;
}

/** The first code point, from `at` towards `step` (+1 or -1, in UTF-16 units), that is not case-ignorable; or null. */
function nextNotIgnorable(text, at, step) {
  let i = at;
  while (i >= 0 && i < text.length) {
    let cp = text.codePointAt(i);
    if (step < 0 && cp >= 0xdc00 && cp <= 0xdfff && i > 0) {
      const pair = text.codePointAt(i - 1);
      if (pair > 0xffff) {
        cp = pair;
        i -= 1;
      }
    }
    if (!inRanges(CASE_IGNORABLE, cp)) return cp;
    i += step > 0 ? (cp > 0xffff ? 2 : 1) : -1;
  }
  return null;
}

/** Capital sigma's lower case: final (ς) after a cased letter and not before one, case-ignorables skipped. */
function lowerSigma(text, at) {
  const before = nextNotIgnorable(text, at - 1, -1);
  if (before === null || !inRanges(CASED, before)) return 'σ';
  const after = nextNotIgnorable(text, at + 1, 1);
  return after === null || !inRanges(CASED, after) ? 'ς' : 'σ';
}

/** Full lower-casing as Python's `str.lower()` with Unicode 14.0.0 (final sigma included). */
export function toLowerCase(text) {
  if (ASCII.test(text)) return text.toLowerCase();
  return text.replace(HAS_LOWER, (c, at) => {
    const cp = c.codePointAt(0);
    return cp === CAPITAL_SIGMA ? lowerSigma(text, at) : LOWER.get(cp);
  });
}
