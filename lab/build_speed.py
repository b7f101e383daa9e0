"""Build speed from built model folders: each build's stage table (every stage that ran, cached ones marked), the
plan's extract estimate against the extract it measured, and the CPU it ran on, as recorded in each folder's
config.json (``build.plan``, ``build.stages``, ``build.device``). Nothing is rebuilt here: build first, e.g.

    /usr/bin/time -f "%e s" swembed build --teacher minilm --dim 256 --out models/minilm-256-timed
    python -m lab.build_speed models/minilm-256-timed --save reports/build-speed/NAME.json --block NAME \
        --into reports/build-times.md

Run: ``python -m lab.build_speed MODEL [MODEL ...] [--wall FOLDER=SECONDS ...] [--note TEXT] [--into FILE]``:
``--into`` replaces the generated block of FILE (between its begin and end markers, named by ``--block``; appended
where absent). ``--save FILE`` keeps the build records, walls and note as JSON (a machine here may come back wiped,
the folders with it), and ``--records FILE`` regenerates the block from that JSON instead of the folders.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path


def markers(block: str | None) -> tuple[str, str]:
    """The begin and end lines of a generated block (the unnamed one, or ``block``'s)."""
    name = f"lab.build_speed {block}" if block else "lab.build_speed"
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def read_build(folder: Path) -> dict:
    """The build record of a model folder's config.json."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if "build" not in config:
        raise SystemExit(f"{folder}: its config.json has no build record (not made by swembed build)")
    return config["build"]


def plan_row(folder: Path, build: dict) -> str:
    """One Markdown row: the plan's extract estimate beside the measured extract."""
    device, extract = build.get("device", {}), build["stages"].get("extract", {})
    estimate = build.get("plan", {}).get("estimated_extract_s")
    measured = extract.get("wall_s")
    stats = extract.get("stats", {})
    if extract.get("cached") or not estimate or not measured:
        ratio = "n/a (extract cached or untimed)"
    else:
        ratio = f"{100 * (estimate - measured) / measured:+.0f}%"
    return (f"| `{folder}` | {device.get('name', '?')} (native bf16: {device.get('native_bf16', '?')}) | "
            f"{stats.get('teacher_dtype', '?')} on {stats.get('teacher_runtime', '?')} | "
            f"{estimate} s | {measured} s | {ratio} |")


def stage_table(folder: Path, build: dict, wall: float | None) -> list[str]:
    """The build's stage table: every stage that ran (cached ones marked), with its total."""
    lines = [f"### Stage table: `{folder}`", "", "| stage | wall s | peak MB | note |", "|---|---|---|---|"]
    total = 0.0
    for name, stage in build["stages"].items():
        note = "cached" if stage.get("cached") else ""
        if not stage.get("cached"):
            total += float(stage.get("wall_s", 0.0))
        lines.append(f"| {name} | {stage.get('wall_s', '')} | {stage.get('peak_rss_mb', '')} | {note} |")
    lines.append(f"| **stages run** | **{total:.1f}** | | |")
    if build.get("total_wall_s") is not None:
        lines.append(f"| build (its own clock) | {build['total_wall_s']} | | |")
    if wall is not None:
        lines.append(f"| command (`/usr/bin/time`) | {wall} | | |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.build_speed", description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--wall", nargs="*", default=[], help="FOLDER=SECONDS: the command's wall time, measured")
    parser.add_argument("--note", default="", help="a line on the machine's state (load, other jobs)")
    parser.add_argument("--into", type=Path, help="a Markdown file whose generated block this replaces")
    parser.add_argument("--block", help="the generated block's name (several blocks can share one file)")
    parser.add_argument("--save", type=Path, help="write the build records, walls and note to this JSON file")
    parser.add_argument("--records", type=Path, help="regenerate from a JSON file --save wrote, not from folders")
    args = parser.parse_args(argv)
    if args.records and (args.models or args.wall or args.note):
        parser.error("--records regenerates a saved block: it takes no model folders, --wall or --note")
    if args.records:
        saved = json.loads(args.records.read_text(encoding="utf-8"))
        builds = {Path(k): v for k, v in saved["builds"].items()}
        walls = {Path(k): float(v) for k, v in saved["walls"].items()}
        note, day = saved["note"], saved["date"]
        command = f"python -m lab.build_speed --records {args.records}"
    elif args.models:
        walls = {Path(k): float(v) for k, v in (item.split("=", 1) for item in args.wall)}
        builds = {folder: read_build(folder) for folder in args.models}
        note, day = args.note, date.today().isoformat()
        shown = [str(folder) for folder in args.models] + (["--wall", *args.wall] if args.wall else [])
        command = "python -m lab.build_speed " + " ".join(shown) + (" --note TEXT" if args.note else "")
    else:
        parser.error("name model folders or --records FILE")
    if args.save:
        record = {"date": day, "note": note, "walls": {str(k): v for k, v in walls.items()},
                  "builds": {str(k): v for k, v in builds.items()}}
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        command = f"python -m lab.build_speed --records {args.save}"
    block = f" --block {args.block}" if args.block else ""
    begin, end = markers(args.block)
    header = "| model | CPU | teacher | plan's estimate | extract measured | estimate off by |"
    title = f"Build speed{f' ({args.block})' if args.block else ''}: stage tables and the plan's estimate ({day})"
    source = "each build's record (the `build` of its folder's config.json, kept in the JSON file)"
    lines = [begin, f"## {title}", "", f"Generated by `{command}{block} --into FILE` from {source}. {note}", "",
             "### The plan's extract estimate against the measured extract", "",
             f"<!-- generated: {command}{block} --into FILE -->", header, "|---|---|---|---|---|---|",
             *(plan_row(folder, build) for folder, build in builds.items()), ""]
    for folder, build in builds.items():
        lines += stage_table(folder, build, walls.get(folder))
    text = "\n".join([*lines, end])
    if args.into:
        old = args.into.read_text(encoding="utf-8") if args.into.is_file() else ""
        if begin in old and end in old:
            new = old[: old.index(begin)] + text + old[old.index(end) + len(end):]
        else:
            new = old.rstrip("\n") + "\n\n" + text + "\n"
        args.into.write_text(new, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
