"""bench/sass_summary.py's reading of `cuobjdump -sass` (the SASS views `make sass-order` and `make
profile` print) checked on the CPU: the functions it splits, the opcodes it reads past predicates, and
where --order finds a kernel's global loads against its arithmetic."""
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import sass_summary  # noqa: E402


def sass(name, opcodes):
    """A function as cuobjdump prints it: a header, then one line an instruction with its address."""
    lines = [f"\t\tFunction : {name}", "\t.headerflags\t@\"EF_CUDA_SM90\""]
    lines += [f"        /*{16 * i:04x}*/                   {op} R0, R1 ;  /* 0x000fe20000000f00 */"
              for i, op in enumerate(opcodes)]
    return lines


def test_functions_split_and_opcodes_read_past_predicates():
    lines = sass("kernel_a", ["LDG.E.128", "@!P0 FFMA", "@P1 BRA"]) + sass("kernel_b", ["EXIT"])
    found = dict(sass_summary.functions(lines))
    assert list(found) == ["kernel_a", "kernel_b"]
    assert sass_summary.opcodes(found["kernel_a"]) == ["LDG.E.128", "FFMA", "BRA"]
    assert sass_summary.order_map(["LDG.E.128", "FFMA", "STS.128", "BAR.SYNC", "IMAD", "EXIT"]) == "GFSB.J"


def test_loads_ahead_counts_the_loads_before_the_arithmetic_starts_in_earnest():
    loads_first = ["LDG.E.128"] * 12 + ["FFMA"] * 20
    assert sass_summary.loads_ahead(loads_first) == (12, 12)
    # loads moved down among the arithmetic, as ptxas does with nothing between them
    interleaved = ["LDG.E.128"] * 4 + (["FFMA"] * 10 + ["LDG.E.128"] * 2) * 4
    assert sass_summary.loads_ahead(interleaved) == (4, 12)
    # a lone float op in the address math before the loads does not start the arithmetic
    assert sass_summary.loads_ahead(["FMUL"] + ["IMAD"] * 10 + ["LDG.E.128"] * 3 + ["FFMA"] * 16) == (3, 3)
    assert sass_summary.loads_ahead(["IMAD", "EXIT"]) == (0, 0)


def test_main_order_prints_each_matching_function(capsys, monkeypatch):
    text = "\n".join(sass("rows_Whole", ["LDG.E", "FFMA"]) + sass("rows_Partial", ["LDG.E"]))
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    sass_summary.main(["--order", "Whole"])
    out = capsys.readouterr().out
    assert "== rows_Whole: 2 instructions, 1 of its 1 global loads before the arithmetic starts" in out
    assert "rows_Partial" not in out and "      0 GF" in out
