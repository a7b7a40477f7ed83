"""Where a kernel's instructions go, from Nsight Compute's source page (`make profile-rowwise-sass`):
    ncu --import run.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 bench/ncu_source_summary.py sass.csv [--show COUNT] [--ops]
Per kernel: the warp instructions executed, then the SASS grouped by how often each instruction ran.
Instructions that ran equally often are one part of the kernel: in the staged kernels (a block per
row) the count rows x warps is the per-row prologue and reductions, a multiple of it a loop along the
row. --show COUNT prints the instructions of the group that ran COUNT times. --ops adds the executed
instructions by opcode, in units of the largest group's count (per warp and row where a loop is
unrolled), and where in the executed order the global loads issue: two kernels of the same layout
compared this way show what one does that the other does not.
"""
import csv
import re
import sys
from collections import Counter, defaultdict


def kernels(path):
    """(name, rows) per kernel in the export: each starts with a "Kernel Name" row, then a header."""
    found, name, rows = [], None, []
    for row in csv.reader(open(path, newline="")):
        if row and row[0] == "Kernel Name":
            if name:
                found.append((name, rows))
            name, rows = row[1], []
        elif name:
            rows.append(row)
    if name:
        found.append((name, rows))
    return found


def opcode(text):
    """The opcode of a SASS line, without its predicate and modifiers: '@!P0 LDG.E.128 ...' -> 'LDG'."""
    return re.sub(r"^@!?U?P\w+\s+", "", text.strip()).split()[0].split(".")[0]


def summarize(name, rows, show=None, ops=False):
    header, body = rows[0], rows[1:]
    source, executed = header.index("Source"), header.index("Instructions Executed")
    counts = [(row[source], int(row[executed] or 0)) for row in body if len(row) > executed]
    total = sum(count for _, count in counts)
    print(f"{name}\n  {total} warp instructions executed")
    groups = defaultdict(list)
    for text, count in counts:
        if count:
            groups[count].append(text)
    ranked = sorted(groups.items(), key=lambda item: -item[0] * len(item[1]))
    for count, texts in ranked:
        share = count * len(texts) / total
        if share >= 0.01:
            print(f"  {len(texts):5d} instructions x {count:>10d} = {100 * share:5.1f}%")
        if show == count:
            print("\n".join(f"      {text}" for text in texts))
    if ops and ranked:
        unit = ranked[0][0]
        by_opcode = Counter()
        for text, count in counts:
            by_opcode[opcode(text)] += count / unit
        print(f"  by opcode, per {unit} executions: " +
              ", ".join(f"{op} {n:.1f}" for op, n in by_opcode.most_common() if n >= 0.05))
        executed_lines = [text for text, count in counts if count]
        print("  global loads at executed instructions " +
              " ".join(str(i) for i, text in enumerate(executed_lines) if opcode(text) == "LDG"))


def main(argv):
    show = int(argv[argv.index("--show") + 1]) if "--show" in argv else None
    ops = "--ops" in argv
    flags = {"--ops", "--show"} | ({argv[argv.index("--show") + 1]} if show is not None else set())
    path = next(arg for arg in argv[1:] if arg not in flags)  # the options before or after it
    seen = []
    for name, rows in kernels(path):
        if (name, rows) in seen:  # ncu 2025 printed each of a module's later kernels twice
            continue
        seen.append((name, rows))
        summarize(name, rows, show, ops)


if __name__ == "__main__":
    main(sys.argv)
