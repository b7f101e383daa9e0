"""lab.debian_descriptions: Debian's Translation-en index as query<TAB>document pairs."""
import gzip

from lab.debian_descriptions import descriptions, is_dev, main, pairs

INDEX = """Package: bowtie2
Description-md5: a4a641e19bb5b2750860b5cde2b844a2
Description-en: ultrafast memory-efficient short read aligner
 is an ultrafast and memory-efficient tool for aligning sequencing reads
 to long reference sequences.
 .
 Bowtie 2 indexes the genome with an FM Index to keep its memory footprint small.

Package: bowtie2-examples
Description-md5: 0000
Description-en: examples for bowtie2
 is an ultrafast and memory-efficient tool for aligning sequencing reads
 to long reference sequences.
 .
 Bowtie 2 indexes the genome with an FM Index to keep its memory footprint small.
 .
 This package provides some example data.

Package: tiny
Description-en: a tool
 Does one thing.

Package: r-cran-lme4
Description-md5: e0a11a5329ab3520a18f2bac1295c648
Description-en: GNU R package for linear mixed effects model fitting
 This CRAN package provides S4 classes and methods for fitting and
 examining linear mixed effects models.
"""


def test_each_record_gives_its_summary_and_its_description_joined_without_paragraph_marks():
    found = list(descriptions(INDEX))
    assert found[0] == ("bowtie2", "ultrafast memory-efficient short read aligner",
                        "is an ultrafast and memory-efficient tool for aligning sequencing reads to long reference "
                        "sequences. Bowtie 2 indexes the genome with an FM Index to keep its memory footprint small.")
    assert [package for package, _, _ in found] == ["bowtie2", "bowtie2-examples", "tiny", "r-cran-lme4"]


def test_repeated_and_short_descriptions_are_dropped():
    kept = [package for package, _, _ in pairs(INDEX, min_words=8)]
    # the examples package repeats bowtie2's first 20 words; tiny is too short
    assert kept == ["bowtie2", "r-cran-lme4"]


def test_split_packages_fall_on_the_same_side_of_the_dev_split():
    assert all(is_dev(f"libfoo{i}-dev", 7) == is_dev(f"libfoo{i}", 7) for i in range(50))
    assert 0 < sum(is_dev(f"pkg{i}", 7) for i in range(700)) < 200
    assert not any(is_dev(f"pkg{i}", 0) for i in range(50))


def test_main_writes_the_training_and_dev_pairs_from_a_given_index(tmp_path):
    index = tmp_path / "Translation-en"
    index.write_text(INDEX)
    out, dev = tmp_path / "pairs.tsv.gz", tmp_path / "dev.tsv.gz"
    assert main(["--translation", str(index), "--out", str(out), "--dev-out", str(dev), "--min-words", "8",
                 "--dev-every", "1"]) == 0
    assert gzip.open(out, "rt").read() == ""
    rows = [line.split("\t") for line in gzip.open(dev, "rt").read().splitlines()]
    assert [summary for summary, _ in rows] == ["ultrafast memory-efficient short read aligner",
                                                "GNU R package for linear mixed effects model fitting"]
    assert main(["--translation", str(tmp_path / "missing"), "--out", str(out)]) == 1
