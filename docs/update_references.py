"""Recomputes the line ranges of the `path:start-end` `symbol` references in docs/*.md after the code
moved: each range becomes the symbol's definition, from its first line to its closing brace.
    python3 docs/update_references.py        (tests/test_docs.py checks the result)"""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = re.compile(r"`([\w/.]+):(\d+)-(\d+)`\s+`(\w+)`")  # a reference may wrap across a line


def definition_range(path, symbol):
    lines = open(os.path.join(ROOT, path)).read().split("\n")
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
