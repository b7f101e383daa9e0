"""The `swembed` command: thin wrappers that parse flags, call the library and print."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


def _add_build(sub) -> None:
    p = sub.add_parser("build", help="distil a static word table from a sentence-embedding teacher")
    p.add_argument("--recipe", help="a TOML recipe (see pipelines/); flags given here override it")
    p.add_argument("--teacher", help="short name (minilm, mpnet, gte-base, bge-base, nomic, ...), folder or hub id")
    p.add_argument("--dim", type=int, help="output dimension d' (default 256)")
    p.add_argument("--out", help="model folder to write (default models/minilm-256)")
    p.add_argument("--corpus", nargs="+", help="files, folders, globs, hf:<dataset>[:config][:split] or "
                   "builtin:wikitext2 (the default)")
    p.add_argument("--text-column", help="text field of .jsonl/.parquet/hf: corpora (default text)")
    p.add_argument("--min-words", type=int, help="shortest sentence kept, in words (default 3)")
    p.add_argument("--max-words", type=int, help="longest sentence kept, in words (default 40)")
    p.add_argument("--max-sentences", type=int, help="stop reading the corpus after this many sentences")
    p.add_argument("--vocab-size", type=int, help="vocabulary cap (default 150000)")
    p.add_argument("--min-count", type=int, help="keep words seen at least this often (default 1)")
    p.add_argument("--no-teacher-words", action="store_true", help="do not add the teacher's whole-word tokens")
    p.add_argument("--sentences-per-word", type=int, help="contexts per word N (default 30)")
    p.add_argument("--batch-size", type=int, help="teacher batch size (default 64)")
    p.add_argument("--pca-sentences", type=int, help="sentences M for the sentence-level PCA (default 100000)")
    p.add_argument("--abtt-drop", type=int, help="top components dropped (default floor(teacher_dim/100))")
    p.add_argument("--pca-level", choices=["sentence", "word", "none"],
                   help="fit PCA on sentences (default) or words; none keeps the extracted table (ablation)")
    p.add_argument("--no-distill", action="store_true", help="stop after PCA")
    p.add_argument("--lexicon-top-k", type=int, help="keep each word's k largest dims (lexicon tables from a LENS "
                   "teacher built with --pca-level none)")
    p.add_argument("--distill-steps", type=int,
                   help="maximum distillation steps (default 100000; early stopping decides)")
    p.add_argument("--eval-every", type=int, help="distillation steps between validation rounds (default 250)")
    p.add_argument("--unit-sentences", type=int, help="extract checkpoint unit, in sentences (default 8192)")
    p.add_argument("--checkpoint-seconds", type=float, help="least time between distill checkpoints (default 60)")
    p.add_argument("--dtype", choices=["float32", "float16"], help="table dtype (default float32)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="where the teacher runs (default auto)")
    p.add_argument("--work-dir", help="stage cache (default <out>.work)")
    p.add_argument("--seed", type=int, help="seed for every sampling step (default 0)")
    p.add_argument("--force", action="store_true", help="recompute every stage")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    g = p.add_argument_group("bilingual / multilingual tables (--langs)")
    g.add_argument("--langs", help="comma-separated languages, e.g. en,de (corpora given as --corpus LANG=PATH)")
    g.add_argument("--parallel", nargs="+", help="english<TAB>other pair files (.tsv/.tsv.gz) for the contrastive "
                   "refinement of the first two languages")
    g.add_argument("--exclude", nargs="+", help="text files whose lines never enter training pairs (e.g. eval sets)")
    g.add_argument("--no-contrastive", action="store_true", help="stop after the cross-lingual PCA")


def _is_multilingual(args) -> bool:
    if args.langs:
        return True
    if args.recipe:
        import tomllib

        return "langs" in tomllib.loads(Path(args.recipe).read_text())
    return False


def _multilingual_config(args):
    from swembed.pipeline.multilingual import MultilingualConfig, load_multilingual_recipe

    config = load_multilingual_recipe(args.recipe) if args.recipe else MultilingualConfig()
    if args.langs:
        config.langs = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
    if args.corpus:
        for item in args.corpus:
            lang, sep, path = item.partition("=")
            if not sep:
                raise ValueError(f"with --langs give corpora as LANG=PATH, got {item!r}")
            config.corpora.setdefault(lang, [])
            config.corpora[lang] = [*config.corpora[lang], path] if args.recipe is None else [path]
    for key, value in {"teacher": args.teacher, "out": args.out, "work_dir": args.work_dir, "device": args.device,
                       "seed": args.seed, "parallel": args.parallel, "exclude": args.exclude,
                       "vocab_size": args.vocab_size, "max_sentences": args.max_sentences}.items():
        if value is not None:
            setattr(config, key, value)
    if args.dim is not None:
        config.crosspca.dim = args.dim
    if args.sentences_per_word is not None:
        config.extract.sentences_per_word = args.sentences_per_word
    if args.batch_size is not None:
        config.extract.batch_size = args.batch_size
    if args.no_contrastive:
        config.contrastive_enabled = False
    return config


def _build_config(args):
    from swembed.pipeline.build import BuildConfig, load_recipe

    config = load_recipe(args.recipe) if args.recipe else BuildConfig()
    top = {"teacher": args.teacher, "out": args.out, "work_dir": args.work_dir, "device": args.device,
           "dtype": args.dtype, "seed": args.seed, "checkpoint_seconds": args.checkpoint_seconds}
    for key, value in top.items():
        if value is not None:
            setattr(config, key, value)
    section_flags = {
        "corpus": {"sources": args.corpus, "text_column": args.text_column, "min_words": args.min_words,
                   "max_words": args.max_words, "max_sentences": args.max_sentences},
        "vocab": {"max_size": args.vocab_size, "min_count": args.min_count},
        "extract": {"sentences_per_word": args.sentences_per_word, "batch_size": args.batch_size,
                    "unit_sentences": args.unit_sentences},
        "pca": {"dim": args.dim, "sentences": args.pca_sentences, "drop": args.abtt_drop, "level": args.pca_level},
        "distill": {"max_steps": args.distill_steps, "eval_every": args.eval_every},
    }
    for section, values in section_flags.items():
        for key, value in values.items():
            if value is not None:
                setattr(getattr(config, section), key, value)
    if args.no_teacher_words:
        config.vocab.teacher_words = False
    if args.no_distill:
        config.distill_enabled = False
    if args.lexicon_top_k is not None:
        config.lexicon_top_k = args.lexicon_top_k
    return config


def cmd_build(args) -> int:
    from swembed.pipeline.build import build

    if _is_multilingual(args):
        from swembed.pipeline.multilingual import build_multilingual

        config = _multilingual_config(args)
        report = build_multilingual(config, quiet=args.quiet)
        print(f"\nmodel written to {config.out}  (dim {report['dim']}, languages {', '.join(config.langs)})")
        for name, info in report["build"]["stages"].items():
            print(f"{name:<16}{info.get('wall_s') or 0:>10.1f} s{info.get('peak_rss_mb') or 0:>8.0f} MB"
                  f"  {'cached' if info.get('cached') else ''}")
        return 0
    config = _build_config(args)
    report = build(config, force=args.force, quiet=args.quiet)
    stages = report["build"]["stages"]
    print(f"\nmodel written to {config.out}  (dim {report['dim']}, teacher {report['teacher']['name']})")
    print(f"{'stage':<10}{'wall s':>10}{'peak MB':>10}  note")
    for name, info in stages.items():
        note = "cached" if info.get("cached") else ""
        print(f"{name:<10}{info.get('wall_s') or 0:>10.1f}{info.get('peak_rss_mb') or 0:>10.0f}  {note}")
    print(f"{'total':<10}{report['build']['total_wall_s']:>10.1f}")
    return 0


def cmd_encode(args) -> int:
    import numpy as np

    from swembed import load
    from swembed.runtime.folder import atomic_save_npy

    model = load(args.model)
    source = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    with source:
        texts = source.read().split("\n")
    if texts and texts[-1] == "":
        texts.pop()
    vectors = model.encode(texts)
    atomic_save_npy(Path(args.output), vectors.astype(np.float32))
    print(f"{len(texts)} texts -> {args.output} {vectors.shape}", file=sys.stderr)
    return 0


def cmd_ensemble(args) -> int:
    from swembed.ensemble import build_ensemble

    weights = [float(w) for w in args.weights.split(",")] if args.weights else None
    out = build_ensemble(args.members, args.out, weights)
    print(f"ensemble of {len(args.members)} members -> {out}", file=sys.stderr)
    return 0


def cmd_dedup(args) -> int:
    from swembed.dedup import DedupConfig, dedup

    config = DedupConfig(threshold=args.threshold, text_column=args.text_column, keep=args.keep,
                         target_size=args.target_size, target_fraction=args.target_fraction, k=args.k,
                         method=args.search, batch_size=args.batch_size, progress=not args.quiet)
    if args.engine == "spark":
        from swembed.integrations.spark.files import dedup_files

        bad = [item for item in args.spark_conf if "=" not in item]
        if bad:
            raise ValueError(f"--spark-conf takes KEY=VALUE, got {bad[0]!r}")
        conf = dict(item.split("=", 1) for item in args.spark_conf)
        summary = dedup_files(args.inputs, args.model, args.out, config, master=args.spark_master, conf=conf)
    else:
        summary = dedup(args.inputs, args.model, args.out, config)
    print(f"{summary['records']:,} records: kept {summary['kept']:,}, exact duplicates "
          f"{summary['exact_duplicates']:,}, near duplicates {summary['near_duplicates']:,} "
          f"(cosine >= {summary['threshold']:.3f}) -> {args.out}/", file=sys.stderr)
    return 0


def cmd_vocab(args) -> int:
    from swembed.teachers.lens import example_clusters, vocab_clusters

    summary = vocab_clusters(args.model, args.k, Path(args.out), args.seed)
    print(f"{summary['rows']:,} rows of {args.model}'s {summary['matrix']} -> {args.k} clusters -> {args.out} "
          f"(centroids: {summary['centroids']})")
    for members in example_clusters(summary):
        print("  {" + ", ".join(members) + "}")
    return 0


def cmd_eval(args) -> int:
    from swembed.eval.models import load_encoder
    from swembed.eval.sts import EN_SETS, evaluate_sts
    from swembed.eval.xling import evaluate_xling

    kind, encode = load_encoder(args.model, device=args.device)
    languages = encode.__self__.languages if kind == "swembed" else []  # a swembed encoder is StaticEmbedder.encode
    scores: dict[str, float] = {}
    if args.suite in ("en", "all"):
        scores.update(evaluate_sts((lambda texts: encode(texts, lang="en")) if languages else encode,
                                   args.data, EN_SETS))
    if args.suite in ("xling", "all"):
        by_lang = (lambda texts, lang: encode(texts, lang=lang)) if languages else (lambda texts, lang: encode(texts))
        scores.update(evaluate_xling(by_lang, Path(args.data), Path(args.bucc) if args.bucc else None,
                                     languages or None))
    print(f"{args.model} ({kind})")
    for name, value in scores.items():
        print(f"  {name:<18}{value:7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model, "kind": kind, "suite": args.suite,
                                               "scores": scores}, indent=2))
    return 0


def cmd_bench_extract(args) -> int:
    from swembed.eval.extract_bench import bench_extract
    from swembed.pipeline.sources import expand_sources, read_source
    from swembed.teachers import load_teacher

    teacher = load_teacher(args.teacher, device=args.device)
    sentences = []
    for spec in expand_sources(args.corpus):
        for line in read_source(spec):
            if line.strip():
                sentences.append(line.strip())
            if len(sentences) >= args.sentences:
                break
        if len(sentences) >= args.sentences:
            break
    result = bench_extract(teacher, sentences, args.batch_size)
    print(json.dumps(result))
    return 0


def cmd_bench(args) -> int:
    from swembed.eval.bench import bench, format_rows, stsb_texts

    texts = stsb_texts(args.data) if not args.texts else Path(args.texts).read_text(encoding="utf-8").splitlines()
    rows = bench(args.models, texts, args.seconds, args.cores)
    print(f"{len(texts)} texts, {args.cores or 'all'} cores for the all-core column")
    print(format_rows(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"texts": len(texts), "rows": rows}, indent=2))
    return 0


def cmd_report(args) -> int:
    from swembed.eval import reports

    out, data = Path(args.out), Path(args.data)
    out.mkdir(parents=True, exist_ok=True)
    model = Path(args.model)
    work = Path(args.work_dir or f"{args.model.rstrip('/')}.work")
    command = "swembed " + " ".join(sys.argv[1:])
    sections = args.only.split(",") if args.only else ["english", "stages", "ablations", "analysis", "ensembles"]
    baselines = Path(args.baselines)
    if "english" in sections:
        models = {"ours (" + model.name + ")": str(model), "teacher (all-MiniLM-L6-v2)": args.teacher}
        for label, folder in (("model2vec distill", "model2vec-minilm-256"), ("tokenlearn", "tokenlearn-minilm-256")):
            if (baselines / folder).is_dir():
                models[label] = f"model2vec:{baselines / folder}"
        models["WordLlama l2_supercat 256"] = "wordllama"
        reports.english_report(models, data, out, command)
    if "stages" in sections:
        reports.stages_report(model, work, data, out, command)
    if "ablations" in sections:
        reports.ablations_report(Path(args.recipe), work, data, out, Path(args.ablation_models), command)
    if "analysis" in sections:
        reports.analysis_report(model, work, data, out, command)
    if "multilingual" in sections:
        from swembed.eval.models import load_encoder
        from swembed.eval.xling import evaluate_xling

        models = {Path(m).name: Path(m) for m in args.multilingual_models if (Path(m) / "config.json").is_file()}
        teacher_scores = {}
        if args.multilingual_teacher:
            encode = load_encoder(args.multilingual_teacher, "cpu")[1]
            # cross-lingual sets only: the teacher's English STS suite would take ~10 min on 2 CPU cores
            teacher_scores[f"teacher {args.multilingual_teacher}"] = evaluate_xling(lambda texts, lang: encode(texts),
                                                                                    data / "eval")
        reports.multilingual_report(models, data, out, command, teacher_scores)
    if "ensembles" in sections:
        members = {"ours": str(model), "WordLlama": "wordllama"}
        for label, folder in (("model2vec", "model2vec-minilm-256"), ("tokenlearn", "tokenlearn-minilm-256")):
            if (baselines / folder).is_dir():
                members[label] = f"model2vec:{baselines / folder}"
        pairs = [("ours", other) for other in members if other != "ours"] + [("ours", "WordLlama", "tokenlearn")]
        pairs = [p for p in pairs if all(label in members for label in p)]
        reports.ensembles_report(members, pairs, data, out, Path(args.ensemble_models), command)
    print(f"reports written to {out}/")
    return 0


def cmd_export(args) -> int:
    from swembed.integrations.export import export

    out = export(args.model, args.format, args.out, args.dtype)
    print(f"{args.model} -> {out} ({args.format}, {args.dtype})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="swembed", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_build(sub)
    p = sub.add_parser("encode", help="encode lines of text into an .npy matrix")
    p.add_argument("model")
    p.add_argument("--input", required=True, help="text file, one text per line ('-' for stdin)")
    p.add_argument("--output", required=True, help=".npy file to write")
    p = sub.add_parser("export", help="write a model as npy (edge), st (sentence-transformers) or model2vec")
    p.add_argument("model")
    p.add_argument("--format", choices=["npy", "st", "model2vec"], default="npy")
    p.add_argument("--dtype", choices=["float32", "float16", "int8"], default="float32", help="int8: npy only")
    p.add_argument("--out", required=True)
    p = sub.add_parser("ensemble", help="concatenate tables over their union vocabulary (paper appendix D)")
    p.add_argument("members", nargs="+", help="swembed folders, wordllama, model2vec:<folder>")
    p.add_argument("--weights", help="comma-separated positive weights, one per member (default: equal)")
    p.add_argument("--out", required=True)
    p = sub.add_parser("dedup", help="exact and near-duplicate mining over .txt/.jsonl/.parquet, every record mapped")
    p.add_argument("inputs", nargs="+")
    p.add_argument("--model", required=True, help="a swembed model folder")
    p.add_argument("--out", required=True, help="folder for kept/, mapping.tsv and summary.json")
    p.add_argument("--threshold", type=float, help="cosine for near duplicates (default 0.9; with a target: "
                   "the lowest similarity searched, default 0.5)")
    p.add_argument("--text-column", default="text", help="the text field of .jsonl/.parquet records")
    p.add_argument("--keep", choices=["first", "longest"], default="first", help="which record a cluster keeps")
    p.add_argument("--target-size", type=int, help="merge the most similar first until this many records remain")
    p.add_argument("--target-fraction", type=float, help="as --target-size, as a fraction of the records")
    p.add_argument("--k", type=int, default=16, help="neighbours searched per distinct text")
    p.add_argument("--search", choices=["auto", "exact", "ann"], default="auto")
    p.add_argument("--batch-size", type=int, default=8192)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--engine", choices=["local", "spark"], default="local",
                   help="spark: the same job on a Spark cluster (needs the spark extra; outputs are folders of "
                   "part files, an existing --out is an error; no --target-*)")
    p.add_argument("--spark-master", default="local[*]", help="with --engine spark: the master URL")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="with --engine spark: a Spark setting, e.g. spark.driver.memory=2g (repeatable)")
    p = sub.add_parser("vocab", help="vocabulary resources: LENS token clusters")
    vocab_sub = p.add_subparsers(dest="vocab_command", required=True)
    q = vocab_sub.add_parser("clusters", help="KMeans over a model's LM head (or token embeddings): a LENS head")
    q.add_argument("--model", required=True, help="teacher short name, folder or hub id")
    q.add_argument("--k", type=int, default=4000)
    q.add_argument("--out", required=True, help="JSON of cluster -> tokens; centroids go beside it")
    q.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("eval", help="STS (STS12-16, STS-B test, SICK-R) and cross-lingual suites")
    p.add_argument("model", help="a swembed model folder, or a teacher (short name, folder, hub id)")
    p.add_argument("--data", default="../shared/data/eval", help="folder with sts12..sts16, stsb, sick, ...")
    p.add_argument("--suite", choices=["en", "xling", "all"], default="en")
    p.add_argument("--bucc", help="with xling: a folder of BUCC '<xx>-en.<split>.{xx,en,gold}' files to mine")
    p.add_argument("--json", help="also write the scores here")
    p.add_argument("--device", default="auto")
    p = sub.add_parser("bench-extract", help="extract-stage throughput vs a bare teacher forward pass")
    p.add_argument("--teacher", default="minilm")
    p.add_argument("--corpus", nargs="+", required=True)
    p.add_argument("--sentences", type=int, default=4000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default="auto")
    p = sub.add_parser("bench", help="encode throughput, load time and memory, side by side")
    p.add_argument("models", nargs="+", help="swembed folders, model2vec:<folder>, wordllama, or teachers (minilm)")
    p.add_argument("--data", default="../shared/data/eval", help="STS-B test sentences are the default texts")
    p.add_argument("--texts", help="a text file (one text per line) instead of STS-B")
    p.add_argument("--seconds", type=float, default=3.0, help="time each measurement at least this long")
    p.add_argument("--cores", type=int, help="workers for the all-core column (default: every core)")
    p.add_argument("--json")
    p = sub.add_parser("report", help="regenerate reports/ (English table, stages, ablations, analysis)")
    p.add_argument("--model", default="models/minilm-256-shared", help="the build to report on")
    p.add_argument("--recipe", default="pipelines/minilm-256-shared.toml", help="its recipe (for ablations)")
    p.add_argument("--work-dir", help="its stage cache (default <model>.work)")
    p.add_argument("--teacher", default="minilm")
    p.add_argument("--baselines", default="models/baselines", help="folder of `python -m swembed.eval.baselines`")
    p.add_argument("--ablation-models", default="models/ablations")
    p.add_argument("--ensemble-models", default="models/ensembles")
    p.add_argument("--multilingual-models", nargs="+", default=["models/me5-en-de", "models/me5-en-zh",
                   "models/me5-en-ja", "models/me5-en-de-no-abtt", "models/me5-en-zh-jieba", "models/me5-en-ja-fugashi",
                   "models/me5-multi"], help="bilingual builds for the multilingual section")
    p.add_argument("--multilingual-teacher", default="me5-small", help="teacher scored beside them ('' to skip)")
    p.add_argument("--data", default="../shared/data", help="the shared data folder (eval/ and corpora/)")
    p.add_argument("--out", default="reports")
    p.add_argument("--only", help="comma-separated sections: english,stages,ablations,analysis,ensembles,multilingual "
                   "(multilingual runs only when asked)")
    args = parser.parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if getattr(args, "quiet", False) else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    handlers = {"build": cmd_build, "encode": cmd_encode, "export": cmd_export, "ensemble": cmd_ensemble,
                "dedup": cmd_dedup, "vocab": cmd_vocab, "eval": cmd_eval, "bench": cmd_bench, "bench-extract": cmd_bench_extract, "report": cmd_report}
    try:
        return handlers[args.command](args)
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError, UnicodeDecodeError) as exc:
        print(f"swembed {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
