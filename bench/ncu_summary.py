"""One line per profiled kernel from an `ncu --csv --metrics ...` file (one row per metric):
the kernel's short name and each metric's value, in launch order.
    python3 bench/ncu_summary.py ncu.csv
"""
import csv
import re
import sys

SHORT = {"gpu__time_duration.sum": "us", "sm__inst_executed.sum": "warp-inst", "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
         "launch__registers_per_thread": "regs", "launch__grid_size": "grid", "launch__block_size": "block",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
         "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%",
         "launch__occupancy_limit_registers": "blk/SM(regs)", "lts__t_sector_hit_rate.pct": "L2hit%",
         "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "wait:barrier",
         "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "wait:memory",
         "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio": "wait:membar",
         "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": "wait:lsu",
         "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio": "wait:sleep",
         "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio": "wait:shared",
         "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": "wait:mio",
         "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": "wait:math",
         "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": "wait:fixed",
         "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": "wait:not-selected",
         "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio": "wait:dispatch",
         "launch__occupancy_limit_shared_mem": "blk/SM(smem)",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor%",
         "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "smem-conflicts",
         "smsp__inst_executed_op_ldsm.sum": "ldmatrix",
         "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed": "smem%"}


def short_name(kernel):
    kernel = re.sub(r"<unnamed>|\(anonymous namespace\)", "anonymous", kernel)
    name = re.sub(r"\(.*", "", kernel.split("<")[0]).split("::")[-1]
    attention = re.search(r"lab::anonymous::(attention_\w+_kernel)<__nv_(\w+), ([\d, ]+)>", kernel)
    if attention:  # the element type and the tile shape: head dim, query rows, key rows (, warps)
        return f"{attention.group(1)}<{attention.group(2)}, {attention.group(3)}>"
    reducer = re.search(r"lab::anonymous::(\w+Reducer)<([^,>]+)", kernel)
    if reducer:
        return f"{name}<{reducer.group(1)}<{reducer.group(2)}>>"
    row_op = re.search(r"lab::(rows_\w+)<lab::(\w+(?:<[^>]*>)?), ([^,>]+)(?:, (\d+))?>", kernel)
    if row_op:
        return f"{row_op.group(1)}<{row_op.group(2)}, {row_op.group(3)}{', ' + row_op.group(4) if row_op.group(4) else ''}>"
    return name[:60]


def main(path):
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    kernels = {}
    for row in csv.DictReader(lines):
        entry = kernels.setdefault(row["ID"], {"name": short_name(row["Kernel Name"])})
        value = row["Metric Value"].replace(",", "")
        if row["Metric Name"] == "gpu__time_duration.sum" and row["Metric Unit"] in ("nsecond", "ns"):
            value = f"{float(value) / 1000:.1f}"
        entry[SHORT.get(row["Metric Name"], row["Metric Name"])] = value
    columns = [c for c in SHORT.values() if any(c in k for k in kernels.values())]
    print(f"{'id':>4s} {'kernel':60s} " + " ".join(f"{c:>12s}" for c in columns))
    for kid, entry in kernels.items():
        print(f"{kid:>4s} {entry['name'][:60]:60s} " + " ".join(f"{entry.get(c, '-'):>12s}" for c in columns))


if __name__ == "__main__":
    main(sys.argv[1])
