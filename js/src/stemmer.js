/**
 * Snowball's English stemmer (Porter2, as Snowball 3.1 generates it) for the lexical channel: the same code step for
 * step as Python's swembed/runtime/stemmer.py (tests/test_stemmer.py compares the two over many words). Only words
 * of the letters a-z are stemmed; any other word is its own stem.
 */

const ASCII_WORD = /^[a-z]+$/;
const VOWELS = new Set('aeiouy');
const DOUBLES = ['bb', 'dd', 'ff', 'gg', 'mm', 'nn', 'pp', 'rr', 'tt'];
const LI_ENDINGS = new Set('cdeghkmnrt');
const R1_PREFIXES = ['arsen', 'commun', 'emerg', 'gener', 'inter', 'later', 'organ', 'past', 'univers'];
const EXCEPTIONS = new Map(Object.entries({
  skis: 'ski', skies: 'sky', idly: 'idl', gently: 'gentl', ugly: 'ugli', early: 'earli', only: 'onli', singly: 'singl',
  sky: 'sky', news: 'news', howe: 'howe', atlas: 'atlas', cosmos: 'cosmos', bias: 'bias', andes: 'andes',
}));
const KEEP_EED = new Set(['succ', 'proc', 'exc']);
const KEEP_ING = new Set(['even', 'cann', 'inn', 'earr', 'herr', 'out']);
// Steps 2-4: [suffix, replacement], longest first: the longest suffix a word ends with is the one tried
const STEP_2 = [
  ['ization', 'ize'], ['ational', 'ate'], ['fulness', 'ful'], ['ousness', 'ous'], ['iveness', 'ive'],
  ['tional', 'tion'], ['biliti', 'ble'], ['lessli', 'less'], ['entli', 'ent'], ['ation', 'ate'],
  ['alism', 'al'], ['aliti', 'al'], ['ogist', 'og'], ['ousli', 'ous'], ['iviti', 'ive'], ['fulli', 'ful'],
  ['enci', 'ence'], ['anci', 'ance'], ['abli', 'able'], ['izer', 'ize'], ['ator', 'ate'], ['alli', 'al'],
  ['bli', 'ble'], ['ogi', 'og'], ['li', ''],
];
const STEP_3 = [['ational', 'ate'], ['tional', 'tion'], ['alize', 'al'], ['icate', 'ic'], ['iciti', 'ic'],
  ['ative', ''], ['ical', 'ic'], ['ness', ''], ['ful', '']];
const STEP_4 = ['ement', 'ance', 'ence', 'able', 'ible', 'ment', 'ant', 'ent', 'ism', 'ate', 'iti', 'ous', 'ive', 'ize',
  'ion', 'al', 'er', 'ic'];

const isVowel = (word, i) => VOWELS.has(word[i]);
const hasVowel = (text) => [...text].some((c) => VOWELS.has(c));

/** The index after the first non-vowel that follows a vowel, from `start` (word.length when none). */
function regionAfterVC(word, start) {
  for (let i = start + 1; i < word.length; i++) if (!isVowel(word, i) && isVowel(word, i - 1)) return i + 1;
  return word.length;
}

function regions(word) {
  const prefix = R1_PREFIXES.find((p) => word.startsWith(p));
  const r1 = prefix === undefined ? regionAfterVC(word, 0) : prefix.length;
  return [r1, regionAfterVC(word, r1)];
}

/** Snowball's shortv: a non-vowel (not w, x or Y) after a vowel after a non-vowel; a vowel and a non-vowel that are
 * the whole word; or the ending "past". */
function shortSyllableAtEnd(word) {
  const n = word.length;
  if (n >= 3 && !'wxY'.includes(word[n - 1]) && !isVowel(word, n - 1) && isVowel(word, n - 2) && !isVowel(word, n - 3)) {
    return true;
  }
  if (n === 2 && isVowel(word, 0) && !isVowel(word, 1)) return true;
  return word.endsWith('past');
}

function step1a(word) {
  if (word.endsWith('sses')) return word.slice(0, -2);
  if (word.endsWith('ied') || word.endsWith('ies')) return word.length > 4 ? word.slice(0, -2) : word.slice(0, -1);
  if (word.endsWith('us') || word.endsWith('ss')) return word;
  if (word.endsWith('s') && hasVowel(word.slice(0, -2))) return word.slice(0, -1);
  return word;
}

function afterStep1bDeletion(stem, r1) {
  if (['at', 'bl', 'iz'].some((s) => stem.endsWith(s))) return `${stem}e`;
  if (DOUBLES.some((s) => stem.endsWith(s))) return stem.length === 3 && 'aeo'.includes(stem[0]) ? stem : stem.slice(0, -1);
  return r1 === stem.length && shortSyllableAtEnd(stem) ? `${stem}e` : stem;
}

function step1b(word, r1) {
  for (const suffix of ['eedly', 'eed']) {
    if (word.endsWith(suffix)) {
      const start = word.length - suffix.length;
      return start >= r1 && !KEEP_EED.has(word.slice(0, start)) ? `${word.slice(0, start)}ee` : word;
    }
  }
  const suffix = ['ingly', 'edly', 'ing', 'ed'].find((s) => word.endsWith(s)) || '';
  const stem = word.slice(0, word.length - suffix.length);
  if (suffix === 'ing' && stem.length === 2 && stem[1] === 'y' && !isVowel(stem, 0)) return `${stem[0]}ie`;
  if (!suffix || (suffix === 'ing' && KEEP_ING.has(stem)) || !hasVowel(stem)) return word;
  return afterStep1bDeletion(stem, r1);
}

function step1c(word) {
  const n = word.length;
  if (n > 2 && 'yY'.includes(word[n - 1]) && !isVowel(word, n - 2)) return `${word.slice(0, -1)}i`;
  return word;
}

function step2(word, r1) {
  for (const [suffix, replacement] of STEP_2) {
    if (word.endsWith(suffix)) {
      if (word.length - suffix.length < r1) return word;
      const stem = word.slice(0, -suffix.length);
      if (suffix === 'ogi' && !stem.endsWith('l')) return word;
      if (suffix === 'li' && (!stem || !LI_ENDINGS.has(stem[stem.length - 1]))) return word;
      return stem + replacement;
    }
  }
  return word;
}

function step3(word, r1, r2) {
  for (const [suffix, replacement] of STEP_3) {
    if (word.endsWith(suffix)) {
      const start = word.length - suffix.length;
      if (start < r1 || (suffix === 'ative' && start < r2)) return word;
      return word.slice(0, start) + replacement;
    }
  }
  return word;
}

function step4(word, r2) {
  for (const suffix of STEP_4) {
    if (word.endsWith(suffix)) {
      const start = word.length - suffix.length;
      if (start < r2 || (suffix === 'ion' && (start === 0 || !'st'.includes(word[start - 1])))) return word;
      return word.slice(0, start);
    }
  }
  return word;
}

function step5(word, r1, r2) {
  const last = word.length - 1;
  if (word.endsWith('e') && (last >= r2 || (last >= r1 && !shortSyllableAtEnd(word.slice(0, -1))))) {
    return word.slice(0, -1);
  }
  if (word.endsWith('ll') && last >= r2) return word.slice(0, -1);
  return word;
}

/** Initial y, and y after a vowel, as Y (a consonant). */
function markYs(word) {
  const chars = [...word];
  chars.forEach((c, i) => {
    if (c === 'y' && (i === 0 || VOWELS.has(chars[i - 1]))) chars[i] = 'Y';
  });
  return chars.join('');
}

/** The Porter2 stem of a lower-case word of the letters a-z; any other word unchanged. */
export function stem(word) {
  if (word.length <= 2 || !ASCII_WORD.test(word)) return word;
  if (EXCEPTIONS.has(word)) return EXCEPTIONS.get(word);
  const marked = markYs(word);
  const [r1, r2] = regions(marked);
  let out = step1c(step1b(step1a(marked), r1));
  out = step5(step4(step3(step2(out, r1), r1, r2), r2), r1, r2);
  return out.replaceAll('Y', 'y');
}
