import bz2
import gzip
import json
import lzma
import zipfile

import pytest

from swembed.pipeline.config import CorpusConfig
from swembed.pipeline.corpus import SentenceSplitter, write_sentences
from swembed.pipeline.sources import CorpusError, detokenize_wikitext, expand_sources, read_source

LINES = ["First line here.", "Second line there."]


@pytest.mark.parametrize("suffix,opener", [(".txt.gz", gzip.open), (".txt.bz2", bz2.open), (".txt.xz", lzma.open)])
def test_compressed_text(tmp_path, suffix, opener):
    path = tmp_path / f"c{suffix}"
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(LINES) + "\n")
    assert list(read_source(str(path))) == LINES


def test_zip_jsonl_and_missing_column(tmp_path):
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("c/README", "not text to read")
        zf.writestr("c/a.txt", "\n".join(LINES))
    assert list(read_source(str(archive))) == LINES
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("\n".join(json.dumps({"body": line}) for line in LINES))
    assert list(read_source(str(jsonl), text_column="body")) == LINES
    with pytest.raises(CorpusError, match="no 'text' field"):
        list(read_source(str(jsonl)))


def test_a_zip_of_tagged_sentences_reads_as_plain_text_and_other_zips_as_they_are(tmp_path):
    """NLTK's Brown corpus: ``word/TAG`` tokens, one sentence per line, beside a CONTENTS index."""
    tagged = ("\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
              "investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` no/at "
              "evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.\n"
              "\tHe/pps is/bez not/* prepared/vbn for/in it/ppo --/-- naturally/rb ,/, nobody/pn is/bez ./.\n")
    archive = tmp_path / "brown.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("brown/CONTENTS", "ca01 news\nca02 news\n")
        zf.writestr("brown/ca01", tagged)
    assert [line for line in read_source(str(archive)) if line] == [
        "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary election produced "
        '"no evidence" that any irregularities took place.',
        "He is not prepared for it -- naturally, nobody is."]
    plain = tmp_path / "plain.zip"
    lines = ["See http://example.org/page and/or the and/or rule.", "A 50/50 split, then 3/4 of it."] * 20
    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("p/a.txt", "\n".join(lines))
    assert list(read_source(str(plain))) == lines


def test_expand_sources_errors(tmp_path):
    with pytest.raises(CorpusError, match="not found"):
        expand_sources([str(tmp_path / "nope.txt")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no files"):
        expand_sources([str(tmp_path / "empty")])
    with pytest.raises(CorpusError, match="matches no file"):
        expand_sources([str(tmp_path / "*.gz")])


def test_corpus_splits_filters_and_dedups(tmp_path):
    src = tmp_path / "c.txt"
    src.write_text("One two three four. One two three four.\nToo short.\n"
                   "Ｆｕｌｌｗｉｄｔｈ letters are normalised here.\n", encoding="utf-8")
    out = tmp_path / "s.txt"
    stats = write_sentences(CorpusConfig(sources=[str(src)], min_words=3), "NFKC", [str(src)], out)
    assert out.read_text().splitlines() == ["One two three four.", "Fullwidth letters are normalised here."]
    assert stats["duplicates"] == 1 and stats["too_short"] == 1 and stats["kept"] == 2


def test_the_sentence_splitter_answers_as_blingfire_over_a_growing_and_reused_buffer():
    from blingfire import text_to_sentences

    long = " ".join(f"Sentence number {i} ends here. Dr. Who said so?" for i in range(3000))  # past the first buffer
    texts = ["", "a", "Hello world. Bye now.", "é ü 日本語。 これは", long, "Short again. After a long one.",
             "Ünïcödé quotes “here”. And here!", "x" * 70000]
    split = SentenceSplitter()
    assert [split(text) for text in texts] == [text_to_sentences(text).split("\n") for text in texts]


def test_detokenize_wikitext():
    assert detokenize_wikitext(" a role @-@ playing game , he said . ") == "a role-playing game, he said."


def test_parquet_with_text_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"body": LINES, "id": [1, 2]}), path)
    assert list(read_source(str(path), text_column="body")) == LINES
    with pytest.raises(CorpusError, match="no column 'text'"):
        list(read_source(str(path)))


def test_a_copied_or_remounted_corpus_keeps_its_cache_and_an_edited_one_does_not(tmp_path):
    """The corpus stage is keyed by the files' content, not their mtime: a build resumes after a re-mount."""
    import os
    import shutil

    from swembed.pipeline.corpus import run_corpus
    from swembed.pipeline.sources import content_digest
    from swembed.pipeline.stage import StageContext

    text = "".join(f"Sentence number {i} has a few words in it.\n" for i in range(50))
    path = tmp_path / "a.txt"
    path.write_text(text)
    config = CorpusConfig(sources=[str(path)])
    first = run_corpus(StageContext(tmp_path / "work", quiet=True), config, "NFKC")
    os.utime(path, (1, 1))  # what a re-mount or a copy without -p does
    assert run_corpus(StageContext(tmp_path / "work", quiet=True), config, "NFKC").cached
    path.write_text(text.replace("few", "new"))  # same size, other content
    assert not run_corpus(StageContext(tmp_path / "work", quiet=True), config, "NFKC").cached
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1 << 20))
    shutil.copy(big, tmp_path / "copy.bin")
    assert content_digest(big, whole_below=1 << 16) == content_digest(tmp_path / "copy.bin", whole_below=1 << 16)
    with open(big, "r+b") as handle:  # sampled above whole_below: the first block is always read
        handle.write(b"x")
    assert content_digest(big, whole_below=1 << 16) != content_digest(tmp_path / "copy.bin", whole_below=1 << 16)
    assert first.key != run_corpus(StageContext(tmp_path / "work", quiet=True), config, "NFKC").key


def test_held_out_texts_never_enter_the_corpus(tmp_path):
    """``exclude``: a corpus sentence repeating any line or tab-separated field of an evaluation file (in any
    case, spacing or punctuation, whole or behind a leading label such as ``Speaker: ``) is dropped and counted;
    a build without exclusions keeps its cache key."""
    from swembed.pipeline.corpus import run_corpus
    from swembed.pipeline.stage import StageContext

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"Sentence number {i} has a few words.\n" for i in range(20)) +
                      "A man is playing a guitar.\nTwo dogs run on the beach.\n"
                      "guitarist: A man is playing a guitar!\nThe score we gave was: 4.2\n", encoding="utf-8")
    evals = tmp_path / "eval" / "sts"
    evals.mkdir(parents=True)
    (evals / "pairs.tsv").write_text("4.2\ta man is playing a guitar .\tA woman plays the flute.\n")
    config = CorpusConfig(sources=[str(corpus)])
    plain = run_corpus(StageContext(tmp_path / "work", quiet=True), config, "NFKC")
    assert run_corpus(StageContext(tmp_path / "work", quiet=True), config, "NFKC", exclude=[]).key == plain.key
    held = run_corpus(StageContext(tmp_path / "work", quiet=True), config, "NFKC", exclude=[str(tmp_path / "eval")])
    assert held.key != plain.key
    kept = (held.path / "sentences.txt").read_text().splitlines()
    # A held-out text behind a leading label goes too; a short remainder ("4.2", a field of the file) is no text.
    assert "A man is playing a guitar." not in kept and "guitarist: A man is playing a guitar!" not in kept
    assert "The score we gave was: 4.2" in kept and len(kept) == 22
    assert held.stats["held_out"] == 2

