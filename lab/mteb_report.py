"""reports/mteb.md: every table, the teacher and the peers on five English MTEB tasks, and the lever ablations.

Scores come from committed JSON files, each written by one command (shown beside its row):

    swembed eval MODEL --suite mteb --data ../shared/data/eval-mteb --json reports/mteb/scores/NAME.json
    python -m lab.mteb_levers MODEL --variants ... --json reports/mteb/levers/NAME.jsonl

and published rows from ``eval-mteb/published_scores.tsv`` (marked as such). Regenerate the page with

    python -m lab.mteb_report --data ../shared/data/eval-mteb
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from swembed.eval.mteb_tasks import SHORT_NAMES

COLUMNS = list(SHORT_NAMES.values())
LEVER_COLUMNS = ["Banking77", "AmazonCF-en", "Emotion", "TweetSentiment", "classification dev mean",
                 "retrieval dev nDCG@10", "docstring dev nDCG@10", "STS-B dev", "pairs dev nDCG@10"]
ROOT = Path(__file__).resolve().parent.parent
SCORES, LEVERS = ROOT / "reports" / "mteb" / "scores", ROOT / "reports" / "mteb" / "levers"
STS = ROOT / "reports" / "mteb" / "sts"
SCI_DEV = "models/corpora/sci/dev.tsv.gz"
# Issue 57's ablation, one row a table: (name, what changes, build command). Each table NAME is scored by
#   python -m lab.mteb_levers models/NAME --pairs-dev models/corpora/sci/dev.tsv.gz \
#       --json reports/mteb/levers/NAME.jsonl
#   swembed eval models/NAME --suite mteb --data ../shared/data/eval-mteb --json reports/mteb/scores/NAME.json
#   swembed eval models/NAME --data ../shared/data/eval --json reports/mteb/sts/NAME.json
SEARCH_ROWS = [
    ("minilm-256-shared", "today's MiniLM recipe (reference: built by an earlier session; STS avg7 75.03, "
     "reports/README.md; its table was not here to score on the scientific dev pairs)", ""),
    ("minilm-256-sci-plain", "sci + news corpus, 242k of 1.41M sentences (`cover`, 4 contexts a word); no "
     "document or retrieval objective", "swembed build --recipe lab/pipelines/minilm-256-sci-plain.toml"),
    ("minilm-256-sci-15k", "the same, plus document KD on 6,000 abstracts and contrastive retrieval on 8,928 "
     "pairs; distillation stopped at 15,000 steps", "swembed build --recipe lab/pipelines/minilm-256-sci-15k.toml"),
    ("minilm-256-sci-16k", "minilm-256-sci-plain with distillation stopped at 16,000 steps (the reference of the "
     "next two rows)", "swembed build --recipe lab/pipelines/minilm-256-sci-16k.toml"),
    ("minilm-256-sci-fill2", "the cover at 2 contexts a word (153k sentences) filled at random to 265k (7.22M "
     "tokens, as many as the 4-context cover): more distillation sentences, fewer rare-word contexts; 16,000 steps",
     "swembed build --recipe lab/pipelines/minilm-256-sci-fill2.toml"),
    ("minilm-256-sci-16k-tau10", "the 16k row with the KD temperature at 0.1",
     "swembed build --recipe lab/pipelines/minilm-256-sci-16k-tau10.toml"),
    ("minilm-256-sci-cover4", "**the menu's search recipe until 2026-11-28**: minilm-256-sci-plain within the build "
     "budget (distillation stopped at 30,000 steps; teacher batches of 2,048 tokens), built from nothing with a "
     "float32 teacher on torch",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-cover4.toml"),
    ("minilm-256-sci-cover8", "minilm-256-sci-cover4 with the cover at 8 contexts a word (352k sentences, "
     "10.2M tokens: over the build budget; bfloat16 teacher): do more contexts close the STS gap?",
     "swembed build --recipe lab/pipelines/minilm-256-sci-cover8.toml"),
    ("minilm-256-en-cover", "the search recipe's settings over the general English corpora only (no scientific "
     "or news text; 155k of 728k sentences, 3.98M tokens; bfloat16 teacher): how much STS the cover itself costs "
     "against minilm-256-shared, apart from the domain mix",
     "swembed build --recipe lab/pipelines/minilm-256-en-cover.toml"),
    ("minilm-256-sci-general", "minilm-256-sci-cover4 with PCA and distillation on the general sentences only "
     "(`[pca] sources`, `[distill] sources`: 117k of the 242k encoded; the scientific text still gives the words "
     "their contexts); its float32 extract",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-general.toml --work-dir models/minilm-sci-f32.work"),
    ("minilm-256-sci-rare2", "minilm-256-sci-cover4 with rare-word pieces only for words of at most 2 "
     "contexts (60k sentences against 232k at 5: with the cover nearly every sentence holds a word of at most 5); "
     "its float32 extract",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-rare2.toml --work-dir models/minilm-sci-f32.work"),
    ("minilm-256-sci-short", "minilm-256-sci-cover4 at the same teacher tokens (7.26M) with the cover at 3 "
     "contexts a word (203k sentences) filled with 80k sentences of at most 15 words (`[extract] fill_max_words`): "
     "more short KD sentences, fewer rare-word contexts; built from nothing with a float32 teacher in 35.6 min",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-short.toml --work-dir models/minilm-sci-short-f32.work"),
    ("minilm-256-sci-short4", "minilm-256-sci-cover4's 4-context cover (242k sentences) plus 80k sentences of at "
     "most 15 words: over the build budget (8.36M teacher tokens; bfloat16 teacher)",
     "python -m lab.sci_splits && swembed build --recipe lab/pipelines/minilm-256-sci-short4.toml"),
    ("minilm-256-sci-short4-ort", "minilm-256-sci-short4 built from nothing in 37.1 min with a float32 teacher on "
     "ONNX Runtime (what `auto` runs without AVX512-BF16): beside the bfloat16 row, how far two builds of one recipe "
     "differ",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-short4.toml --work-dir models/minilm-sci-short4-ort.work "
     "--out models/minilm-256-sci-short4-ort"),
    ("minilm-256-sci-general-fill", "**the menu's search recipe from 2026-11-28 until it took `[retrieval]` (row "
     "`minilm-256-sci` below)**: minilm-256-sci-cover4's 4-context cover plus "
     "120k sentences of at most 15 words from the general English and news sources only (`[extract] fill_sources`; "
     "8.80M teacher tokens): the short-sentence fill without its scientific third; float32 teacher on ONNX Runtime. "
     "Built as `lab/pipelines/minilm-256-sci-general-fill.toml` (same settings) in the work folder of the row "
     "above; the menu recipe, then these settings, found every stage cached and wrote the same bytes",
     "SWEMBED_NATIVE_BF16=0 swembed build --recipe lab/pipelines/minilm-256-sci-general-fill.toml --work-dir "
     "models/minilm-sci-short4-ort.work"),
    ("minilm-256-sci-fill240",
     "minilm-256-sci-general-fill with its general fill doubled (240k sentences of at most 15 words; "
     "10.43M teacher tokens against 8.80M): STS-B dev +0.13, classifiers +0.55, docstring +0.42, the scientific and "
     "wiki pairs -0.15 / -0.18; 38.6 min from nothing here (extract 1,452 s against 1,154), over what the AVX2 kind "
     "can be sure to fit in 60 min. Not adopted: retrieval dev fell and avg7 stays under 75.0",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-fill240.toml"),
    ("minilm-256-sci-rb1",
     "minilm-256-sci-general-fill with the random-batch companions weighing as much as the neighbour "
     "batches (`[distill] random_batch_weight = 1.0`, not 0.5): does the global layout STS ranks across topics close "
     "its gap? STS-B dev -0.04, wiki +0.26, the scientific pairs -0.11; not adopted",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-rb1.toml"),
    ("minilm-256-sci-int8",
     "minilm-256-sci-general-fill with the teacher run as int8 (`--teacher-dtype int8`: ONNX Runtime's "
     "dynamic quantisation, per channel): extract 606 s against 1,154 s, 23.2 min from nothing here against 32.5; "
     "every dev and test score within the spread of two float32 builds. Built before the flag existed, by a wrapper "
     "that loaded the same int8 file with the same session settings",
     "python -m lab.sci_splits && swembed build --recipe lab/pipelines/minilm-256-sci-general-fill.toml "
     "--teacher-dtype int8 "
     "--work-dir models/minilm-sci-int8.work --out models/minilm-256-sci-int8"),
    ("minilm-256-sci-fill360-int8",
     "minilm-256-sci-general-fill with its general fill tripled (360k sentences of at most 15 "
     "words, 12.06M teacher tokens) on the int8 teacher: against fill240, STS-B dev +0.02, the scientific pairs "
     "-0.38, docstrings -0.67, classifiers -0.36; avg7 74.77 at test: the fill has stopped paying. Not adopted",
     "python -m lab.sci_splits && swembed build --recipe lab/pipelines/minilm-256-sci-fill360.toml"),
    ("minilm-256-sci-allgen-int8",
     "minilm-256-sci-general-fill with its cover filled with every general English and news "
     "sentence (856k sentences, 18.83M teacher tokens, int8 teacher; over the float32 budget): does reading all the "
     "general text, as minilm-256-shared does (avg7 75.03), close the STS gap beside the scientific cover? STS-B dev "
     "85.01, avg7 74.77: no; the wiki pairs rise 47.10 -> 48.22 (minilm-256-shared: 48.35), SciFact falls to 55.12, "
     "five-task mean 59.42. Not adopted",
     "python -m lab.sci_splits && swembed build --recipe lab/pipelines/minilm-256-sci-allgen-int8.toml"),
    ("minilm-256-sci-pairs", "minilm-256-sci-general-fill plus the contrastive retrieval objective (`[retrieval]`, "
     "in-batch InfoNCE, each query's own passage the label; no teacher time) on lab.sci_splits' 9,000-pair sample "
     "(SciTLDR 4,000, MedQuAD 2,000, AG News 500, pseudo-queries 2,500): the scientific pairs +2.17, docstrings "
     "+0.42, STS-B dev +0.05, classifiers -0.05, wiki -0.40; held-out MedQuAD questions +9.10 "
     "(reports/heldout-retrieval.md). Distillation 745 s against 553 s",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-pairs.toml"),
    ("minilm-256-sci-pairs-all", "the same on every training pair (27,627 of pairs/ and 71,383 pseudo-queries): "
     "against the sample, the scientific pairs +2.97, MedQuAD +3.20, AG News +1.08, pseudo-queries +3.15, "
     "docstrings -0.43, STS-B dev -0.13; against minilm-256-sci-general-fill, every held-out set up (the "
     "scientific pairs +5.14) and STS-B dev -0.08. Chosen on those dev sets: the menu's recipe (next row). At test "
     "SciFact 58.46, mean 59.62, STS avg7 74.28 (-0.26)",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-pairs-all.toml"),
    ("minilm-256-sci", "**the menu's search recipe since 2026-12-06**: minilm-256-sci-sampled with the batches of "
     "its cells drawn CPU-stably (`[distill] cell_draws = \"hashed\"`: float64 cells, each step the cell of a "
     "uniformly drawn example and its members of smallest seeded hash) and its contrastive query -> passage batches "
     "from lexical cells of about 512 pairs (`[retrieval] cell_size = 512`, chosen on dev as "
     "minilm-256-sci-rcell512 was). Float32 teacher (what `auto` runs without AVX512-BF16), distillation and grams "
     "re-run from minilm-256-sci-sampled's stages. Against minilm-256-sci-sampled on dev: the scientific pairs "
     "+0.27, docstrings +1.24, STS-B dev +0.05, wiki and classifiers level; held-out mean +0.28 (pseudo-queries "
     "+0.36 [+0.17, +0.55]); at test SciFact 58.21 (-0.49), five-task mean 59.63 (-0.22), avg7 74.20 (-0.08), "
     "hybrid 70.66 (-0.13). Under the AVX2 kernels (`python -m lab.same_table ... --variants avx2`) its word and piece "
     "rows stay within 9.4e-6 (grams: cosine >= 0.99997), where the sampled draws moved them by 0.008 a row; with "
     "its teacher's vectors perturbed (x 1 + 1e-6 N(0, 1), `--variants noise`) within 1.2e-4, every score the same. "
     "Since the seventh session of 2026-12-06 the recipe also fits lexical weights on its pairs (`[lexical_weights]`, "
     "80 s; chosen on dev: the hybrid's held-out four 79.45 -> 79.88, its six-set mean 75.87 -> 76.18, "
     "reports/mteb/lexical_weights.md): every column here the same (they weigh no vector), the hybrid at test "
     "69.41 against 70.66 without them",
     "SWEMBED_NATIVE_BF16=0 swembed build --recipe pipelines/minilm-256-sci.toml --data-mirror ../shared/data "
     "--work-dir models/minilm-sci-f32head.work"),
    ("minilm-256-sci-bfloat16", "the same recipe with a bfloat16 teacher (what `auto` runs with AVX512-BF16), its "
     "distillation and grams re-run from minilm-256-sci-quiet's stages: against minilm-256-sci-quiet on dev the "
     "scientific pairs +0.20, docstrings +1.10, STS-B dev +0.04, wiki level, classifiers -0.14; held-out mean +0.15; "
     "at test SciFact 58.03 (-1.00), five-task mean 59.59 (-0.20), avg7 74.27 (+0.04), hybrid 70.69 (-0.11). "
     "Against minilm-256-sci-rcell512 (the same settings with sampled draws) SciFact -0.88 and docstrings +0.85: "
     "two draws of batches from one recipe differ by this much, which is why a rebuild must draw the same batches",
     "swembed build --recipe pipelines/minilm-256-sci.toml --data-mirror ../shared/data "
     "--out models/minilm-256-sci-bfloat16 --work-dir models/minilm-sci-quiet.work"),
    ("minilm-256-sci-sampled", "the menu's search recipe from 2026-11-28 (eighth session) to 2026-12-06: "
     "minilm-256-sci-pairs-all's settings, built from nothing in a fresh work folder from its public sources "
     "through the mirror, with a float32 teacher on ONNX Runtime (what `auto` runs on a CPU without AVX512-BF16). "
     "Rebuilt 2026-12-06 at 83630d1 (issue 78): its word and piece rows within 5e-6 of the build of the same "
     "recipe a session before (gram rows: cosine >= 0.99996), five-task mean 59.85 against 59.86; the "
     "eighth session's build scored 59.62, SciFact 58.46, with the code of then",
     "SWEMBED_NATIVE_BF16=0 swembed build --recipe pipelines/minilm-256-sci.toml --data-mirror "
     "../shared/data --out models/minilm-256-sci --work-dir models/minilm-sci-f32head.work (at 83630d1, "
     "the folder then renamed minilm-256-sci-sampled; now: the recipe with cell_draws = \"sampled\" and no "
     "[retrieval] cell_size)"),
    ("minilm-256-sci-quiet", "minilm-256-sci-sampled's recipe from nothing with a bfloat16 teacher in 4,096-token "
     "batches (what `auto` runs on a CPU with AVX512-BF16) in 19.96 min (reports/build-times.md): against the float32 "
     "build, STS-B dev -0.03, the scientific pairs +0.03, classifiers +0.04, wiki +0.70; at test five-task"
     " mean -0.06, SciFact +0.33, avg7 -0.05: the two teacher dtypes give two tables, each rebuilt to its "
     "own scores",
     "swembed build --recipe pipelines/minilm-256-sci.toml --data-mirror ../shared/data --out "
     "models/minilm-256-sci-quiet --work-dir models/minilm-sci-quiet.work (at 543bc8f: the recipe then)"),
    ("minilm-256-sci-avx2-v2", "the same recipe as of 4dc2fb6 (teacher batches of 1,024 tokens; gram fit in torch, "
     "fused Adam) built from nothing on the AVX2 kind in 55.6 min, float32 teacher (reports/build-times.md)",
     "python -m lab.sci_splits && swembed build --recipe pipelines/minilm-256-sci.toml "
     "--work-dir models/minilm-sci-v2.work --out models/minilm-256-sci-avx2-v2"),
    ("minilm-256-sci-avx2-int8", "the recipe as of a2d904c (2,048-token batches) with an int8 teacher "
     "(`--teacher-dtype int8`), built from nothing on the AVX2 kind in 60.2 min (reports/build-times.md)",
     "python -m lab.sci_splits && swembed build --recipe pipelines/minilm-256-sci.toml --teacher-dtype int8 "
     "--work-dir models/minilm-sci-int8.work --out models/minilm-256-sci-avx2-int8"),
    ("minilm-256-sci-avx2emu", "issue 78, before the hashed draws: minilm-256-sci-quiet's distillation and grams "
     "re-run from its own "
     "stages with the AVX2 kernels a CPU without AVX-512 runs (`MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2`; every "
     "input byte-identical): the table moved (rows by 0.008 on average, pieces to cosine 0.94), where the default "
     "build's moves by 5e-6 under the same switch. The recipe distils at a constant rate (1e-3) to its last step, "
     "so the last table is a snapshot of a trajectory that rounding sends elsewhere; the default decays the rate to "
     "zero. Against minilm-256-sci-quiet, the noise floor of every column: dev within 0.14, at test five-task mean "
     "-0.08, SciFact -0.09, avg7 0.00, the hybrid 70.82 against 70.80",
     "MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2 swembed build --recipe pipelines/minilm-256-sci.toml --data-mirror "
     "../shared/data --out models/minilm-256-sci-avx2emu --work-dir models/minilm-sci-avx2emu.work (its stages "
     "but distill and grams hard-linked from models/minilm-sci-quiet.work)"),
    ("minilm-256-sci-rcell512", "issue 82: minilm-256-sci-quiet with its contrastive query -> passage batches "
     "drawn from lexical cells of about 512 pairs (`[retrieval] cell_size = 512`: spherical k-means of each pair's "
     "IDF-weighted word sketch, `swembed.pipeline.train.lexical_sketches`; this row's and the next one's projection "
     "drawn by torch, since by numpy so every CPU draws the same), so a batch's other passages share the "
     "query's rare words (hard negatives, no teacher, a few seconds of k-means). Against minilm-256-sci-quiet: the "
     "scientific pairs +0.31, wiki +0.43, docstrings +0.24, STS-B dev +0.08, classifiers -0.05; held-out MedQuAD "
     "+1.09 [+0.23, +1.95], pseudo-queries +0.31 [+0.12, +0.49], SciTLDR +0.39, AG News -0.09 "
     "(`python -m lab.heldout_retrieval models/minilm-256-sci-quiet models/minilm-256-sci-rcell512`). At test "
     "SciFact 58.91 (-0.12), five-task mean 59.73 (-0.06), avg7 74.27 (+0.04); the hybrid (`--search hybrid`) "
     "71.44 against 70.80",
     "swembed build --recipe lab/pipelines/minilm-256-sci-rcell512.toml --data-mirror ../shared/data"),
    ("minilm-256-sci-cos", "issues 78 and 82: minilm-256-sci-rcell512's settings (its sketch projection drawn by "
     "numpy) with the learning rate decaying to zero (cosine from 2e-3 over the same 30,000 steps, not a constant "
     "1e-3): does the decay damp what another CPU's rounding does, as for the default build? No: its twin under "
     "the AVX2 kernels moved as far (word rows by 0.009 on average, pieces to cosine 0.88). Against rcell512 on dev "
     "within the noise floor (the scientific pairs -0.15, wiki -0.29, docstrings -0.07, STS-B dev +0.03; held-out "
     "mean 76.43 against 76.47). At test SciFact 58.63, five-task mean 59.73, avg7 74.27, hybrid 70.84. Not adopted",
     "swembed build --recipe lab/pipelines/minilm-256-sci-cos.toml --data-mirror ../shared/data"),
    ("minilm-256-sci-rcell128", "the same with cells of about 128 pairs, one batch a cell (`cell_size = 128`): "
     "against minilm-256-sci-quiet, the scientific pairs +0.20, STS-B dev +0.17, wiki and docstrings level, "
     "classifiers -0.13; held-out MedQuAD +1.73 [+0.82, +2.67] but AG News -0.75 [-1.60, +0.09]: harder negatives "
     "help the templated health questions and cost the free-text headlines. Not adopted (512 raises every dev "
     "retrieval set). At test SciFact 58.35, five-task mean 59.62, avg7 74.24, hybrid 70.93",
     "swembed build --recipe lab/pipelines/minilm-256-sci-rcell128.toml --data-mirror ../shared/data"),
    ("minilm-256-sci-window5", "issue 80, fewer teacher tokens: minilm-256-sci-bfloat16's recipe with each "
     "sentence its cover chose read as the window from 5 words before the first word it was chosen for to 5 after "
     "the last (`[extract] window = 5`; the 120k fill sentences whole): 6.73M padded teacher tokens against 8.80M "
     "(76%; `python -m lab.window_savings`: width 3 69%, 8 85%), but the bfloat16 extract took 272 s against 302 s "
     "(short texts run fewer tokens a second: 24.7k against 29k). Against minilm-256-sci-bfloat16 on dev: the "
     "scientific pairs -0.75, wiki -2.44, docstrings -1.23, STS-B dev -0.15, classifiers +0.24; held-out mean "
     "75.90 against 76.20. At test SciFact 56.88 (-1.15), five-task mean 59.71 (+0.12), avg7 74.12 (-0.15). Not "
     "adopted: a word's vector needs more context than the window around it",
     "swembed build --recipe lab/pipelines/minilm-256-sci-window5.toml --data-mirror ../shared/data"),
    ("mpnet-me5-256-sci", "the strongest English table with the search text: pipelines/mpnet-me5-256.toml "
     "(mpnet word vectors, KD towards mpnet and multilingual-e5-small) over the shared corpora plus sci/ and news/, "
     "its teachers reading sentences chosen with minilm-256-sci-fill240's settings (482k, 10.43M tokens; bfloat16; "
     "2.7 h on 2 cores for the run resumed after 5 of its 59 extract units). Against mpnet-me5-256 (English "
     "only: mean 58.89, SciFact 40.91, avg7 76.40): five-task mean "
     "61.46, SciFact 54.30, avg7 75.90 (the issue asks 60.0 and 76.0)",
     "python -m lab.sci_splits && swembed build --recipe lab/pipelines/mpnet-me5-256-sci.toml"),
    ("mpnet-me5-256-sci-grams", "**the strongest English table with the search text since 2026-11-28 (ninth "
     "session)**: mpnet-me5-256-sci with the gram rows the MiniLM recipes fit to their finished tables (`[grams] "
     "buckets = 65536`; only that stage runs, 152 s): STS-B dev +0.08, classifiers +0.05, wiki +0.21, the "
     "scientific pairs +0.04; chosen on dev. At test five-task mean 61.62, SciFact 55.61, avg7 75.92 (+0.02; "
     "the issue asks 76.0)",
     "python -m lab.sci_splits && swembed build --recipe lab/pipelines/mpnet-me5-256-sci-grams.toml"),
    ("mpnet-me5-256-sci-pairs", "mpnet-me5-256-sci-grams with the MiniLM search recipe's query -> passage pairs "
     "(`[retrieval]`, contrastive, 98k pairs; distillation 1,124 s, stopped early): the scientific pairs +6.33, "
     "docstrings +0.69, classifiers +0.11, STS-B dev -0.01, wiki -0.53; held-out MedQuAD 74.82 -> 89.14, "
     "SciTLDR 94.16, AG News 82.40, pseudo-queries 44.16, the best static row on each but AG News. Chosen on those "
     "dev sets; at test five-task mean 62.40, SciFact 58.75, but STS avg7 75.40 (-0.52, which STS-B dev did not "
     "show, as with the MiniLM rows: -0.08 there, -0.26 at test)",
     "python -m lab.sci_splits && swembed build --recipe pipelines/mpnet-me5-256-sci-pairs.toml"),
    ("minilm-380-sci", "the menu's search recipe at d = 380 (nearly the teacher's 384; the PCA keeps 89.8% of the "
     "sentence variance against 86.4% at 256): does the scientific text cost STS because 256 dimensions hold two "
     "domains? No: STS-B dev -0.13 (avg7 74.19 at test); the scientific pairs +0.58, docstrings +1.66, "
     "classifiers +0.48, held-out MedQuAD +0.57 and pseudo-queries +0.62 (reports/heldout-retrieval.md); "
     "five-task mean 60.20, SciFact 59.47, for a table 1.5 times the size. Not adopted: it moves STS away from "
     "75.0",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe lab/pipelines/minilm-380-sci.toml"),
    ("minilm-256-sci-wiki", "the menu's search recipe with 9,659 open-domain pseudo-queries beside its pairs "
     "(`python -m lab.wiki_pairs`: the Wikipedia blocks outside the wiki dev set, first or a middle sentence -> the "
     "rest): the wiki dev set +0.32 (partly its own format), docstrings +0.19, STS-B dev +0.02, the scientific "
     "pairs -0.16; held-out MedQuAD -0.36, SciTLDR -0.59, AG News -0.15, every interval across or below zero. "
     "Not adopted",
     "python -m lab.sci_splits && python -m lab.wiki_pairs && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-wiki.toml"),
    ("minilm-256-sci-kdgen", "the menu's search recipe with its KD on the general English and news sentences "
     "only (`[distill] sources`), the scientific text reaching the table through its word contexts and the "
     "query -> passage pairs alone: without the pairs this split cost SciFact 10 points (row "
     "minilm-256-sci-general). Now the held-out question sets stay level (MedQuAD -0.41, SciTLDR -0.52, AG News "
     "-0.38, every interval across zero), docstrings +0.62, classifiers +0.26, but STS-B dev -0.12 and the "
     "scientific pairs -0.33: not adopted. At test avg7 74.47 (+0.19), SciFact 55.57 (-2.89), mean 59.37",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-kdgen.toml"),
    ("minilm-256-sci-rw05", "the menu's search recipe with its contrastive query -> passage objective at half "
     "the weight (`[retrieval] weight = 0.5`; the objective cost avg7 0.26): STS-B dev +0.08, wiki +0.15, "
     "classifiers level, but the scientific pairs -0.64 and held-out MedQuAD -1.04 [-1.41, -0.67], pseudo-queries "
     "-0.66 [-0.79, -0.53], SciTLDR and AG News level. Search leads: not adopted",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-rw05.toml"),
    ("minilm-256-sci-rw2", "issue 82, the other way: the menu's search recipe with its contrastive query -> "
     "passage objective at twice the weight (`[retrieval] weight = 2.0`), its distillation and later stages re-run "
     "from minilm-256-sci-bfloat16's (the same steps: no build time added). Against minilm-256-sci-bfloat16 on dev: "
     "the scientific pairs +0.51, held-out mean 76.20 -> 76.60 (MedQuAD +0.74 [+0.35, +1.15], pseudo-queries +0.54 "
     "[+0.39, +0.70], SciTLDR and AG News level), but docstrings -0.91, STS-B dev -0.09, classifiers -0.10, wiki "
     "level (`python -m lab.heldout_retrieval models/minilm-256-sci-bfloat16 models/minilm-256-sci-rw2 "
     "models/minilm-256-sci-rw4`). At test SciFact 57.93 (-0.10), five-task mean 59.45 (-0.14), avg7 74.07 "
     "(-0.20), the hybrid (with its lexical weights) 69.66 against 69.79. Not adopted: the gain is on the sets "
     "made like the training pairs (MedQuAD's templates, the pseudo-queries), and the sets unlike them pay for it",
     "swembed build --recipe lab/pipelines/minilm-256-sci-rw2.toml --data-mirror ../shared/data"),
    ("minilm-256-sci-rw4", "the same at four times the weight (`[retrieval] weight = 4.0`): against "
     "minilm-256-sci-bfloat16 the scientific pairs +0.89, held-out mean 76.88 (MedQuAD +1.56 [+0.91, +2.26], "
     "pseudo-queries +0.86 [+0.66, +1.07], SciTLDR +0.31, AG News level), docstrings -1.58, classifiers -0.28, STS-B "
     "dev -0.23, wiki -0.19. At test SciFact 57.11 (-0.92), five-task mean 59.19 (-0.40), avg7 73.80 (under the "
     "74.0 bar), hybrid 69.49. With rw05 the curve of the objective's weight: each doubling buys about 0.3-0.4 on the "
     "held-out question sets and costs the rest. Not adopted",
     "swembed build --recipe lab/pipelines/minilm-256-sci-rw4.toml --data-mirror ../shared/data"),
    ("minilm-256-sci-abtt1", "the menu's search recipe with the sentence PCA dropping 1 top direction (ABTT) "
     "instead of 3 (chosen on the general corpora; half of this PCA sample is biomedical), retrained from the AVX2 "
     "build's stages against row minilm-256-sci-avx2-v2: STS-B dev level (84.76), docstrings +0.48, the scientific "
     "pairs -0.07, wiki -0.27, classifiers -0.06; held-out KD loss 11.893 against 11.833. At test avg7 74.25 "
     "(-0.03). Not adopted",
     "python -m lab.sci_splits && SWEMBED_NATIVE_BF16=0 swembed build --recipe "
     "lab/pipelines/minilm-256-sci-abtt1.toml"),
    ("mpnet-me5-minilm-512-sci", "an ensemble (paper appendix D, `swembed ensemble`, now backing off through its "
     "members' pieces and gram rows): mpnet-me5-256-sci-grams beside minilm-256-shared, the general MiniLM recipe "
     "(avg7 75.02), weights 2:1 chosen on STS-B dev (`python -m lab.ensemble_weights` over 1, 2, 3, 4, 6, 8): "
     "STS-B dev +0.26, classifiers +0.17, wiki +0.47, the scientific pairs -1.05. At test avg7 75.99 (+0.07; "
     "76.0 asked), five-task mean 61.43, SciFact 54.70; 512 dimensions",
     "swembed ensemble models/mpnet-me5-256-sci-grams models/minilm-256-shared --weights 2,1 "
     "--out models/mpnet-me5-minilm-512-sci"),
    ("mpnet-me5-minilm-512-sci-pairs", "the same ensemble of mpnet-me5-256-sci-pairs (weights 2:1, chosen on STS-B "
     "dev): STS-B dev +0.22, classifiers +0.25, wiki +1.45, the scientific pairs -1.30. At test avg7 75.67 (+0.27), "
     "five-task mean 62.22, SciFact 57.79",
     "swembed ensemble models/mpnet-me5-256-sci-pairs models/minilm-256-shared --weights 2,1 "
     "--out models/mpnet-me5-minilm-512-sci-pairs"),
    ("minilm-512-sci-shared", "the two MiniLM menu tables as one (`swembed ensemble`), the search table at "
     "weight 0.5 beside minilm-256-shared (rebuilt here: avg7 75.05, STS-B dev 85.10), the weight chosen on STS-B "
     "dev (`python -m lab.ensemble_weights ... --weights 0.5 0.75 1 1.5 2 3`: 85.08, 85.07, 85.03, 84.99, 84.95, "
     "84.89; no weight beats minilm-256-shared alone). Does a MiniLM table that holds both meet the three MiniLM bars? "
     "At test avg7 74.93, five-task mean 59.07, SciFact 52.63: each a hair under (75.0, 59.2, 53); 512 dimensions, "
     "and two builds (over the 60-min budget)",
     "swembed ensemble models/minilm-256-sci models/minilm-256-shared --weights 0.5,1 "
     "--out models/minilm-512-sci-shared"),
    ("edge-16mb-sci", "the edge-16mb settings (50k words, 192 dims, int8) shrunk from minilm-256-sci: 15.94 MB",
     "swembed shrink --recipe pipelines/edge-16mb-sci.toml"),
    ("edge-4mb-sci", "the edge-4mb settings (20k words, 128 dims, int4) shrunk from minilm-256-sci: 4.00 MB",
     "swembed shrink --recipe pipelines/edge-4mb-sci.toml"),
    ("wordllama-sci", "WordLlama l2_supercat 256 (peer; dev rows only: "
     "`python -m lab.mteb_levers wordllama --pairs-dev models/corpora/sci/dev.tsv.gz`)", ""),
]
SEARCH_DEV = ["pairs dev nDCG@10", "retrieval dev nDCG@10", "docstring dev nDCG@10", "classification dev mean",
              "STS-B dev"]


def published_rows(tsv: Path) -> list[tuple[str, dict[str, float], str]]:
    """(model, scores, note) per model of ``published_scores.tsv``, in file order."""
    rows: dict[str, dict[str, float]] = {}
    versions: dict[str, set[str]] = {}
    with open(tsv, encoding="utf-8") as handle:
        for r in csv.DictReader(handle, delimiter="\t"):
            rows.setdefault(r["model"], {})
            if r["main_score_x100"] != "NA":
                rows[r["model"]][SHORT_NAMES[r["task"]]] = float(r["main_score_x100"])
                version = r["mteb_version"]
                versions.setdefault(r["model"], set()).add("model card" if version in ("", "None") else version)
    return [(model, scores, "published (mteb " + ", ".join(sorted(versions.get(model, {"?"}))) + ")")
            for model, scores in rows.items()]


def _cell(scores: dict[str, float], key: str) -> str:
    return f"{scores[key]:.2f}" if key in scores else "—"


def _mean(scores: dict[str, float]) -> str:
    if all(c in scores for c in COLUMNS):
        return f"**{sum(scores[c] for c in COLUMNS) / len(COLUMNS):.2f}**"
    return "—"


def score_table(data: Path) -> list[str]:
    lines = ["| model | " + " | ".join(COLUMNS) + " | mean | source |", "|---" * (len(COLUMNS) + 3) + "|"]
    for path in sorted(SCORES.glob("*.json")):
        entry = json.loads(path.read_text())
        rel = path.relative_to(ROOT)
        lines.append(f"| {entry.get('label', path.stem)} | " + " | ".join(_cell(entry["scores"], c) for c in COLUMNS)
                     + f" | {_mean(entry['scores'])} | measured here (`{rel}`) |")
    for model, scores, note in published_rows(data / "published_scores.tsv"):
        lines.append(f"| {model} | " + " | ".join(_cell(scores, c) for c in COLUMNS) + f" | {_mean(scores)} | {note} |")
    return lines


def commands() -> list[str]:
    lines = []
    for path in sorted(SCORES.glob("*.json")):
        entry = json.loads(path.read_text())
        rel = path.relative_to(ROOT)
        ranked = "".join(f" --{key} {entry[key]}" for key in ("search", "alpha", "windows") if entry.get(key))
        tasks = "" if "mean" in entry["scores"] else " --tasks " + ",".join(
            name for name in entry["scores"] if not name.endswith("(dense)"))
        command = entry.get("command") or (f"swembed eval {entry['model']} --suite mteb --data "
                                           f"../shared/data/eval-mteb{tasks}{ranked} --json {rel}")
        lines.append(f"* `{rel}`: `{command}`" + (f" ({entry['note']})" if entry.get("note") else ""))
    return lines


def _jsonl_rows(path: Path) -> list[dict]:
    """The rows of a ``lab.mteb_levers --json`` file, one JSON object a line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def lever_tables() -> list[str]:
    lines = []
    for path in sorted(LEVERS.glob("*.jsonl")):
        rows = _jsonl_rows(path)
        if not rows:
            continue
        rel = path.relative_to(ROOT)
        variants = ",".join(r["variant"] for r in rows)
        work = f" --work {rows[0]['work']}" if rows[0].get("work") else ""
        work += f" --pairs-dev {rows[0]['pairs_dev']}" if rows[0].get("pairs_dev") else ""
        command = f"python -m lab.mteb_levers {rows[0]['model']} --variants {variants}{work} --json {rel}"
        lines += [f"### {rows[0]['model']}", "", f"`{command}`", "", f"<!-- generated: {command} -->",
                  "", "| variant | " + " | ".join(LEVER_COLUMNS) + " |", "|---" * (len(LEVER_COLUMNS) + 1) + "|"]
        lines += [f"| {r['variant']} | " + " | ".join(_cell(r["scores"], c) for c in LEVER_COLUMNS) + " |"
                  for r in rows]
        lines.append("")
    return lines


def _levers_base(name: str) -> dict[str, float]:
    path = LEVERS / f"{name}.jsonl"
    rows = _jsonl_rows(path) if path.is_file() else []
    base = [r for r in rows if r["variant"] == "base"]
    sci = [r["scores"] for r in base if r.get("pairs_dev") == SCI_DEV]
    if sci:
        return sci[0]
    return {k: v for k, v in base[0]["scores"].items() if k != "pairs dev nDCG@10"} if base else {}


def _json_scores(folder: Path, name: str) -> dict[str, float]:
    path = folder / f"{name}.json"
    return json.loads(path.read_text())["scores"] if path.is_file() else {}


def search_table() -> list[str]:
    """Issue 57's ablation: each table's dev scores (the scientific dev pairs first) and its test scores."""
    header = ["table", "what changes", "sci dev", "wiki dev", "docstring dev", "classifiers dev", "STS-B dev",
              "SciFact", "five-task mean", "STS avg7"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for name, change, _ in SEARCH_ROWS:
        dev, test, sts = _levers_base(name), _json_scores(SCORES, name), _json_scores(STS, name)
        mean = (f"{sum(test[c] for c in COLUMNS) / len(COLUMNS):.2f}" if all(c in test for c in COLUMNS) else "—")
        lines.append(f"| `{name}` | {change} | " + " | ".join(_cell(dev, c) for c in SEARCH_DEV) + " | "
                     + f"{_cell(test, 'SciFact')} | {mean} | {_cell(sts, 'avg')} |")
    return lines + ["", "Builds:", "", *[f"* `{name}`: `{command}`" for name, _, command in SEARCH_ROWS if command]]


# Issue 82, search tables scored with the product's windows: (table, what changes and its build, its
# lab.passage_windows JSON, its mteb scores with windows, its STS scores); the first row is the reference. A lever
# built from another build's stages is judged against that build (WINDOWED_AGAINST); a build of the reference's
# recipe on another CPU kind or with another seed is a twin (WINDOWED_TWINS, what its spread measures), not a lever
WINDOWED_TABLES = [
    ("minilm-256-sci-avx2b", "the menu's search recipe, built on the AVX2 kind (reference; its STS scores are those of "
     "reports/mteb/sts/minilm-256-sci.json, the menu's table, which it matches to the last digit)",
     "passage_windows.json", "minilm-256-sci-windows.json", "minilm-256-sci.json"),
    ("minilm-380-sci-v2", "the same recipe at d = 380, nearly the teacher's 384, which raised every retrieval dev set "
     "when first measured without windows (row `minilm-380-sci`); a table 1.5 times the size "
     "(`swembed build --recipe lab/pipelines/minilm-380-sci-v2.toml --data-mirror ../shared/data` from the "
     "reference's stages: PCA onward, 19.4 min; distillation 1,030 s against 1,006 s)",
     "passage_windows-380.json", "minilm-380-sci-v2-windows.json", "minilm-380-sci-v2.json"),
    ("minilm-256-sci-wpairs", "the reference recipe with 98,323 query -> window pairs beside its query -> passage "
     "pairs in the contrastive objective: each training pair's 8-word window sharing the most IDF with its query "
     "(`python -m lab.window_pairs models/corpora/sci/pairs.tsv.gz models/corpora/sci/pseudo.tsv.gz --out "
     "models/corpora/sci-windows/windows.tsv.gz`; `swembed build --recipe lab/pipelines/minilm-256-sci-wpairs.toml "
     "--data-mirror ../shared/data` from the reference's stages)",
     "passage_windows-wpairs.json", "minilm-256-sci-wpairs-windows.json", "minilm-256-sci-wpairs.json"),
    ("minilm-256-sci-wcl", "the reference recipe with its contrastive objective scored as the search scores a passage "
     "with windows: each query against each batch passage's cosine plus 0.5 times its best 8-word window's, over 1.5 "
     "(`[retrieval] windows = 8`, `swembed.pipeline.train.windowed_contrastive_loss`), **its batches of pairs drawn at "
     "random instead of the reference's lexical cells** (the windowed branch ignored `cell_size`, a bug found after "
     "this build and fixed; the recipe says `cell_size = 0`, what ran), so the lever is confounded with dropping the "
     "cells (the windowed score with the cells: the next row) (`swembed build --recipe "
     "lab/pipelines/minilm-256-sci-wcl.toml --data-mirror ../shared/data` from the reference's stages; the 3.96M "
     "windows of the 98k training passages make a step 2.7 times dearer on this kind: distillation 2,730 s against "
     "1,006 s)",
     "passage_windows-wcl.json", "minilm-256-sci-wcl-windows.json", "minilm-256-sci-wcl.json"),
    ("minilm-256-sci-wcl-cells", "the same windowed contrastive score with the reference's lexical cells drawing its "
     "batches (`cell_size = 512` inherited; `swembed build --recipe lab/pipelines/minilm-256-sci-wcl-cells.toml "
     "--data-mirror ../shared/data` from the reference's stages; distillation 3,932 s, 10.6 steps/s when alone, "
     "about 28 of its 65 minutes beside another job (4.8 steps/s then)): the lever itself, unconfounded",
     "passage_windows-wcl-cells.json", "minilm-256-sci-wcl-cells-windows.json", "minilm-256-sci-wcl-cells.json"),
    ("minilm-256-sci-intel", "the reference's recipe built from nothing on the Intel kind (bfloat16 teacher, what "
     "`auto` runs there; `/usr/bin/time -v swembed build --recipe pipelines/minilm-256-sci.toml --data-mirror "
     "../shared/data --work-dir models/minilm-sci-intel.work --out models/minilm-256-sci-intel` on a wiped machine, "
     "18 min 50 s, reports/build-times.md)",
     "passage_windows-intel.json", "minilm-256-sci-intel-windows.json", "minilm-256-sci-intel.json"),
    ("minilm-256-sci-pq3", "more pairs without a teacher: three middle sentences of each training abstract as "
     "pseudo-queries instead of one (`[splits] pseudo_middles = 3`, each -> the abstract without it: 142,043 "
     "pseudo-query pairs against 71,383; dev and every other split byte-identical; the lexical weights fitted on "
     "the reference's pairs), built from the Intel build's stages (`swembed build --recipe "
     "lab/pipelines/minilm-256-sci-pq3.toml --data-mirror ../shared/data`: distillation onward)",
     "passage_windows-pq3.json", "minilm-256-sci-pq3-windows.json", "minilm-256-sci-pq3.json"),
    ("minilm-380-sci-intel", "`minilm-380-sci-v2`'s lever (d = 380) again on the Intel kind, against the Intel build "
     "(`swembed build --recipe lab/pipelines/minilm-380-sci-intel.toml --data-mirror ../shared/data`: PCA onward from "
     "its stages, 14.9 min; distillation 784 s against 618 s); judged, as set down before it ran, on the mean of the "
     "two kinds' differences",
     "passage_windows-380-intel.json", "minilm-380-sci-intel-windows.json", "minilm-380-sci-intel.json"),
    ("minilm-256-sci-zen4", "the reference's recipe built from nothing on a third CPU kind, an AMD EPYC with "
     "AVX512-BF16 and no AMX (bfloat16 teacher, what `auto` runs there: 12.4k tokens/s against 8.0k for float32 on "
     "ONNX Runtime; `/usr/bin/time -v swembed build --recipe pipelines/minilm-256-sci.toml --data-mirror "
     "../shared/data --work-dir models/minilm-sci-intel.work --out models/minilm-256-sci-intel` on a wiped machine, "
     "the folders renamed `-zen4` after, 27 min 49 s, reports/build-times.md); the reference of the rows after it",
     "passage_windows-zen4.json", "minilm-256-sci-zen4-windows.json", "minilm-256-sci-zen4.json"),
    ("minilm-256-sci-sib", "false negatives out of the contrastive batches: sibling pairs masked out of each other's "
     "negatives (`[retrieval] mask_siblings = true`; `swembed.pipeline.retrieval.sibling_groups`: pairs holding one "
     "text, or a sentence of 6+ words that at most 4 pairs hold, and those linked through them: 81.0k of the 99k "
     "training pairs have a sibling, mostly an abstract's two pseudo-queries, whose passages are the abstract but a "
     "sentence, and the lexical cells draw them into one batch), from the reference's stages (`swembed build "
     "--recipe lab/pipelines/minilm-256-sci-sib.toml --data-mirror ../shared/data`: distillation onward)",
     "passage_windows-sib.json", "minilm-256-sci-sib-windows.json", "minilm-256-sci-sib.json"),
    ("minilm-256-sci-rq", "the contrastive InfoNCE in the query direction only (`[retrieval] directions = "
     "\"query\"`: each query picks its passage among the batch's; the passage -> query half, which a search never "
     "asks, dropped), from the reference's stages (`swembed build --recipe lab/pipelines/minilm-256-sci-rq.toml "
     "--data-mirror ../shared/data`)",
     "passage_windows-rq.json", "minilm-256-sci-rq-windows.json", "minilm-256-sci-rq.json"),
    ("minilm-256-sci-rtau03", "the contrastive temperature apart from the KD's: 0.03 against 0.05 (`[retrieval] tau "
     "= 0.03`), a sharper softmax weighing the hardest in-batch passages more, from the reference's stages "
     "(`swembed build --recipe lab/pipelines/minilm-256-sci-rtau03.toml --data-mirror ../shared/data`)",
     "passage_windows-rtau03.json", "minilm-256-sci-rtau03-windows.json", "minilm-256-sci-rtau03.json"),
    ("minilm-256-sci-rtau10", "the other way, chosen after the row above fell: the contrastive temperature at 0.1 "
     "(`[retrieval] tau = 0.1`), a softer softmax spreading the gradient over more of the batch, from the "
     "reference's stages (`swembed build --recipe lab/pipelines/minilm-256-sci-rtau10.toml --data-mirror "
     "../shared/data`)",
     "passage_windows-rtau10.json", "minilm-256-sci-rtau10-windows.json", "minilm-256-sci-rtau10.json"),
    ("minilm-256-sci-seed1", "the noise floor of the rule: the reference's recipe with another seed (`seed = 1`: the "
     "extract's sentence draws, the PCA sample, the distillation's batches and cells) on the same machine "
     "(`swembed build --recipe lab/pipelines/minilm-256-sci-seed1.toml --data-mirror ../shared/data`: the extract "
     "onward)",
     "passage_windows-seed1.json", "minilm-256-sci-seed1-windows.json", "minilm-256-sci-seed1.json"),
    ("minilm-256-sci-hn", "hard negatives from the table itself: each pair's 8 nearest passages by the table "
     "distillation starts from (the PCA'd extract), among a random 8,192 of the training pairs' passages, its "
     "siblings left out, and one of them scored beside the batch's passages by each query a step (`[retrieval] "
     "hard_negatives = 8`; mined in 5.6 s; a training step 1.37 times the reference's, 39.7 against 54.8 steps/s, "
     "distillation 732 s against 615 s in all), from the reference's stages (`swembed build --recipe "
     "lab/pipelines/minilm-256-sci-hn.toml --data-mirror ../shared/data`)",
     "passage_windows-hn.json", "minilm-256-sci-hn-windows.json", "minilm-256-sci-hn.json"),
    ("minilm-256-sci-hn-seed1", "the same lever on the second seed, against `minilm-256-sci-seed1` (set down before "
     "it ran: a pass under the 0.29 spread between CPU kinds is re-run on seed 1 and judged on the mean of its two "
     "differences; `swembed build --recipe lab/pipelines/minilm-256-sci-hn-seed1.toml --data-mirror ../shared/data`: "
     "distillation onward from that build's stages)",
     "passage_windows-hn-seed1.json", "minilm-256-sci-hn-seed1-windows.json", "minilm-256-sci-hn-seed1.json"),
    ("minilm-256-sci-hn64", "hard negatives at about the reference's cost, chosen after the two rows above: 64 pairs "
     "a step instead of 128, so a step reads 128 passages as the reference's does (64 of the batch, 64 mined) "
     "and half the queries (`[retrieval] hard_negatives = 8`, `batch_size = 64`; 50.1 steps/s against the "
     "reference's 54.8, distillation 680 s against 615 s in all); set down before it ran: built on both seeds, "
     "judged on the mean of the two differences (`swembed build --recipe lab/pipelines/minilm-256-sci-hn64.toml "
     "--data-mirror ../shared/data`, from the reference's stages)",
     "passage_windows-hn64.json", "minilm-256-sci-hn64-windows.json", "minilm-256-sci-hn64.json"),
    ("minilm-256-sci-hn64-seed1", "the same on the second seed, against `minilm-256-sci-seed1` (`swembed build "
     "--recipe lab/pipelines/minilm-256-sci-hn64-seed1.toml --data-mirror ../shared/data`)",
     "passage_windows-hn64-seed1.json", "minilm-256-sci-hn64-seed1-windows.json", "minilm-256-sci-hn64-seed1.json"),
    ("minilm-256-sci-hn25k", "hard negatives nearer the reference's time by fewer steps, chosen after the rows "
     "above: `minilm-256-sci-hn` stopped at 25,000 steps instead of 30,000 (`[distill] max_steps = 25000`, "
     "`[retrieval] hard_negatives = 8`; its steps 1.37 times the reference's, its loop 642 s against 547 s, still 17% "
     "longer); set down before it ran: built on both seeds, judged on the mean of the two differences. On seed 0 its "
     "table is `minilm-256-sci-hn`'s to the bit: the held-out KD loss that picks the table was lowest at step 23,250 "
     "in both (a constant step size, so their first 25,000 steps are the same) (`swembed build --recipe "
     "lab/pipelines/minilm-256-sci-hn25k.toml --data-mirror ../shared/data`, from the reference's stages)",
     "passage_windows-hn25k.json", "minilm-256-sci-hn25k-windows.json", "minilm-256-sci-hn25k.json"),
    ("minilm-256-sci-hn25k-seed1", "the same on the second seed, against `minilm-256-sci-seed1` (`swembed build "
     "--recipe lab/pipelines/minilm-256-sci-hn25k-seed1.toml --data-mirror ../shared/data`)",
     "passage_windows-hn25k-seed1.json", "minilm-256-sci-hn25k-seed1-windows.json",
     "minilm-256-sci-hn25k-seed1.json"),
    ("minilm-256-sci-hn21k", "hard negatives in the reference's loop time, chosen after the rows above: "
     "`minilm-256-sci-hn` stopped at 21,000 steps (`[distill] max_steps = 21000`, `[retrieval] hard_negatives = 8`; "
     "21,000 of its steps take about the reference's 30,000 steps' 547 s here); set down before it ran: built on both "
     "seeds, judged on the mean of the two differences (`swembed build --recipe "
     "lab/pipelines/minilm-256-sci-hn21k.toml --data-mirror ../shared/data`, from the reference's stages)",
     "passage_windows-hn21k.json", "minilm-256-sci-hn21k-windows.json", "minilm-256-sci-hn21k.json"),
    ("minilm-256-sci-hn21k-seed1", "the same on the second seed, against `minilm-256-sci-seed1` (`swembed build "
     "--recipe lab/pipelines/minilm-256-sci-hn21k-seed1.toml --data-mirror ../shared/data`)",
     "passage_windows-hn21k-seed1.json", "minilm-256-sci-hn21k-seed1-windows.json",
     "minilm-256-sci-hn21k-seed1.json"),
]
SEEDED_LEVERS = ("hn", "hn64", "hn25k", "hn21k")  # levers built on both seeds of the zen4 reference
WINDOWED_AGAINST = {"minilm-256-sci-pq3": "minilm-256-sci-intel", "minilm-380-sci-intel": "minilm-256-sci-intel",
                    **{f"minilm-256-sci-{lever}": "minilm-256-sci-zen4"
                       for lever in ("sib", "rq", "rtau03", "rtau10", "seed1", *SEEDED_LEVERS)},
                    **{f"minilm-256-sci-{lever}-seed1": "minilm-256-sci-seed1" for lever in SEEDED_LEVERS}}
WINDOWED_TWINS = {"minilm-256-sci-intel": "the spread between CPU kinds' builds",  # the same recipe built again
                  "minilm-256-sci-zen4": "the spread between CPU kinds' builds",
                  "minilm-256-sci-seed1": "the spread between two seeds on one CPU"}
# a lever's second build (another CPU kind or seed): judged on the mean of both builds' differences
WINDOWED_REPLICATES = {"minilm-380-sci-intel": "minilm-380-sci-v2",
                       **{f"minilm-256-sci-{lever}-seed1": f"minilm-256-sci-{lever}" for lever in SEEDED_LEVERS}}


def windowed_tables_section() -> list[str]:
    """Search tables against the reference, each with the product's windows: dev first (lab.passage_windows' JSON,
    STS-B dev; adopted by the rule: the dense dev mean up more than 0.1, the hybrid's not down), then test."""
    from lab.passage_windows import PRODUCT_LEVER, dev_mean
    from swembed.runtime.windows import ALPHA  # the product's hybrid weight beside windows

    folder = ROOT / "reports" / "mteb"
    header = ["table", "dense dev, whole passages", "dense dev, windows", "hybrid dev, windows", "STS-B dev",
              "SciFact dense", "SciFact hybrid", "five-task mean", "STS avg7"]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    rows: dict[str, list[float | None]] = {}
    gains_of: dict[str, list[float | None]] = {}
    verdicts = []
    for name, change, windows_json, scores_json, sts_json in WINDOWED_TABLES:
        if not (folder / windows_json).is_file():
            continue
        found = json.loads((folder / windows_json).read_text(encoding="utf-8"))
        test = _json_scores(SCORES, scores_json.removesuffix(".json"))
        sts = _json_scores(STS, sts_json.removesuffix(".json"))
        hybrid = found["hybrid"][PRODUCT_LEVER][str(ALPHA)]
        row = rows[name] = [dev_mean(found["dense"]["whole passages"]), dev_mean(found["dense"][PRODUCT_LEVER]),
                            dev_mean(hybrid), sts.get("STS-B dev"), test.get("SciFact"), hybrid["SciFact"],
                            test.get("mean"), sts.get("avg")]
        lines.append(f"| `{name}` | " + " | ".join("—" if c is None else f"{c:.2f}" for c in row) + " |")
        against = WINDOWED_AGAINST.get(name, next(iter(rows)))
        if against != name and against in rows:
            gains = gains_of[name] = [None if c is None or r is None else c - r for c, r in zip(row, rows[against])]
            first = gains_of.get(WINDOWED_REPLICATES.get(name, ""))
            judged = gains if first is None else [None if g is None or f is None else (g + f) / 2
                                                   for g, f in zip(gains, first)]
            adopted = judged[1] is not None and judged[1] > 0.1 and judged[2] is not None and judged[2] >= 0
            shown = ", ".join(f"{what} {g:+.2f}" for what, g in zip(
                ["dense dev whole", "dense dev windows", "hybrid dev", "STS-B dev", "SciFact dense",
                 "SciFact hybrid", "five-task mean", "avg7"], gains) if g is not None)
            reference = "the reference" if against == next(iter(rows)) else f"`{against}`"
            verdict = (f"The same recipe: {WINDOWED_TWINS[name]}, not a lever." if name in WINDOWED_TWINS else
                       "**Passes the dev rule.**" if adopted else "Fails the dev rule: not adopted.")
            if first is not None:
                means = ", ".join(f"{what} {g:+.2f}" for what, g in zip(
                    ["dense dev windows", "hybrid dev", "SciFact dense", "five-task mean"],
                    [judged[1], judged[2], judged[4], judged[6]]) if g is not None)
                verdict = f"The mean of the two builds' differences: {means}. {verdict}"
            verdicts.append(f"* `{name}`: {change}. Against {reference}: {shown}. {verdict}")
    return ["#### Search tables beside windows (issue 82): levers judged with the product's windows", "",
            "<!-- generated: python -m lab.mteb_report (lab.mteb_report.WINDOWED_TABLES) -->", "",
            "Each table scored with the product's windows (8 words, gamma 0.5; the hybrid at alpha 0.8). Dev first: "
            "the four held-out sets of `lab.sci_splits`, nDCG@10 (`python -m lab.passage_windows TABLE --json "
            "reports/mteb/passage_windows-NAME.json`), and STS-B dev; a lever is adopted when the dense dev mean "
            "with windows gains more than 0.1 and the hybrid's does not fall. Then test: `swembed eval TABLE --suite "
            "mteb --data ../shared/data/eval-mteb --search dense --windows 8 --json "
            "reports/mteb/scores/NAME-windows.json`, `swembed eval TABLE --data ../shared/data/eval --json "
            "reports/mteb/sts/NAME.json`; the hybrid's SciFact from lab.passage_windows' JSON (its pytrec_eval "
            "gives mteb's score). — = not measured.", "", *lines, "", *verdicts, *_sibling_rates(folder), ""]


def _sibling_rates(folder: Path) -> list[str]:
    """What ``mask_siblings`` masks (``lab.sibling_batches``' JSON), or nothing before it has run."""
    path = folder / "sibling_batches.json"
    if not path.is_file():
        return []
    found = json.loads(path.read_text(encoding="utf-8"))
    return [f"* What `minilm-256-sci-sib` masks (`python -m lab.sibling_batches models/minilm-256-sci-zen4 "
            f"models/corpora/sci/pairs.tsv.gz models/corpora/sci/pseudo.tsv.gz --json {path.relative_to(ROOT)}`): "
            f"{100 * found['with a sibling']:.1f}% of the {found['pairs']:,} training pairs have a sibling; "
            f"{100 * found['cells']:.1f}% of the batch rows the lexical cells draw hold one in their batch, against "
            f"{100 * found['random']:.1f}% of random batches' rows."]


def _section(path: Path) -> list[str]:
    """The lines of a subsection another lab script generates (``lab.query_weights``, ``lab.lexical_weights``,
    ``lab.search_time_levers``), or none before it has."""
    return [*path.read_text(encoding="utf-8").rstrip().splitlines(), ""] if path.is_file() else []


def render(data: Path, intro: str) -> str:
    parts = ["# Beyond STS: five English MTEB tasks", "",
             "<!-- generated by `python -m lab.mteb_report`; do not edit by hand -->", "",
             intro.strip(), "", "## Search (issue 57): the scientific text, documents and pairs", "",
             "<!-- generated: python -m lab.mteb_report (rows: lab.mteb_report.SEARCH_ROWS and their commands) -->",
             "", *search_table(), "", *_section(ROOT / "reports" / "mteb" / "query_weights.md"),
             *_section(ROOT / "reports" / "mteb" / "lexical_weights.md"),
             *_section(ROOT / "reports" / "mteb" / "search_time_levers.md"),
             *_section(ROOT / "reports" / "mteb" / "passage_windows.md"),
             *_section(ROOT / "reports" / "mteb" / "window_shortlist.md"),
             *_section(ROOT / "reports" / "mteb" / "lexical_windows.md"),
             *_section(ROOT / "reports" / "mteb" / "corpus_idf.md"),
             *_section(ROOT / "reports" / "mteb" / "query_expansion.md"),
             *_section(ROOT / "reports" / "mteb" / "lexical_weights-windows.md"),
             *windowed_tables_section(),
             *_section(ROOT / "reports" / "mteb" / "pooled_dev.md"),
             "## Test scores (MTEB main score x100)", "",
             "<!-- generated: python -m lab.mteb_report (rows: the commands below) -->", "", *score_table(data), "",
             "Commands (each measured row):", "", *commands(), "",
             "## Levers, chosen on dev data only", "",
             "Dev = the classifiers' train rows (every fifth held out, MTEB's undersampling and classifier on the "
             "rest), a retrieval dev set of sentence -> surrounding-paragraph pairs from WikiText-2 and the gensim "
             "Wikipedia sample, a docstring retrieval dev set (summary line -> description of the functions and "
             "classes of seven installed Python libraries: text no build read, with unknown words), STS-B dev, and "
             "for the `[retrieval]` rows the held-out Debian summary -> description pairs (pairs dev) "
             "(`lab/mteb_levers.py` says how each is made; — = not scored).", "",
             *lever_tables()]
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data/eval-mteb", help="the eval-mteb folder")
    parser.add_argument("--intro", default=str(ROOT / "reports" / "mteb" / "intro.md"),
                        help="Markdown placed above the tables (findings, written by hand)")
    parser.add_argument("--out", default=str(ROOT / "reports" / "mteb.md"))
    args = parser.parse_args(argv)
    intro = Path(args.intro).read_text(encoding="utf-8") if Path(args.intro).is_file() else ""
    out = Path(args.out)
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text(render(Path(args.data), intro), encoding="utf-8")
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
