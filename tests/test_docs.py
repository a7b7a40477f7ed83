"""The docs stay true to the code: every `path:start-end` `symbol` reference in docs/*.md names a
file that exists and a symbol that appears within those lines."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
REFERENCE = re.compile(r"`([\w/.]+):(\d+)-(\d+)`\s+`(\w+)`")  # a reference may wrap across a line


def references():
    for name in sorted(os.listdir(DOCS)):
        if name.endswith(".md"):
            text = open(os.path.join(DOCS, name)).read()
            for match in REFERENCE.finditer(text):
                yield pytest.param(name, *match.groups(), id=f"{name}:{match.group(4)}")


ALL = list(references())


def test_the_tour_has_references():
    assert sum(1 for p in ALL if p.values[0] == "tour.md") >= 20


@pytest.mark.parametrize("doc, path, start, end, symbol", ALL)
def test_reference_points_at_its_symbol(doc, path, start, end, symbol):
    full = os.path.join(ROOT, path)
    assert os.path.exists(full), f"{doc}: {path} does not exist"
    lines = open(full).read().split("\n")
    start, end = int(start), int(end)
    assert 1 <= start <= end <= len(lines), f"{doc}: {path}:{start}-{end} is outside the file"
    assert re.search(rf"\b{symbol}\b", "\n".join(lines[start - 1:end])), \
        f"{doc}: `{symbol}` is not in {path}:{start}-{end}"


@pytest.mark.parametrize("name", ["tour.md", "add-an-op.md", "protocols.md", "reductions.md"])
def test_docs_exist_and_are_linked_from_the_readme(name):
    assert os.path.exists(os.path.join(DOCS, name))
    assert f"docs/{name}" in open(os.path.join(ROOT, "README.md")).read()
