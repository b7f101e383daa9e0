"""lab.wordnet_glosses: WordNet data lines -> one ``lemmas: definitions.`` line per synset."""
import gzip

from lab.wordnet_glosses import PARTS, main

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
NOUN = ("00982852 04 n 02 signals_intelligence 0 SIGINT 0 001 @ 00981830 n 0000 | intelligence gathered from "
        'communications; "SIGINT was decisive" ; not from telemetry  \n')
ADJ = "00001740 00 a 01 able(a) 0 000 | (usually followed by `to') having the necessary means  \n"
EMPTY = '00002098 00 a 01 unable 0 000 | "an example only"  \n'


def test_glosses_keep_lemmas_and_definitions_and_drop_examples_and_headers(tmp_path):
    lines = {"noun": HEADER + NOUN, "adj": ADJ + EMPTY, "verb": HEADER, "adv": ""}
    for part in PARTS:
        (tmp_path / f"data.{part}").write_text(lines[part], encoding="utf-8")
    out = tmp_path / "out" / "glosses.txt.gz"
    assert main(["--wordnet", str(tmp_path), "--out", str(out)]) == 0
    with gzip.open(out, "rt", encoding="utf-8") as handle:
        got = handle.read().splitlines()
    assert got == ["Signals intelligence, SIGINT: intelligence gathered from communications; not from telemetry.",
                   "Able: (usually followed by `to') having the necessary means."]
    assert [p.name for p in out.parent.iterdir()] == ["glosses.txt.gz"]  # written whole, no temp file left


def test_a_missing_wordnet_is_one_line_naming_the_package(tmp_path, capsys):
    assert main(["--wordnet", str(tmp_path), "--out", str(tmp_path / "g.txt.gz")]) == 1
    assert capsys.readouterr().err.strip() == f"{tmp_path}: no data.noun (apt-get install wordnet-base)"
