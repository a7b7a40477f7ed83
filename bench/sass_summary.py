"""Instruction mix of selected kernels in `cuobjdump -sass` output (read from stdin): for each
function whose mangled name matches every pattern given, the count of each opcode, then its SASS.

    cuobjdump -sass lab/lab*.so | python3 bench/sass_summary.py elementwise_vectorized AddOp

A whole library's SASS runs to hundreds of megabytes; this keeps the few kernels being studied."""
import collections
import re
import sys


def functions(lines):
    name, body = None, []
    for line in lines:
        match = re.match(r"\s*Function : (\S+)", line)
        if match:
            if name:
                yield name, body
            name, body = match.group(1), []
        elif name:
            body.append(line.rstrip())
    if name:
        yield name, body


def main(patterns):
    for name, body in functions(sys.stdin):
        if not all(p in name for p in patterns):
            continue
        opcodes = collections.Counter()
        for line in body:
            match = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
            if match:
                opcodes[match.group(1)] += 1
        print(f"== {name}: {sum(opcodes.values())} instructions")
        print("   " + ", ".join(f"{op} {n}" for op, n in opcodes.most_common()))
        print("\n".join(line for line in body if re.match(r"\s*/\*[0-9a-f]{4}\*/", line)))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
