"""The model card (README.md) of a swembed table, or of its sentence-transformers / model2vec export.

YAML front matter the Hub reads (``library_name``, ``license`` from the teachers' and the data's licences,
``base_model``, ``datasets``, ``tags``, ``pipeline_tag``, a ``model-index`` of the table's own ``swembed eval
--json`` scores), then what the table is, how it was built (config.json's ``build``), its scores, usage in
swembed, sentence-transformers, model2vec and JavaScript (the shipped format's first), the licence and the
citation. Everything comes from the table folder's config.json, the teacher registry and the eval files given;
the data sources' licences come from ``corpus_licences`` (the caller's lookup: ``source_licences`` of
``swembed.pipeline.public_data``, a floor above this one). ``swembed.runtime.hub.model_card`` is the one entry.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from swembed.runtime.folder import read_config
from swembed.teachers.registry import TEACHERS

FORMATS = ("swembed", "st", "model2vec")
UNKNOWN = "unknown"
LicenceLookup = Callable[[list[str]], list[dict]]
# Scores of `swembed eval --json` the model-index knows: (task type, dataset id, config, metric type)
STS = {"STS12": "mteb/sts12-sts", "STS13": "mteb/sts13-sts", "STS14": "mteb/sts14-sts", "STS15": "mteb/sts15-sts",
       "STS16": "mteb/sts16-sts", "STSBenchmark": "mteb/stsbenchmark-sts", "SICK-R": "mteb/sickr-sts"}
MTEB = {"Banking77": ("Classification", "mteb/banking77", None, "accuracy"),
        "AmazonCF-en": ("Classification", "mteb/amazon_counterfactual", "en", "accuracy"),
        "Emotion": ("Classification", "mteb/emotion", None, "accuracy"),
        "TweetSentiment": ("Classification", "mteb/tweet_sentiment_extraction", None, "accuracy"),
        "SciFact": ("Retrieval", "mteb/scifact", None, "ndcg_at_10")}
KNOWN = {**{name: ("STS", dataset, None, "cosine_spearman") for name, dataset in STS.items()}, **MTEB}
HUB_LICENCES = {"apache-2.0", "mit", "gemma", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-4.0",
                "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "gpl-2.0", "gpl-3.0", "mpl-2.0", "bsd-3-clause", "cc0-1.0"}
CITATION = """@misc{wada2025static,
  title  = {Static Word Embeddings for Sentence Semantic Representation},
  author = {Wada, Takashi and Hirakawa, Yuki and Shimizu, Ryotaro and Kawashima, Takahiro and Saito, Yuki},
  year   = {2025},
  url    = {https://github.com/twadada/swe4semantics}
}"""


class CardError(ValueError):
    """An eval result file that cannot go into a card."""


def read_scores(paths: Sequence[Path]) -> list[dict]:
    """The ``swembed eval --json`` results (``suite``, ``split``, ``scores``) of ``paths``; anything else (not
    JSON, no scores, the scores of another kind of model) is one line naming the file."""
    results = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CardError(f"{path}: not a swembed eval --json result ({exc})") from None
        scores = data.get("scores") if isinstance(data, dict) else None
        if not isinstance(scores, dict) or not all(isinstance(v, (int, float)) for v in scores.values()):
            raise CardError(f"{path}: not a swembed eval --json result (no \"scores\" of numbers)")
        if data.get("kind") != "swembed":
            raise CardError(f"{path}: the scores of a {data.get('kind')!r} model ({data.get('model')}), not of a "
                            "swembed table")
        results.append({"suite": str(data.get("suite", "en")), "split": str(data.get("split", "test")),
                        "model": str(data.get("model", "")), "scores": scores})
    return results


def teacher_entries(config: dict) -> list[dict]:
    """The table's teacher and co-teachers: ``name``, ``hub_id``, ``licence`` (the registry's, else unknown)."""
    recorded = config.get("teacher") or {}
    names = [recorded.get("name") or recorded.get("hub_id") or UNKNOWN]
    coteachers = ((config.get("build") or {}).get("config") or {}).get("coteacher", {}).get("teachers") or []
    names += [coteachers] if isinstance(coteachers, str) else list(coteachers)
    entries = []
    for name in names:
        spec = TEACHERS.get(name) or next((s for s in TEACHERS.values() if s.hub_id == name), None)
        hub_id = spec.hub_id if spec else (recorded.get("hub_id") if name == names[0] else name)
        entries.append({"name": name, "hub_id": hub_id or name, "licence": (spec.licence if spec else None) or UNKNOWN})
    return entries


def data_sources(build: dict) -> list[str]:
    """Every data source a build recorded: corpus sources, each language's corpora, parallel, retrieval and
    paragraph files, word lists."""
    parallel = build.get("parallel") or []
    groups = [(build.get("corpus") or {}).get("sources") or [], *(build.get("corpora") or {}).values(),
              *(parallel.values() if isinstance(parallel, dict) else [parallel]),
              (build.get("retrieval") or {}).get("files") or [], (build.get("paragraphs") or {}).get("files") or [],
              (build.get("vocab") or {}).get("word_lists") or []]
    return list(dict.fromkeys(str(source) for group in groups for source in group))


def corpus_licences(sources: list[str], lookup: LicenceLookup | None) -> list[dict]:
    """``source``, ``licence``, ``upstream`` of each source through ``lookup`` (one source at a time, so that one it
    cannot name is "unknown" instead of failing the card); without a lookup, all unknown."""
    out: list[dict] = []
    for source in sources:
        try:
            found = lookup([source]) if lookup else []
        except (ValueError, OSError):
            found = []
        out += [{"source": str(f.get("source", source)), "licence": str(f.get("licence") or UNKNOWN),
                 "upstream": str(f.get("upstream") or source)} for f in found] or [
            {"source": source, "licence": UNKNOWN, "upstream": source}]
    return out


def licence_id(text: str) -> str | None:
    """The Hub's licence id for a licence as written ("Apache-2.0" -> apache-2.0), or None."""
    slug = text.strip().lower().replace(" ", "-")
    return slug if slug in HUB_LICENCES else None


def licence_fields(teachers: list[dict], sources: list[dict]) -> dict:
    """``license`` (and ``license_name`` for ``other``): the one licence of the teachers and the data when they all
    agree and the Hub knows it, else ``other``."""
    texts = list(dict.fromkeys([t["licence"] for t in teachers] + [s["licence"] for s in sources]))
    ids = {licence_id(text) for text in texts}
    if len(ids) == 1 and None not in ids:
        return {"license": ids.pop()}
    name = "-and-".join(re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") for text in texts)
    return {"license": "other", "license_name": name if len(name) <= 64 else "mixed-see-card"}


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()
               and not any(part.startswith(".") for part in p.relative_to(folder).parts) and p.name != "README.md")


def facts(config: dict, files: Path) -> dict:
    """What the card says the table is: dim, words, pieces, gram rows, storage, languages, size on disk."""
    rows = int(config.get("vocab_size") or 0)
    blocks = {name: (config.get(name) or {}).get("rows") for name in ("pieces", "grams")}
    words = min([span[0] for span in blocks.values() if span] or [rows])
    storage = (config.get("storage") or {}).get("kind") or config.get("dtype", "float32")
    build = (config.get("build") or {}).get("config") or {}
    return {"dim": config.get("dim"), "rows": rows, "words": words, "storage": storage,
            "pieces": (lambda s: s[1] - s[0] if s else 0)(blocks["pieces"]),
            "grams": (lambda s: s[1] - s[0] if s else 0)(blocks["grams"]),
            "languages": list(config.get("languages") or build.get("langs") or ["en"]), "bytes": _size(files)}


HF_DATASETS = "hf://datasets/"


def _dataset_id(source: str) -> str:
    """``hf://datasets/org/name[@rev]/path`` -> ``org/name``."""
    org, name = source[len(HF_DATASETS):].split("/")[:2]
    return f"{org}/{name.split('@')[0]}"


def eval_results(results: list[dict]) -> list:
    """The model-index entries (huggingface_hub ``EvalResult``) of the test-split scores the Hub knows."""
    from huggingface_hub import EvalResult

    out = []
    for result in results:
        if result["split"] != "test":  # dev scores choose settings; they are no benchmark result
            continue
        for name, value in result["scores"].items():
            if name in KNOWN:
                task, dataset, subset, metric = KNOWN[name]
                out.append(EvalResult(task_type=task, dataset_type=dataset, dataset_name=name, dataset_config=subset,
                                      dataset_split="test", metric_type=metric, metric_value=round(float(value), 2)))
    return out


def front_matter(name: str, fmt: str, teachers: list[dict], sources: list[dict], languages: list[str],
                 results: list[dict]) -> str:
    """The YAML between the card's ``---`` lines (huggingface_hub's ``ModelCardData``)."""
    from huggingface_hub import ModelCardData

    library = {"swembed": "swembed", "st": "sentence-transformers", "model2vec": "model2vec"}[fmt]
    tags = ["swembed", "static-embeddings", "sentence-similarity", "feature-extraction", "embeddings"]
    tags += [] if fmt == "swembed" else [library]
    datasets = list(dict.fromkeys(_dataset_id(s["source"]) for s in sources if s["source"].startswith(HF_DATASETS)))
    hub_teachers = [t["hub_id"] for t in teachers if re.fullmatch(r"[\w.-]+/[\w.-]+", t["hub_id"])]
    evals = eval_results(results)
    data = ModelCardData(library_name=library, **licence_fields(teachers, sources), language=languages,
                         base_model=(hub_teachers[0] if len(hub_teachers) == 1 else hub_teachers) or None,
                         datasets=datasets or None, tags=tags, pipeline_tag="sentence-similarity",
                         model_name=name if evals else None, eval_results=evals or None)
    return data.to_yaml()


def usage(fmt: str, name: str, repo_id: str | None, source: str) -> str:
    """The four usage snippets, the shipped format's first. ``source``: the swembed table an export came from."""
    where = repo_id or name
    table = where if fmt == "swembed" else source
    url = (f"https://huggingface.co/{repo_id}/resolve/main/" if repo_id and fmt == "swembed"
           else f"path/to/{table}/")
    snippets = {
        "swembed": ("### swembed (Python; numpy and tokenizers only)",
                    f"```python\nimport swembed  # pip install swembed\n\nmodel = swembed.load(\"{table}\")\n"
                    "vectors = model.encode([\"a cat sat on the mat\", \"a dog ran\"])  # float32, L2-normalised\n```"),
        "st": ("### sentence-transformers", _library_snippet(
            fmt, "st", where, table, "from sentence_transformers import SentenceTransformer",
            "SentenceTransformer")),
        "model2vec": ("### model2vec", _library_snippet(
            fmt, "model2vec", where, table, "from model2vec import StaticModel", "StaticModel.from_pretrained")),
        "js": ("### JavaScript (Node or a browser: swembed.js, the js/ folder of swembed)",
               f"```js\nimport {{ loadModel }} from 'swembed';  // npm install ./js, from a swembed checkout\n\n"
               f"const model = await loadModel('{url}');\n"
               "const vector = model.encode('a cat sat on the mat');  // Float32Array, L2-normalised\n```\n"
               "swembed.js reads the swe-static format's portable subset (docs/format.md): one language, WordPiece "
               "teachers."),
    }
    order = [fmt, *[key for key in ("swembed", "st", "model2vec", "js") if key != fmt]]
    return "\n\n".join(f"{snippets[key][0]}\n\n{snippets[key][1]}" for key in order)


def _library_snippet(fmt: str, target: str, where: str, table: str, line: str, call: str) -> str:
    """Loading the ``target`` format: this repo itself when it is that format, else an export of the table."""
    load = "SentenceTransformer" if target == "st" else "StaticModel"
    if fmt == target:
        return (f"```python\n{line}\n\nmodel = {call}(\"{where}\")\n"
                "vectors = model.encode([\"a cat sat on the mat\"])\n```")
    out = f"{Path(table).name}-{'st' if target == 'st' else 'm2v'}"
    return (f"```bash\nswembed export {table} --format {target} --out {out}\n```\n\n```python\n{line}\n\n"
            f"model = {call}(\"{out}\")  # a {load} over the same table\nvectors = model.encode([\"a cat sat on "
            "the mat\"])\n```\nThe export matches swembed's vectors on texts whose words are all known; unknown "
            "words are split greedily over the vocabulary (docs/export.md).")


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.1f} kB"


def summary(name: str, fmt: str, config: dict, table: dict, teachers: list[dict]) -> str:
    """The title, one paragraph and the table of what the table is."""
    teacher = teachers[0]
    link = (f"[{teacher['hub_id']}](https://huggingface.co/{teacher['hub_id']})" if "/" in teacher["hub_id"]
            else "an unrecorded teacher" if teacher["hub_id"] == UNKNOWN else teacher["hub_id"])
    shipped = {"swembed": "the swe-static table folder (config.json, vocab.txt, embeddings.npy, tokenizer.json)",
               "st": "a sentence-transformers StaticEmbedding export of it",
               "model2vec": "a model2vec export of it"}[fmt]
    rows = [("teacher", link + "".join(f" + {t['hub_id']} (co-teacher)" for t in teachers[1:])),
            ("dimension", str(table["dim"])),
            ("vocabulary", f"{table['words']:,} words" + (f", {table['pieces']:,} sub-word pieces" if table["pieces"]
                                                           else "") + (f", {table['grams']:,} character-gram rows"
                                                                       if table["grams"] else "")),
            ("storage", table["storage"]), ("languages", ", ".join(table["languages"])),
            ("size on disk", _megabytes(table["bytes"])),
            ("made by", f"swembed {config.get('swembed_version', '')}".strip() +
             (f", {config['created']}" if config.get("created") else ""))]
    return (f"# {name}\n\nA static word-embedding table made by swembed, distilled from {link}: "
            "encoding a text is a lookup of its words (unknown words back off to sub-word pieces and character "
            "n-grams) and a weighted mean, L2-normalised. No transformer runs at inference time. This repo holds "
            f"{shipped}.\n\n| | |\n|---|---|\n" + "".join(f"| {key} | {value} |\n" for key, value in rows))


def build_section(config: dict, sources: list[dict]) -> str:
    """How the table was built: the recipe's main settings and the whole build config."""
    build = (config.get("build") or {}).get("config") or {}
    if not build:
        return "## How it was built\n\nThis table's config.json records no build (it was not made by swembed build).\n"
    pca, distill = build.get("pca") or {}, build.get("distill") or {}
    lines = [f"- recipe: `{build.get('name') or 'flags'}`, teacher `{build.get('teacher')}`, seed {build.get('seed')}",
             f"- sentence-level PCA to d={pca.get('dim')}, top {config.get('abtt_dropped', pca.get('drop'))} "
             "directions dropped (ABTT); "
             f"knowledge distillation for at most {distill.get('max_steps')} steps",
             f"- data: {len(sources)} file(s) or source(s) (listed under Licence)"]
    whole = json.dumps(build, indent=1, ensure_ascii=False)
    return ("## How it was built\n\nWada et al. 2025: the teacher's contextual word vectors, sentence-level PCA "
            "with ABTT, then distillation towards the teacher's sentence vectors.\n\n" + "\n".join(lines) +
            f"\n\n<details><summary>the build config (config.json: build.config)</summary>\n\n```json\n{whole}\n```"
            "\n\n</details>\n")


def scores_section(results: list[dict]) -> str:
    """Every score of the eval files, as a table."""
    if not results:
        return ("## Scores\n\nNo scores were given; `swembed eval TABLE --data DIR --json scores.json` and "
                "`swembed card TABLE --eval scores.json` add them.\n")
    rows = "".join(f"| {r['suite']} ({r['split']}) | {name} | {value:.2f} |\n"
                   for r in results for name, value in r["scores"].items())
    return ("## Scores\n\nFrom `swembed eval` (`--json`): Spearman x100 of cosine for STS, accuracy or nDCG@10 x100 "
            "for the MTEB tasks.\n\n| suite (split) | set | score |\n|---|---|---|\n" + rows)


def licence_section(teachers: list[dict], sources: list[dict]) -> str:
    """Each teacher's and each data source's licence."""
    fields = licence_fields(teachers, sources)
    head = (f"Licence: **{fields['license']}**." if fields["license"] != "other" else
            "Licence: **other**: a table distilled from a teacher and data inherits their terms, which differ: "
            + "; ".join(dict.fromkeys(f"{t['licence']}" for t in [*teachers, *sources])) + ".")
    rows = [f"| teacher | {t['hub_id']} | {t['licence']} |" for t in teachers]
    rows += [f"| data | {s['source']} | {s['licence']}" + ("" if s["upstream"] == s["source"] else
                                                            f" ({s['upstream']})") + " |" for s in sources]
    table = "| what | source | licence |\n|---|---|---|\n" + "\n".join(rows)
    if len(rows) > 12:
        table = f"<details><summary>{len(rows)} teachers and sources</summary>\n\n{table}\n\n</details>"
    return f"## Licence\n\n{head}\n\n{table}\n"


def model_card(table: Path, *, files: Path, name: str, fmt: str = "swembed", repo_id: str | None = None,
               eval_files: Sequence[Path] = (), licences: LicenceLookup | None = None) -> str:
    """The README.md card of the table folder ``table`` (see ``swembed.runtime.hub.model_card``)."""
    from swembed._extras import require

    require("hub", "huggingface_hub")
    if fmt not in FORMATS:
        raise ValueError(f"a card's format is one of {FORMATS}, got {fmt!r}")
    config = read_config(Path(table))
    results = read_scores(eval_files)
    teachers = teacher_entries(config)
    sources = corpus_licences(data_sources((config.get("build") or {}).get("config") or {}), licences)
    described = facts(config, files)
    front = front_matter(name, fmt, teachers, sources, described["languages"], results)
    body = [summary(name, fmt, config, described, teachers), "## Usage\n\n" + usage(fmt, name, repo_id, table.name),
            build_section(config, sources), scores_section(results), licence_section(teachers, sources),
            f"## Citation\n\nThe method:\n\n```bibtex\n{CITATION}\n```\n"]
    return f"---\n{front.rstrip()}\n---\n\n" + "\n".join(part.rstrip("\n") + "\n" for part in body)
