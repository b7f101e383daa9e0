/**
 * The part of a Hugging Face tokenizer.json that swembed's back-off uses, for BERT-style WordPiece teachers
 * (MiniLM, mpnet, BGE, GTE, ...): BertNormalizer, BertPreTokenizer and the WordPiece model. It splits one *word*
 * (a run of letters and digits, already normalised and lower-cased by the table's own rules) into the teacher's
 * pieces, with each piece's [start, end) in the word's code points, exactly as `tokenizer.encode(word)` does.
 * Other tokenizer types are refused with a message naming the part (docs/format.md, "Sub-word back-off").
 */

export class UnsupportedTokenizerError extends Error {}

// The CJK ideograph blocks BertNormalizer (handle_chinese_chars) surrounds with spaces: each becomes its own word.
const CHINESE = [
  [0x4e00, 0x9fff], [0x3400, 0x4dbf], [0x20000, 0x2a6df], [0x2a700, 0x2b73f], [0x2b740, 0x2b81f],
  [0x2b920, 0x2ceaf], [0xf900, 0xfaff], [0x2f800, 0x2fa1f],
];
const isChinese = (cp) => CHINESE.some(([a, b]) => cp >= a && cp <= b);
const WHITESPACE = /^\s$/u;
const PUNCTUATION = /^[\p{P}!-/:-@[-`{-~]$/u; // BertPreTokenizer: Unicode punctuation and all ASCII symbols
const NONSPACING_MARKS = /\p{Mn}/gu;

export class WordPiece {
  constructor(tokenizerJson, name = 'tokenizer.json') {
    const { normalizer, pre_tokenizer: pre, model } = tokenizerJson;
    if (!model || model.type !== 'WordPiece') {
      throw new UnsupportedTokenizerError(`${name}: model ${model && model.type} is not supported (WordPiece only)`);
    }
    if (normalizer && normalizer.type !== 'BertNormalizer') {
      throw new UnsupportedTokenizerError(`${name}: normalizer ${normalizer.type} is not supported (BertNormalizer)`);
    }
    if (pre && pre.type !== 'BertPreTokenizer') {
      throw new UnsupportedTokenizerError(`${name}: pre_tokenizer ${pre.type} is not supported (BertPreTokenizer)`);
    }
    this.vocab = new Map(Object.entries(model.vocab));
    this.unk = model.unk_token;
    this.prefix = model.continuing_subword_prefix ?? '##';
    this.maxChars = model.max_input_chars_per_word ?? 100;
    const bert = normalizer || {};
    this.chinese = Boolean(normalizer) && bert.handle_chinese_chars !== false;
    this.lowercase = Boolean(normalizer) && bert.lowercase !== false;
    this.stripAccents = Boolean(normalizer) && (bert.strip_accents ?? this.lowercase) === true;
  }

  /** Normalised characters of `word`, each with the index of the code point it came from. */
  normalize(word) {
    const out = [];
    Array.from(word).forEach((ch, source) => {
      if (this.chinese && isChinese(ch.codePointAt(0))) {
        out.push([' ', source], [ch, source], [' ', source]);
        return;
      }
      let text = this.stripAccents ? ch.normalize('NFD').replace(NONSPACING_MARKS, '') : ch;
      if (this.lowercase) text = text.toLowerCase();
      for (const c of text) out.push([c, source]);
    });
    return out;
  }

  /** The pieces of `word`: [{token, start, end}] with start/end in its code points. */
  encode(word) {
    const pieces = [];
    let current = [];
    const flush = () => {
      if (current.length) this.wordPiece(current, pieces);
      current = [];
    };
    for (const item of this.normalize(word)) {
      if (WHITESPACE.test(item[0])) flush();
      else if (PUNCTUATION.test(item[0])) {
        flush();
        current = [item];
        flush();
      } else current.push(item);
    }
    flush();
    return pieces;
  }

  wordPiece(chars, out) {
    const span = (a, b) => ({ start: chars[a][1], end: chars[b - 1][1] + 1 });
    if (chars.length > this.maxChars) {
      out.push({ token: this.unk, ...span(0, chars.length) });
      return;
    }
    const text = chars.map((c) => c[0]).join('');
    const offsets = [0]; // UTF-16 offset of each character boundary
    for (const [c] of chars) offsets.push(offsets[offsets.length - 1] + c.length);
    const found = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let match = null;
      while (start < end) {
        const piece = (start > 0 ? this.prefix : '') + text.slice(offsets[start], offsets[end]);
        if (this.vocab.has(piece)) {
          match = piece;
          break;
        }
        end -= 1;
      }
      if (match === null) {
        out.push({ token: this.unk, ...span(0, chars.length) });
        return;
      }
      found.push({ token: match, ...span(start, end) });
      start = end;
    }
    out.push(...found);
  }
}
