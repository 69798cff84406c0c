"""Print the figures the benchmarks recorded (bench/results.py) as one table.

    python -m bench.table FILE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    path = Path(sys.argv[1])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    verdicts = {True: "met", False: "NOT MET", None: "-"}
    header = ("figure", "value", "judged by", "verdict")
    table = [header] + [(r["figure"], r["value"], r["judged_by"], verdicts[r["ok"]])
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    print("\nAll figures (ratios and bounds from this run):")
    for row in table:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[3])
    missed = sum(1 for r in rows if r["ok"] is False)
    print(f"\n  {len(rows)} figures, {missed} not met")


if __name__ == "__main__":
    main()
