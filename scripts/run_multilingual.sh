#!/usr/bin/env bash
# The bilingual builds of reports/multilingual.md, one after another (each reuses the cached English stages).
set -euo pipefail
cd "$(dirname "$0")/.."
for recipe in me5-en-de me5-en-zh me5-en-ja me5-en-de-no-abtt me5-multi me5-en-zh-jieba me5-en-ja-fugashi; do
  .venv/bin/swembed build --recipe "pipelines/$recipe.toml" --quiet
done
