"""Recomputes the line ranges of the `path:start-end` `symbol` references in docs/*.md after the code
moved: each range becomes the symbol's definition, from its first line to its closing brace.
    python3 docs/update_references.py        (tests/test_docs.py checks the result)"""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = re.compile(r"`([\w/.]+):(\d+)-(\d+)`\s+`(\w+)`")  # a reference may wrap across a line


def python_definition_range(lines, symbol):
    """A Python def or class: its line through the last line indented under it."""
    for start, line in enumerate(lines):
        if re.match(rf"\s*(def|class) {symbol}\b", line):
            indent = len(line) - len(line.lstrip())
            end = start
            for k in range(start + 1, len(lines)):
                if lines[k].strip() and len(lines[k]) - len(lines[k].lstrip()) <= indent:
                    break
                if lines[k].strip():
                    end = k
            return start + 1, end + 1
    return None


def definition_range(path, symbol):
    lines = open(os.path.join(ROOT, path)).read().split("\n")
    if path.endswith(".py"):
        found = python_definition_range(lines, symbol)
        if found:
            return found
    for start, line in enumerate(lines):
        text = line.strip()
        if text.startswith(("/*", "*", "//", "#include")) or not re.search(rf"\b{symbol}\b", line):
            continue
        if not re.search(rf"\b{symbol}\b\s*(\(|=|\{{|\[)|struct {symbol}\b", line):
            continue
        depth, opened = 0, False
        for end in range(start, len(lines)):
            code = lines[end].split("//")[0]
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth <= 0:
                return start + 1, end + 1
    raise SystemExit(f"{path}: no definition of {symbol} found")


def update(text):
    def replace(match):
        path, _, _, symbol = match.groups()
        start, end = definition_range(path, symbol)
        separator = match.group(0)[match.group(0).index("`", 1) + 1:match.group(0).rindex("`", 0, -1)]
        return f"`{path}:{start}-{end}`{separator}`{symbol}`"  # keeps a line break where there was one
    return REFERENCE.sub(replace, text)


if __name__ == "__main__":
    docs = os.path.join(ROOT, "docs")
    for name in sorted(os.listdir(docs)):
        if name.endswith(".md"):
            full = os.path.join(docs, name)
            old = open(full).read()
            new = update(old)
            if new != old:
                open(full, "w").write(new)
                print(f"updated {name}")
