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


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(DOCS) if f.endswith(".md")))
def test_docs_exist_and_are_linked_from_the_readme(name):
    assert os.path.exists(os.path.join(DOCS, name))
    assert f"docs/{name}" in open(os.path.join(ROOT, "README.md")).read()


# Words that point at nothing a reader has: the work sessions and tracker issues the project was built
# in ("the issue asked" as much as "issue 5"), a design file outside the repository, "the seed" (the
# example lab began from). A measurement is
# named by its date, commit and command; the design is docs/design.md.
# ("issues N" as a verb - a warp issues 84 instructions - is fine; "issues 5 and 6" would not be.)
DANGLING = re.compile(r"\b[Ss]essions? \d+|\b[Ii]ssue \d+|\bIssues \d+|\b[Ii]ssues \d+(?:'s|,| and)|\bDESIGN\.md\b|"
                      r"\b[Tt]he seed's\b|\bseed example\b|\b[Tt]he issue(?:'s| asked| says| wants)\b")
TEXT_FOLDERS = ["docs", "src", "lab", "examples", "bench", "tests"]
TEXT_ENDINGS = (".md", ".py", ".c", ".h", ".cu", ".cuh", ".def", ".pyi")


def repository_text_files():
    yield from ("README.md", "Makefile", "setup.py", "pyproject.toml", os.path.join(".ci", "run"))
    for folder in TEXT_FOLDERS:
        for base, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if d not in ("results", "__pycache__", "include")]
            for name in files:
                if name.endswith(TEXT_ENDINGS):
                    yield os.path.relpath(os.path.join(base, name), ROOT)


@pytest.mark.parametrize("path", sorted(set(repository_text_files())))
def test_repository_text_stands_on_its_own(path):
    if path == os.path.join("tests", "test_docs.py"):
        return  # the pattern above
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    found = [m.group(0) for m in DANGLING.finditer(text)]
    assert not found, f"{path} names what the repository does not hold: {found[:5]}"


def test_the_call_structures_picture_is_the_scripts_output():
    """docs/call-structures.svg is drawn by docs/draw_call_structures.py: the committed picture must be
    what the script draws now (run it after changing either)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("draw_call_structures", os.path.join(DOCS, "draw_call_structures.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert open(os.path.join(DOCS, "call-structures.svg")).read() == script.svg()


# ---- every name a reader's document gives must exist ----
# The reader's documents: the front page, the contributors' guide, the chapters, the lessons' and
# examples' and benchmarks' READMEs. docs/notebook/ is a log of what was tried, dated, and may name
# what has since gone; bench/results is data.

def reader_documents():
    yield from (p for p in ("README.md", "CONTRIBUTING.md") if os.path.exists(os.path.join(ROOT, p)))
    for base, dirs, files in os.walk(ROOT):
        rel = os.path.relpath(base, ROOT)
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("notebook", "results", "build", "__pycache__",
                                                                          "include", "node_modules")]
        if rel.split(os.sep)[0] not in ("docs", "examples", "bench"):
            continue
        for name in files:
            if name.endswith(".md"):
                yield os.path.relpath(os.path.join(base, name), ROOT)


READER_DOCS = sorted(set(reader_documents()))
SYMBOL = re.compile(r"\blab_[a-z0-9_]*[a-z0-9]\b")
PATH = re.compile(r"(?<![\w/.-])((?:src|bench|tests|examples|docs|lab|\.ci)/[\w/.*-]*[\w/*])")
MAKE_TARGET = re.compile(r"`make ([a-z][\w-]*)")
EXAMPLE_NUMBER = re.compile(r"\b[Ee]xamples? (\d\d?)\b")


def source_words():
    words = set()
    for folder in ("src", "lab", "examples", "bench", "tests"):
        for base, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if d not in ("results", "__pycache__", "build")]
            for name in files:
                if name.endswith((".c", ".h", ".cu", ".cuh", ".def", ".py", ".pyi")) and name != "test_docs.py":
                    words.update(re.findall(r"\b\w+\b", open(os.path.join(base, name), encoding="utf-8").read()))
    return words


def make_targets():
    return set(re.findall(r"^([a-z][\w-]*):", open(os.path.join(ROOT, "Makefile")).read(), re.M))


def stale_names(text, where, words, targets):
    """What `text` (from the file `where`) names that the repository does not have."""
    stale = [f"symbol {s}" for s in sorted(set(SYMBOL.findall(text))) if s not in words]
    for path in sorted(set(PATH.findall(text))):
        clean = path.rstrip(".")
        candidates = [os.path.join(ROOT, clean), os.path.join(ROOT, os.path.dirname(where), clean)]
        if not any(os.path.exists(c) or glob_exists(c) for c in candidates) and not git_ignores(clean):
            stale.append(f"path {path}")
    stale += [f"make target {t}" for t in sorted(set(MAKE_TARGET.findall(text))) if t not in targets]
    numbers = {name[:2] for name in os.listdir(os.path.join(ROOT, "examples")) if name[:2].isdigit()}
    stale += [f"example {n}" for n in sorted(set(EXAMPLE_NUMBER.findall(text))) if n.zfill(2) not in numbers]
    return stale


def git_ignores(path):
    """An output folder the build or a benchmark makes (bench/results/latest/): named, never committed."""
    import subprocess
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0


def glob_exists(path):
    import glob
    return "*" in path and bool(glob.glob(path))


@pytest.mark.parametrize("doc", READER_DOCS)
def test_a_readers_document_names_only_what_exists(doc):
    stale = stale_names(open(os.path.join(ROOT, doc), encoding="utf-8").read(), doc, WORDS, TARGETS)
    assert not stale, f"{doc} names what the repository does not have: {stale}"


WORDS, TARGETS = source_words(), make_targets()


def test_the_check_catches_a_planted_stale_symbol_path_and_target():
    planted = ("`lab_raise_shape` reports it (src/binding/no_such_file.c), `make no-such-target`, and "
               "example 99 shows it.")
    found = stale_names(planted, "README.md", WORDS, TARGETS)
    assert found == ["symbol lab_raise_shape", "path src/binding/no_such_file.c", "make target no-such-target",
                     "example 99"], found


def test_the_performance_page_is_the_scripts_output():
    """docs/performance.md is generated from bench/results by docs/make_performance.py: no number on it
    is copied by hand (run the script after adding results)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_performance", os.path.join(DOCS, "make_performance.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert open(os.path.join(DOCS, "performance.md")).read() == script.page()
