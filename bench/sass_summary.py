"""Instruction mix of selected kernels in `cuobjdump -sass` output (read from stdin): for each
function whose mangled name matches every pattern given, the count of each opcode, then its SASS -
or, with --order, a map of the kernel in program order, one letter an instruction, that shows where
its global loads sit against its arithmetic (`make sass-order`, which needs nvcc but no GPU).

    cuobjdump -sass lab/lab*.so | python3 bench/sass_summary.py elementwise_vectorized AddOp
    cuobjdump -sass rowwise_norms.cubin | python3 bench/sass_summary.py --order NormBackward WholeTiles

A whole library's SASS runs to hundreds of megabytes; this keeps the few kernels being studied."""
import collections
import re
import sys

INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")

# --order's letters, by the opcode's first part: loads and stores of device and shared memory,
# barriers, float arithmetic, conversions and byte moves (unpacking bf16 pairs), shuffles, branches.
ORDER_LETTERS = {"LDG": "G", "STG": "W", "LDS": "s", "STS": "S", "BAR": "B", "SHFL": "U",
                 "FFMA": "F", "FADD": "F", "FMUL": "F", "FMNMX": "F", "MUFU": "F",
                 "PRMT": "H", "F2F": "H", "F2FP": "H", "HADD2": "H", "SHF": "H",
                 "BRA": "J", "BSSY": "J", "BSYNC": "J", "EXIT": "J", "RET": "J", "CALL": "J"}
ORDER_KEY = ("G global load, W global store, s/S shared load/store, B barrier, F float arithmetic, "
             "H conversion or byte move, U shuffle, J branch, . anything else")


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


def opcodes(body):
    """The function's opcodes in program order."""
    return [match.group(1) for match in map(INSTRUCTION.match, body) if match]


def order_map(ops):
    """One letter an instruction (ORDER_KEY), in program order."""
    return "".join(ORDER_LETTERS.get(op.split(".")[0], ".") for op in ops)


def loads_ahead(ops, window=16):
    """The global loads issued before the kernel's arithmetic starts in earnest - the first float op
    that begins a run of `window` instructions at least half float arithmetic (a lone float op in the
    address math does not count) - and all its global loads."""
    letters = order_map(ops)
    start = next((i for i, letter in enumerate(letters)
                  if letter == "F" and letters[i:i + window].count("F") * 2 >= window), len(letters))
    return letters[:start].count("G"), letters.count("G")


def main(args):
    order = "--order" in args
    patterns = [a for a in args if a != "--order"]
    if order:
        print(f"one letter an instruction: {ORDER_KEY}\n")
    for name, body in functions(sys.stdin):
        if not all(p in name for p in patterns):
            continue
        ops = opcodes(body)
        if order:
            ahead, loads = loads_ahead(ops)
            print(f"== {name}: {len(ops)} instructions, {ahead} of its {loads} global loads before the "
                  "arithmetic starts")
            letters = order_map(ops)
            print("\n".join(f"  {i:5d} {letters[i:i + 100]}" for i in range(0, len(letters), 100)))
            print()
            continue
        counts = collections.Counter(ops)
        print(f"== {name}: {len(ops)} instructions")
        print("   " + ", ".join(f"{op} {n}" for op, n in counts.most_common()))
        print("\n".join(line for line in body if re.match(r"\s*/\*[0-9a-f]{4}\*/", line)))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
