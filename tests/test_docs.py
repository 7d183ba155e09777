"""Docs that cannot rot: every link and anchor in the README and the guides resolves, every `bertforge VERB
--flag` they show is a flag of that verb, and the command-line reference is what the parser prints."""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bertforge.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Findings keep old commands as they were run, so only their links are checked, not their flags.
PAGES = [*GUIDES, *sorted((ROOT / "experiments").glob("*.md")), ROOT / "benchmarks" / "README.md"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```", re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = CODE.sub("", page.read_text(encoding="utf-8"))
    headings = {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    return headings | set(re.findall(r'<a id="([^"]+)"></a>', text))


def links(page: Path) -> list[str]:
    text = CODE.sub("", page.read_text(encoding="utf-8"))
    return [a or b for a, b in LINK.findall(text)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto: — not ours to check offline
        path_part, _, anchor = target.partition("#")
        file = (page.parent / path_part).resolve() if path_part else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(page):
    broken = broken_links(page)
    assert not broken, "\n".join(broken)


def test_the_link_check_can_fail(tmp_path):
    (tmp_path / "other.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text("# Top\n[ok](other.md#a-heading) [self](#top) [gone](missing.md) [bad](other.md#no-heading)\n")
    assert broken_links(page) == ["missing.md: no such file", "other.md#no-heading: no heading #no-heading in other.md"]


@functools.cache
def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    found = {}

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}"] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(build_parser(), "")
    return found


def shown_commands(text: str) -> list[tuple[str, list[str]]]:
    """(verb, flags) of each `bertforge ...` command in a page: in code blocks and inline code alike."""
    parsers = verb_parsers()
    commands = []
    text = re.sub(r"\\\n\s*", " ", text)  # a command continued on the next line is one command
    for segment in re.split(r"[`\n;|]|&&", text):
        match = re.search(r"\bbertforge ((?:[a-z-]+ ?){1,2})(.*)", segment)
        if not match:
            continue
        words = match.group(1).split()
        verb = " ".join(words[:2]) if " ".join(words[:2]) in parsers else words[0]
        if verb not in parsers:
            continue
        commands.append((verb, re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", match.group(2) + " " + match.group(1))))
    return commands


def unknown_flags(text: str) -> list[str]:
    parsers = verb_parsers()
    unknown = []
    for verb, flags in shown_commands(text):
        known = {option for action in parsers[verb]._actions for option in action.option_strings}
        unknown += [f"bertforge {verb} {flag}" for flag in flags if flag not in known]
    return sorted(set(unknown))


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_flag_shown_is_a_flag_of_its_verb(page):
    unknown = unknown_flags(page.read_text(encoding="utf-8"))
    assert not unknown, "\n".join(unknown)


def test_the_flag_check_can_fail():
    page = """run `bertforge prepare corpus --tokenizer tok --no-such-flag`, then
```bash
bertforge tokenizer train corpus --out tok \\
    --vocab-size 8000 --made-up
bertforge pretrain --data data --out run; bertforge evaluate run --bogus
```"""
    assert unknown_flags(page) == [
        "bertforge evaluate --bogus",
        "bertforge prepare --no-such-flag",
        "bertforge tokenizer train --made-up",
    ]


def test_the_command_line_reference_is_what_the_parser_prints():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_fine_tuning_guide_has_a_row_for_every_task_in_the_registry():
    """docs/finetuning.md's table of tasks is prose, written by hand; its rows are the registry's tasks, in order, so
    a task added to the registry is added to the guide."""
    from bertforge.tasks.registry import TASKS

    page = (ROOT / "docs" / "finetuning.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z-]+)`(?: \(default\))? \| (?!input)", page, re.M)
    assert rows == [record.name for record in TASKS.records() if record.built_in]
