"""The `swembed` command: thin wrappers that parse flags, call the library and print."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import traceback
from pathlib import Path

from swembed._version import __version__
from swembed.pipeline.config import build_flags, older_flags
from swembed.runtime.windows import WIDTH

EXIT_BUG = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

# `swembed build` flags: (flag, where in BuildConfig, argparse options), read from the settings' declarations
# (`swembed.pipeline.config`: `setting(..., flag=...)`). One table serves every build, one language or several, so
# every flag works on every path (or BuildConfig.validate rejects it there). Help texts name no default:
# `_add_build` appends BuildConfig's own (`flag_default`).
BUILD_FLAGS = build_flags()
# what leaving out a setting whose default is None means, where no range says it (RANGES' unset texts do)
UNSET = {"work_dir": "<out>.work"}
OLDER_FLAGS = older_flags()  # earlier flag names, still accepted with a one-line warning (declared `older_flags`)


class _OlderFlag(argparse.Action):
    """An older name of a flag: sets the same setting and says, in one line on stderr, which name to write."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"swembed build: warning: {option_string} is an older name; write {OLDER_FLAGS[option_string]}",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def flag_default(dest: str) -> str:
    """BuildConfig's default of the setting at ``dest``, as help shows it ("" for an on/off flag)."""
    from swembed.pipeline.config import RANGES, BuildConfig

    value = BuildConfig().get(dest)
    if isinstance(value, bool):
        return ""
    if value is None:
        return UNSET.get(dest) or RANGES[dest].unset
    if isinstance(value, list):
        return " ".join(map(str, value)) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _add_build(sub) -> None:
    p = sub.add_parser("build", help="distil a static word table from a sentence-embedding teacher")
    p.add_argument("--recipe", metavar="FILE", help="a TOML recipe (see pipelines/); flags given here override it")
    p.add_argument("--langs", metavar="LANGS", help="comma-separated languages, e.g. en,de (then --corpus "
                   f"LANG=PATH ...) (default {flag_default('langs')})")
    p.add_argument("--corpus", nargs="+", metavar="PATH", help="files, folders, globs, hf:<dataset>[:config][:split] "
                   f"or builtin:wikitext2; with --langs: LANG=PATH (default {flag_default('corpus.sources')})")
    for flag, dest, options in BUILD_FLAGS:
        default = flag_default(dest)
        metavar = {int: "N", float: "X"}.get(options.get("type", str))
        extra = {"metavar": metavar} if metavar and "metavar" not in options else {}
        help_text = options["help"] + (f" (default {default})" if default else "")
        p.add_argument(flag, dest=dest.replace(".", "__"), **{**options, **extra, "help": help_text})
    for older, flag in OLDER_FLAGS.items():
        dest, options = next((dest, options) for name, dest, options in BUILD_FLAGS if name == flag)
        p.add_argument(older, dest=dest.replace(".", "__"), type=options.get("type"), action=_OlderFlag,
                       help=argparse.SUPPRESS)
    p.add_argument("--force", action="store_true", help="recompute every stage")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--data-mirror", metavar="DIR", help="a local copy of the public datasets that hf://datasets/ "
                   "sources name (one folder a dataset: DIR/corpora, DIR/eval); default: $SWEMBED_DATA_MIRROR, "
                   "else the Hugging Face Hub")


def _use_data_mirror(args) -> None:
    """``--data-mirror DIR``: where hf://datasets/ sources resolve, for this run (SWEMBED_DATA_MIRROR)."""
    from swembed.pipeline.public_data import MIRROR_ENV

    if getattr(args, "data_mirror", None):
        os.environ[MIRROR_ENV] = args.data_mirror


def flag_settings(args, config) -> dict:
    """The build flags given, as recipe-shaped settings on top of ``config`` (the recipe's): ``--langs`` and
    ``--corpus`` (``LANG=PATH`` with several languages, added to the recipe's corpora), then every BUILD_FLAGS flag."""
    from swembed.pipeline.config import BuildError

    settings: dict = {}
    langs = [lang.strip() for lang in args.langs.split(",") if lang.strip()] if args.langs else config.langs
    if args.langs:
        settings["langs"] = langs
    if args.corpus and len(langs) > 1:
        corpora: dict[str, list[str]] = {}
        for item in args.corpus:
            lang, sep, path = item.partition("=")
            if not sep or lang not in langs:
                raise BuildError(f"with --langs {','.join(langs)} give corpora as LANG=PATH, got {item!r}")
            corpora.setdefault(lang, []).append(path)
        settings["corpora"] = {**config.corpora, **corpora}
    elif args.corpus:
        settings["corpus"] = {"sources": list(args.corpus)}
    for _, dest, _ in BUILD_FLAGS:
        value = getattr(args, dest.replace(".", "__"))
        if value is not None:
            section, _, name = dest.rpartition(".")
            (settings.setdefault(section, {}) if section else settings)[name] = value
    return settings


def build_config(args):
    """The BuildConfig of a recipe (if any) with the flags given on top (``make_build_config``: validated once; a
    value out of its range is refused naming its flag)."""
    from swembed.pipeline.config import BuildConfig, OptionError, load_recipe, make_build_config

    recipe = load_recipe(args.recipe) if args.recipe is not None else BuildConfig()
    try:
        return make_build_config(recipe, flag_settings(args, recipe))
    except OptionError as exc:
        flag = next((flag for flag, dest, _ in BUILD_FLAGS if dest == exc.key), None)
        raise exc.named(flag) if flag and not exc.source else exc from None


def cmd_build(args) -> int:
    _use_data_mirror(args)
    config = build_config(args)
    config.check_inputs(args.overwrite)  # bad input fails before torch is imported
    from swembed.pipeline.build import build

    report = build(config, force=args.force, quiet=args.quiet, overwrite=args.overwrite, checked=True)
    stages = report["build"]["stages"]
    print(f"\nmodel written to {config.out}  (dim {report['dim']}, teacher {report['teacher']['name']}, "
          f"languages {', '.join(config.langs)})")
    print(f"{'stage':<16}{'wall s':>10}{'peak MB':>10}  note")
    for name, info in stages.items():
        note = "cached" if info.get("cached") else ""
        print(f"{name:<16}{info.get('wall_s') or 0:>10.1f}{info.get('peak_rss_mb') or 0:>10.0f}  {note}")
    print(f"{'total':<16}{report['build']['total_wall_s']:>10.1f}")
    device = report["build"]["device"]
    if device.get("utilisation_pct"):
        phases = ", ".join(f"{phase} {pct:.0f}%" for phase, pct in device["utilisation_pct"].items())
        print(f"{device['name']} utilisation (time a kernel ran): {phases}; peak {device['peak_allocated_mb']:,} MB")
    return 0


def cmd_encode(args) -> int:
    from swembed.runtime.textfile import encode_file

    summary = encode_file(args.model, args.input, args.output, args.errors, args.overwrite, args.text_column,
                          args.encoding, args.kind)
    print(summary, file=sys.stderr)
    return 0


def cmd_search(args) -> int:
    from swembed.runtime.searchfile import hit_lines, search_files

    index, queries, hits = search_files(args.model, args.query, args.queries, args.corpus, args.index,
                                        args.text_column, args.top_k, args.mode, args.alpha, args.windows)
    for line in hit_lines(index, queries, hits, args.json):
        print(line)
    return 0


def cmd_index(args) -> int:
    from swembed.runtime.searchfile import index_file

    summary = index_file(args.model, args.corpus, args.out, args.text_column, args.dtype, not args.no_texts,
                         args.overwrite, not args.dense_only, args.windows)
    print(summary, file=sys.stderr)
    return 0


def cmd_ensemble(args) -> int:
    from swembed.integrations.ensemble import build_ensemble, parse_weights

    weights = parse_weights(args.weights) if args.weights is not None else None
    out = build_ensemble(args.members, args.out, weights, overwrite=args.overwrite)
    print(f"ensemble of {len(args.members)} members -> {out}", file=sys.stderr)
    return 0


def cmd_dedup(args) -> int:
    from swembed.dedup import DedupConfig, dedup

    config = DedupConfig(threshold=args.threshold, text_columns=tuple(args.text_column or ["text"]), keep=args.keep,
                         target_size=args.target_size, target_fraction=args.target_fraction, k=args.k,
                         method=args.search, batch_size=args.batch_size, progress=not args.quiet,
                         clusters=args.clusters, pairs_floor=args.pairs_floor, encoding=args.encoding,
                         errors=args.errors)
    if args.engine == "spark":
        from swembed._extras import require

        require("dedup", "faiss", "scipy")  # the cells' k-means and each task's search
        require("spark", "pyspark", "pandas", "pyarrow")
        from swembed.dedup.spark.files import dedup_files

        bad = [item for item in args.spark_conf if "=" not in item]
        if bad:
            raise ValueError(f"--spark-conf takes KEY=VALUE, got {bad[0]!r}")
        conf = dict(item.split("=", 1) for item in args.spark_conf)
        summary = dedup_files(args.inputs, args.model, args.out, config, master=args.spark_master, conf=conf,
                              overwrite=args.overwrite, against=args.against)
    else:
        summary = dedup(args.inputs, args.model, args.out, config, overwrite=args.overwrite, against=args.against)
    _print_dedup_summary(summary, args.out)
    return 0


def _print_dedup_summary(summary: dict, out: str) -> None:
    bad = sum(summary.get("undecodable_lines", {}).values())
    note = f"\n{bad:,} lines did not decode: read with U+FFFD (--errors replace; by file in summary.json)" * bool(bad)
    print(f"{summary['records']:,} records: kept {summary['kept']:,}, exact duplicates "
          f"{summary['exact_duplicates']:,}, near duplicates {summary['near_duplicates']:,}, near a reference "
          f"{summary.get('reference_duplicates', 0):,} -> {out}/\n{summary['guarantee']}{note}", file=sys.stderr)


def cmd_dedup_rethreshold(args) -> int:
    from swembed.dedup.state import rethreshold

    _print_dedup_summary(rethreshold(args.run, args.threshold, args.out, args.overwrite, not args.quiet), args.out)
    return 0


def cmd_dedup_explain(args) -> int:
    from swembed.dedup.explain import explain

    print(explain(args.run, args.out, args.pairs, args.overwrite))
    return 0


def cmd_dedup_select(args) -> int:
    from swembed.dedup.select import select

    print(select(args.run, args.out, args.outliers, args.representatives, args.k, args.overwrite))
    return 0


def cmd_lens_clusters(args) -> int:
    from swembed._extras import require

    require("llm", "torch", "transformers", "sklearn")
    from swembed.teachers.lens_clusters import example_clusters, vocab_clusters

    summary = vocab_clusters(args.model, args.k, Path(args.out), args.seed, overwrite=args.overwrite)
    print(f"{summary['rows']:,} rows of {args.model}'s {summary['matrix']} -> {args.k} clusters -> {args.out} "
          f"(centroids: {summary['centroids']})")
    for members in example_clusters(summary):
        print("  {" + ", ".join(members) + "}")
    return 0


def cmd_eval(args) -> int:
    from swembed.eval.suites import data_dir, evaluate, suite_data
    from swembed.pipeline.public_data import is_public, local_folder
    from swembed.runtime.outputs import atomic_file, check_writable

    if args.data and is_public(args.data):  # hf://datasets/swembed/eval: the mirror's or the Hub cache's folder
        args.data = local_folder(args.data)
    read = [path for path in (args.model, args.data, args.bucc) if path]
    if args.json:
        check_writable(Path(args.json), args.overwrite, read, folder=False)  # before any scoring
    kind, scores = evaluate(args.model, args.suite, data_dir(args.data, suite_data(args.suite)), device=args.device,
                            bucc=Path(args.bucc) if args.bucc else None, give_lang=args.give_lang,
                            tasks=args.tasks.split(",") if args.tasks else None, split=args.split,
                            search=args.search, alpha=args.alpha, windows=args.windows)
    print(f"{args.model} ({kind})")
    for name, value in scores.items():
        print(f"  {name:<34}{value:7.2f}")
    if args.json:
        with atomic_file(Path(args.json), args.overwrite, read) as tmp:
            ranked = {"search": args.search, "alpha": args.alpha, "windows": args.windows} if args.search else {}
            tmp.write_text(json.dumps({"model": args.model, "kind": kind, "suite": args.suite, "split": args.split,
                                       **ranked, "scores": scores}, indent=2))
    return 0


def cmd_push(args) -> int:
    from swembed.runtime.hub import push_table

    folder = _model_folder(args.model)
    url = push_table(folder, args.repo, private=args.private, revision=args.revision,
                     commit_message=args.commit_message, token=args.token, eval_files=args.eval or ())
    print(f"{args.model} -> {args.repo} ({url})")
    return 0


def cmd_card(args) -> int:
    from swembed.runtime.hub import model_card
    from swembed.runtime.outputs import atomic_file

    folder = _model_folder(args.model)
    card = model_card(folder, repo_id=args.repo, eval_files=args.eval or ())
    with atomic_file(Path(args.out), args.overwrite, [folder, *(args.eval or [])]) as tmp:
        tmp.write_text(card, encoding="utf-8")
    print(f"the model card of {args.model} -> {args.out}")
    return 0


def _model_folder(model: str) -> Path:
    """A MODEL argument's local folder: the folder itself, or a Hub repo id's download (swembed.runtime.hub)."""
    from swembed.runtime.hub import local_or_hub

    return local_or_hub(model)


def cmd_export(args) -> int:
    from swembed.integrations.agreement import read_agreement
    from swembed.integrations.formats import export, kinds_left_out

    out = export(args.model, args.format, args.out, args.dtype, overwrite=args.overwrite)
    print(f"{args.model} -> {out} ({args.format}, {args.dtype})")
    note = kinds_left_out(args.model, args.format)
    if note:
        print(note)
    agreement = read_agreement(out) if args.format != "npy" else None
    if agreement is not None:  # st, model2vec: what the format cannot express, measured (docs/export.md)
        print(agreement.line(f"{out} ({args.format})"))
    return 0


def cmd_shrink(args) -> int:
    from dataclasses import replace

    from swembed.pipeline.shrink_table import ShrinkConfig, load_shrink_recipe, shrink

    recipe = load_shrink_recipe(args.recipe) if args.recipe is not None else None
    config = recipe.config if recipe else ShrinkConfig()
    names = ("words", "pieces", "dim", "gram_buckets", "gram_target", "oov_weight", "storage", "centroids", "seed")
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    config = replace(config, **given)
    source = args.model or (recipe.source if recipe else None)
    out = args.out or (recipe.out if recipe else None)
    if not source or not out:
        raise ValueError("shrink needs a MODEL and --out (or a --recipe that names source and out)")
    kept = shrink(source, out, config, overwrite=args.overwrite)
    print(f"{source} -> {out}: {kept['words']:,} words, {kept['pieces']:,} pieces, {kept['gram_buckets']:,} gram "
          f"rows, dim {kept['dim']}, {kept['storage']}; {kept['bytes'] / 1e6:.2f} MB")
    return 0


def cmd_conformance(args) -> int:
    from swembed.integrations.conformance import write_conformance

    record = write_conformance(args.model, args.out, args.texts, overwrite=args.overwrite)
    print(f"{len(record['texts'])} texts and their vectors from {args.model} -> {args.out}")
    return 0


def cmd_serve(args) -> int:
    from dataclasses import fields

    from swembed.integrations.serve import ServeLimits, make_server, serve_until_stopped

    limits = ServeLimits(**{field.name: getattr(args, field.name) for field in fields(ServeLimits)})
    server = make_server(args.model, args.host, args.port, args.model_name, limits, args.index)
    search = (f" and {server.url}/v1/search ({len(server.index):,} passages)" if server.index is not None else "")
    print(f"swembed serve: {server.served.name} (dim {server.served.dim}) on {server.url}/v1/embeddings{search}; "
          "Ctrl-C or SIGTERM stops it", file=sys.stderr)
    stopped = serve_until_stopped(server)
    print(f"swembed serve: stopped ({stopped}); requests under way were answered", file=sys.stderr)
    return 0


def cmd_data(args) -> int:
    """``swembed data sources``: each public source a recipe names, resolved (downloaded or found in the mirror, and
    checked), with its licence; ``swembed data splits``: the recipe's [splits] made."""
    from swembed.pipeline.config import load_recipe
    from swembed.pipeline.public_data import is_public, source_licences
    from swembed.pipeline.sources import expand_sources

    _use_data_mirror(args)
    config = load_recipe(args.recipe)
    if args.action == "splits":
        if not config.splits.out:
            raise ValueError(f"{args.recipe}: no [splits] out: the recipe makes no splits")
        from swembed.pipeline.splits import make_splits

        for name, lines in make_splits(config.splits).items():
            print(f"{Path(config.splits.out) / name}: {lines:,} lines")
        return 0
    made = Path(config.splits.out).resolve() if config.splits.out else None
    for where, specs in config.data_sources().items():
        for spec in specs:
            if made is not None and not is_public(spec) and made in Path(spec).resolve().parents:
                print(f"{where}: {spec} (made by [splits])")
                continue
            files = expand_sources([spec])
            licences = sorted({entry["licence"] for entry in source_licences([spec])}) if is_public(spec) else []
            print(f"{where}: {spec} -> {len(files)} file{'s' * (len(files) != 1)}"
                  + (f" ({'; '.join(licences)})" if licences else ""))
    return 0


def _add_data(sub) -> None:
    p = sub.add_parser("data", help="the public data a recipe reads: resolve and check its sources (sources), or "
                       "make its [splits] (splits)")
    p.add_argument("action", choices=["sources", "splits"])
    p.add_argument("--recipe", required=True, metavar="FILE", help="a TOML recipe (see pipelines/)")
    p.add_argument("--data-mirror", metavar="DIR", help="a local copy of the public datasets (default: "
                   "$SWEMBED_DATA_MIRROR, else the Hugging Face Hub)")


def _dedup_run_command(sub, name: str, help_text: str, out_help: str) -> argparse.ArgumentParser:
    """A sub-command that reads a finished ``swembed dedup`` run and writes a new folder."""
    p = sub.add_parser(name, help=help_text)
    p.add_argument("run", help="a swembed dedup --out folder")
    p.add_argument("--out", required=True, help=out_help)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    return p


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swembed", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--version", action="version", version=f"swembed {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_build(sub)
    _add_model_commands(sub)
    _add_dedup_commands(sub)
    _add_lens_clusters_and_eval(sub)
    _add_data(sub)
    _add_serve(sub)
    _add_search(sub)
    _add_hub(sub)
    return parser


def _add_hub(sub) -> None:
    """``swembed push`` (a table to the Hugging Face Hub, with its card) and ``swembed card`` (the card alone)."""
    p = sub.add_parser("push", help="upload a table to the Hugging Face Hub with a generated README.md card")
    p.add_argument("model", help="a swembed model folder (or a Hub repo id)")
    p.add_argument("repo", help="the Hub repo to write, org/name (created if missing)")
    p.add_argument("--private", action="store_true", help="create the repo private")
    p.add_argument("--revision", metavar="BRANCH", help="the branch to commit to (created from main if missing)")
    p.add_argument("--commit-message", metavar="M")
    p.add_argument("--token", metavar="T", help="a Hub token with write access (default: HF_TOKEN or the login)")
    p.add_argument("--eval", nargs="+", metavar="FILE", help="swembed eval --json results of this table: its scores")
    p = sub.add_parser("card", help="write the README.md model card that swembed push would upload")
    p.add_argument("model", help="a swembed model folder (or a Hub repo id)")
    p.add_argument("--eval", nargs="+", metavar="FILE", help="swembed eval --json results of this table: its scores")
    p.add_argument("--repo", metavar="ORG/NAME", help="the Hub repo it will be pushed to (for the usage snippets)")
    p.add_argument("--out", required=True, help="the file to write, e.g. README.md")
    p.add_argument("--overwrite", action="store_true")


def _add_model_commands(sub) -> None:
    """The sub-commands that use or make a built table: encode, export, shrink, conformance, ensemble."""
    p = sub.add_parser("encode", help="encode lines of text into an .npy matrix")
    p.add_argument("model")
    p.add_argument("--input", required=True, help="text file, one text per line ('-' for stdin), or .jsonl/.csv/"
                   ".parquet records (one text each: --text-column)")
    p.add_argument("--output", required=True, help=".npy file to write ('-': the .npy bytes to stdout)")
    p.add_argument("--text-column", metavar="COLUMN", help="the text field of .jsonl/.csv/.parquet records "
                   "(default text; a null is the empty text)")
    p.add_argument("--errors", choices=["replace", "skip", "strict"], default="replace",
                   help="lines that do not decode: decode with U+FFFD (default), leave out, or stop")
    p.add_argument("--encoding", metavar="NAME", help="of the input, e.g. latin-1 or cp1251 (default: UTF-8, or "
                   "what a byte-order mark says: UTF-8, UTF-16, UTF-32)")
    from swembed.runtime.embedder import ENCODE_KINDS

    p.add_argument("--kind", choices=list(ENCODE_KINDS), help="the texts are search queries or passages: a table "
                   "with that kind's row weights (kind_weights) applies them (default: neither)")
    p.add_argument("--overwrite", action="store_true")
    from swembed.integrations.formats import DTYPES, FORMATS

    p = sub.add_parser("export", help="write a model as npy (edge), st (sentence-transformers) or model2vec")
    p.add_argument("model")
    p.add_argument("--format", choices=list(FORMATS), default="npy",
                   help="; ".join(f"{f.name}: {f.description}" for f in FORMATS.values()))
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="; ".join(f"{f.name}: {', '.join(f.dtypes)}" for f in FORMATS.values()))
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")
    p = sub.add_parser("shrink", help="a smaller table from a built one: fewer words, pieces and gram rows, lower "
                       "dim, int8/int4/codebook rows (swembed.pipeline.shrink_table)")
    p.add_argument("model", nargs="?", help="the built model folder (default: the recipe's source)")
    p.add_argument("--recipe", help="a shrink recipe, pipelines/edge-*.toml (flags given override it)")
    p.add_argument("--out", help="model folder to write (default: the recipe's out)")
    p.add_argument("--words", type=int, help="keep the words seen in the most sentences")
    p.add_argument("--pieces", type=int, help="keep the piece rows the words' back-off uses most")
    p.add_argument("--dim", type=int, help="project onto the table's top principal directions")
    p.add_argument("--gram-buckets", type=int, help="refit that many gram rows to every source word (0: none)")
    p.add_argument("--gram-target", choices=["word", "residual"], help="fit the gram rows to each word's row "
                   "(default), or to what the back-off's gram half must add to its pieces' half")
    p.add_argument("--oov-weight", type=float, help="an unknown word's weight in the mean (default: the source's)")
    p.add_argument("--storage", choices=["float32", "float16", "int8", "int4", "codebook"])
    p.add_argument("--centroids", type=int, help="codebook storage: shared rows (default 4096)")
    p.add_argument("--seed", type=int)
    p.add_argument("--overwrite", action="store_true")
    p = sub.add_parser("conformance", help="texts and the Python runtime's vectors, to check another reader "
                       "(docs/format.md)")
    p.add_argument("model")
    p.add_argument("--out", required=True, help="the JSON file to write")
    p.add_argument("--texts", help="a text file of more texts to include (one per line)")
    p.add_argument("--overwrite", action="store_true")
    p = sub.add_parser("ensemble", help="concatenate tables over their union vocabulary (paper appendix D)")
    p.add_argument("members", nargs="+", help="swembed folders, wordllama, model2vec:<folder>")
    p.add_argument("--weights", help="comma-separated positive weights, one per member (default: equal)")
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true")


def _add_dedup_commands(sub) -> None:
    """``swembed dedup`` and the commands that read a finished run: dedup-rethreshold, dedup-explain, dedup-select."""
    from swembed.dedup.clusters import CLUSTERINGS
    from swembed.dedup.job import KEEPS, SEARCHES, TARGET_FLOOR, THRESHOLD, DedupConfig

    p = sub.add_parser("dedup", help="exact and near-duplicate mining over .txt/.jsonl/.parquet, every record mapped")
    p.add_argument("inputs", nargs="+")
    p.add_argument("--model", required=True, help="a swembed model folder")
    p.add_argument("--out", required=True, help="folder for kept/, mapping.tsv and summary.json")
    p.add_argument("--threshold", type=float, help=f"cosine for near duplicates (default {THRESHOLD}; with a "
                   f"target: the lowest similarity searched, default {TARGET_FLOOR})")
    p.add_argument("--text-column", action="append", metavar="COLUMN",
                   help="the text field of .jsonl/.parquet records (default text); repeat it to dedup on several "
                   "columns at once (their values joined by a newline); every column is kept in the output")
    p.add_argument("--against", nargs="+", metavar="REF", help="reference files (e.g. a test set): remove each input "
                   "record at cosine >= --threshold to a reference record, and nothing else; references are only read")
    p.add_argument("--keep", choices=KEEPS, default=DedupConfig.keep, help="which record a cluster keeps")
    p.add_argument("--clusters", choices=list(CLUSTERINGS), default=DedupConfig.clusters,
                   help="; ".join(f"{mode.name}{' (default)' * (mode.name == DedupConfig.clusters)}: {mode.help}"
                                  for mode in CLUSTERINGS.values()))
    p.add_argument("--target-size", type=int, help="star: the highest threshold keeping at most this many records; "
                   "components: merge the most similar first until this many remain")
    p.add_argument("--target-fraction", type=float, help="as --target-size, as a fraction of the records")
    p.add_argument("--pairs-floor", type=float, help="the lowest cosine of the pairs stored in state/ for "
                   "dedup-rethreshold and dedup-explain (default: the threshold - 0.1)")
    p.add_argument("--encoding", metavar="NAME", help="of the .txt/.jsonl inputs, e.g. latin-1 or cp1251 (default: "
                   "UTF-8, or what a byte-order mark says: UTF-8, UTF-16, UTF-32)")
    p.add_argument("--errors", choices=["strict", "replace"], default=DedupConfig.errors,
                   help="a line that does not decode: stop, naming it (default), or read it with U+FFFD (counted in "
                   "the summary; kept records keep their bytes)")
    p.add_argument("--k", type=int, default=DedupConfig.k, help="neighbours searched per distinct text")
    p.add_argument("--search", choices=SEARCHES, default=DedupConfig.method)
    p.add_argument("--batch-size", type=int, default=DedupConfig.batch_size)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--engine", choices=["local", "spark"], default="local",
                   help="spark: the same job on a Spark cluster (needs the spark extra; outputs are folders of "
                   "part files, no --target-*)")
    p.add_argument("--spark-master", default="local[*]", help="with --engine spark: the master URL")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="with --engine spark: a Spark setting, e.g. spark.driver.memory=2g (repeatable)")
    p = _dedup_run_command(sub, "dedup-rethreshold", "re-cut a finished swembed dedup run at another threshold, "
                           "from its state/ (no encoding or search): the same result as a fresh run",
                           "the new run folder")
    p.add_argument("--threshold", type=float, required=True, help="the new cosine (at least the run's pairs floor)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p = _dedup_run_command(sub, "dedup-explain", "look before you cut: the least similar pairs a run removed, a "
                           "threshold sweep and a histogram of nearest-neighbour similarities",
                           "folder for least-similar.tsv, sweep.tsv and similarities.png")
    p.add_argument("--pairs", type=int, default=20, help="how many of the least similar removed pairs to show")
    p = _dedup_run_command(sub, "dedup-select", "outliers (lowest mean cosine to their k nearest) and representatives "
                           "(greedy facility location) among a run's kept records",
                           "folder for outliers.tsv and representatives.tsv")
    p.add_argument("--outliers", type=int, default=0, help="how many outliers to list")
    p.add_argument("--representatives", type=int, default=0, help="how many representatives to choose")
    p.add_argument("--k", type=int, default=16, help="nearest neighbours per record")


def _add_lens_clusters_and_eval(sub) -> None:
    """``swembed lens-clusters`` (the LENS head) and ``swembed eval``."""
    p = sub.add_parser("lens-clusters", help="the LENS head: KMeans over a model's LM head (or token embeddings)")
    p.add_argument("--model", required=True, help="teacher short name, folder or hub id")
    p.add_argument("--k", type=int, default=4000)
    p.add_argument("--out", required=True, help="JSON of cluster -> tokens; centroids go beside it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file and its centroids")
    p = sub.add_parser("eval", help="STS (STS12-16, STS-B test, SICK-R), cross-lingual, robustness and MTEB suites")
    p.add_argument("model", help="a swembed model folder, model2vec:<folder>, wordllama, or a teacher")
    p.add_argument("--data", help="folder with sts12..sts16, stsb, sick, ... (default $SWEMBED_DATA/eval; "
                   "--suite mteb: the eval-mteb folder, default $SWEMBED_DATA/eval-mteb)")
    p.add_argument("--suite", choices=["en", "xling", "robust", "mteb", "all"], default="en",
                   help="all = en + xling + robust")
    p.add_argument("--tasks", help="with mteb: comma-separated MTEB task names (default: all five)")
    p.add_argument("--split", choices=["test", "dev"], default="test",
                   help="with mteb: test (MTEB's score) or dev (held-out train rows, for choosing settings)")
    p.add_argument("--search", choices=["dense", "lexical", "hybrid"],
                   help="with mteb and a swembed table: rank retrieval tasks by swembed's own search in this mode "
                   "(hybrid: cosine and BM25, docs/api.md); default: mteb's cosine of the encodings")
    p.add_argument("--alpha", type=float, help="with --search hybrid: the cosine's weight, 0 to 1 (default "
                   "swembed.runtime.lexical.ALPHA)")
    p.add_argument("--windows", type=int, nargs="?", const=WIDTH, metavar="WORDS", help="with --search: each long "
                   f"document's windows of WORDS words beside it (default {WIDTH} when given without a number; "
                   "swembed.runtime.windows)")
    p.add_argument("--bucc", help="with xling: a folder of BUCC '<xx>-en.<split>.{xx,en,gold}' files to mine")
    p.add_argument("--give-lang", action="store_true", help="name each text's language (default: as users do, "
                   "no language given)")
    p.add_argument("--json", help="also write the scores here")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    p.add_argument("--device", default="auto")


def _add_serve(sub) -> None:
    """``swembed serve``: the OpenAI-compatible embedding server; each limit's flag from ServeLimits."""
    from dataclasses import fields

    from swembed.integrations.serve.protocol import LIMIT_HELP, ServeLimits, flag_of

    p = sub.add_parser("serve", help="an OpenAI-compatible embedding server (POST /v1/embeddings) over a table")
    p.add_argument("model", help="a swembed model folder")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: every "
                   "interface)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000; 0: a free one)")
    p.add_argument("--model-name", help="the name clients give as model (default: the folder's name)")
    p.add_argument("--index", metavar="DIR", help="a search index folder made with this table (swembed index): "
                   "POST /v1/search ranks its passages by cosine, BM25 or both")
    for field in fields(ServeLimits):
        integer = field.type == "int"
        p.add_argument(flag_of(field.name), dest=field.name, type=int if integer else float, default=field.default,
                       metavar="N" if integer else "X",
                       help=f"{LIMIT_HELP[field.name]} (default {field.default if integer else f'{field.default:g}'})")


def _add_search(sub) -> None:
    """``swembed search`` (rank passages for queries) and ``swembed index`` (save a corpus's index for it)."""
    corpus_help = ("passages: a text file (one a line; .gz/.bz2/.xz read decompressed) or .jsonl/.csv/.parquet "
                   "records (--text-column); each passage's id is its line (a parquet file: its row)")
    column_help = "the text field of .jsonl/.csv/.parquet records (default text; a null is the empty text)"
    windows_help = (f"also read each passage of more than WORDS words as windows of WORDS words (default {WIDTH} "
                    "when given without a number): its dense score adds its best window's cosine; more vectors, "
                    "better dense ranking of long passages (swembed.runtime.windows)")
    p = sub.add_parser("search", help="the passages of a corpus (or a saved index) nearest each query, by cosine, "
                       "BM25 or both")
    p.add_argument("model", help="a swembed model folder")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--corpus", metavar="FILE", help=corpus_help)
    where.add_argument("--index", metavar="DIR", help="a folder written by swembed index (with this model)")
    p.add_argument("--text-column", metavar="COLUMN", help=column_help)
    asked = p.add_mutually_exclusive_group(required=True)
    asked.add_argument("--query", nargs="+", metavar="TEXT", help="one or more queries")
    asked.add_argument("--queries", metavar="FILE", help="a text file of queries, one a line")
    p.add_argument("--top-k", type=int, default=10, help="hits per query (default 10; all passages when fewer)")
    p.add_argument("--json", action="store_true", help="one JSON object per query: its hits' rank, score, id, "
                   "row and whole text (hybrid, lexical: and its cosine and BM25 score)")
    p.add_argument("--mode", choices=["dense", "lexical", "hybrid"], default="dense",
                   help="rank by cosine (default), by BM25 over the table's words, or by both (per query, each "
                   "z-normalised, alpha * cosine + (1 - alpha) * BM25); hybrid and lexical hits show their cosine too")
    p.add_argument("--alpha", type=float, help="with --mode hybrid: the cosine's weight, 0 to 1 (default "
                   "swembed.runtime.lexical.ALPHA)")
    p.add_argument("--windows", type=int, nargs="?", const=WIDTH, metavar="WORDS", help=windows_help)
    p = sub.add_parser("index", help="a corpus's sentence vectors, BM25 postings, ids and texts in a folder, for "
                       "swembed search --index")
    p.add_argument("model", help="a swembed model folder")
    p.add_argument("--corpus", required=True, metavar="FILE", help=corpus_help)
    p.add_argument("--text-column", metavar="COLUMN", help=column_help)
    p.add_argument("--out", required=True, metavar="DIR", help="the index folder to write")
    p.add_argument("--dtype", choices=["float32", "int8"], default="float32",
                   help="int8: a quarter of the vectors' bytes, scores within about 0.01")
    p.add_argument("--no-texts", action="store_true", help="leave the passages' texts out (hits show ids only)")
    p.add_argument("--dense-only", action="store_true", help="leave the BM25 postings out (the index then "
                   "searches with --mode dense only)")
    p.add_argument("--windows", type=int, nargs="?", const=WIDTH, metavar="WORDS", help=windows_help)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Each `swembed` sub-command's parser, by name (for docs/cli.md and the checks that commands named exist)."""
    parser = _parser()
    return dict(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)


def main(argv: list[str] | None = None) -> int:
    from swembed._extras import MissingExtraError
    from swembed.runtime.outputs import terminate_raises

    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    args = _parser().parse_args(argv)
    args.command_line = "swembed " + " ".join(argv)  # for the traceback file of an internal error
    level = logging.DEBUG if args.verbose else logging.WARNING if getattr(args, "quiet", False) else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for client in ("httpx", "httpx2"):  # the Hub client's every request (swembed.runtime.hub): only with -v
        logging.getLogger(client).setLevel(max(level, logging.WARNING))
    handlers = {"build": cmd_build, "encode": cmd_encode, "export": cmd_export, "conformance": cmd_conformance,
                "ensemble": cmd_ensemble, "dedup": cmd_dedup, "data": cmd_data,
                "dedup-rethreshold": cmd_dedup_rethreshold, "dedup-explain": cmd_dedup_explain,
                "dedup-select": cmd_dedup_select, "shrink": cmd_shrink, "lens-clusters": cmd_lens_clusters,
                "eval": cmd_eval, "serve": cmd_serve, "search": cmd_search, "index": cmd_index, "push": cmd_push,
                "card": cmd_card}
    try:
        with terminate_raises():  # SIGTERM unwinds like Ctrl-C: temp outputs are removed on the way out
            if args.command == "build":
                from swembed._extras import require

                require("build", "torch", "transformers", "blingfire", "tqdm")
            return handlers[args.command](args)
    except (ValueError, MissingExtraError, OSError) as exc:  # bad input, a missing extra, a file problem
        print(f"swembed {args.command}: error: {str(exc).replace(chr(10), ' ') or type(exc).__name__}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"swembed {args.command}: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the boundary: anything else is a bug, reported in one line
        print(f"swembed {args.command}: internal error (a bug in swembed, please report it): {type(exc).__name__}: "
              f"{str(exc).replace(chr(10), ' ')[:300]}; traceback written to {_write_traceback(args.command_line)}",
              file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return EXIT_BUG


def _write_traceback(command_line: str) -> str:
    """The current exception's traceback in a new file of the temp folder; returns its path."""
    fd, path = tempfile.mkstemp(prefix="swembed-traceback-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(command_line + "\n\n" + traceback.format_exc())
    return path


if __name__ == "__main__":
    sys.exit(main())
