"""Write each supermarket chain's baskets for the supermarket consortium example.

Stands in for each chain's own export of its customers' baskets: the 6,000 retail
baskets shipped with ppdm (``ppdm.data.retail_sample``), split at random among the three
chains as ``examples/supermarket.py`` splits them.

    python examples/supermarket/prepare_data.py --out supermarket-data

writes ``north.dat``, ``south.dat`` and ``east.dat`` (FIMI: one basket per line, items
as numbers); in a real consortium each chain exports its own file on its own host.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ppdm.data import retail_sample
from ppdm.mining.readers import from_transactions, write_fimi

CHAINS = ["north", "south", "east"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="supermarket-data", help="folder for the files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    baskets = retail_sample()
    owner = np.random.default_rng(1).integers(0, len(CHAINS), len(baskets))
    for i, chain in enumerate(CHAINS):
        mine = [b for b, o in zip(baskets, owner, strict=True) if o == i]
        write_fimi(from_transactions(mine), out / f"{chain}.dat")
        print(f"{chain}: {len(mine)} baskets")


if __name__ == "__main__":
    main()
