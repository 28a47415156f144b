"""Frequent itemsets, association rules and k-means: local, and over partitioned data.

Bottom-up:

* :mod:`~ppdm.mining.itemsets`, :mod:`~ppdm.mining.rules`, :mod:`~ppdm.mining.readers` —
  local mining (Apriori, FP-growth, Eclat; rules with support, confidence, lift), used by
  each party on its own data and as the centralized reference;
* :mod:`~ppdm.mining.partition` — splitting a data set among parties;
* :mod:`~ppdm.mining.horizontal_rules` — association rules over horizontally partitioned
  transactions (Kantarcioglu & Clifton 2004);
* :mod:`~ppdm.mining.vertical_rules` — association rules over vertically partitioned
  transactions (Vaidya & Clifton 2002, 2005);
* :mod:`~ppdm.mining.kmeans` — horizontal and vertical k-means.

Notebooks: :func:`frequent_itemsets_df` and :func:`association_rules_df` return pandas
DataFrames in mlxtend's layout, and every function taking transactions also takes a
one-hot DataFrame or a column of item lists (:func:`as_transaction_db`).

Seed 000 section 20.5; leakage and cost of each protocol in ``docs/mining.md``.
"""

from ppdm.mining.assoc_common import AssocResult
from ppdm.mining.horizontal_rules import horizontal_association_rules
from ppdm.mining.itemsets import (
    TransactionDB,
    apriori_gen,
    as_transaction_db,
    frequent_itemsets,
    frequent_itemsets_df,
    join_step,
    min_count,
    prune_step,
    support_counts,
)
from ppdm.mining.kmeans import KMeansResult, horizontal_kmeans, vertical_kmeans
from ppdm.mining.partition import horizontal_split, vertical_split
from ppdm.mining.readers import from_onehot, from_transactions, read_basket_csv, read_fimi
from ppdm.mining.rules import Rule, association_rules, association_rules_df, rules_to_frame
from ppdm.mining.vertical_rules import vertical_association_rules

__all__ = [
    "AssocResult",
    "KMeansResult",
    "Rule",
    "TransactionDB",
    "apriori_gen",
    "as_transaction_db",
    "association_rules",
    "association_rules_df",
    "frequent_itemsets",
    "frequent_itemsets_df",
    "from_onehot",
    "from_transactions",
    "horizontal_association_rules",
    "horizontal_kmeans",
    "horizontal_split",
    "join_step",
    "min_count",
    "prune_step",
    "read_basket_csv",
    "read_fimi",
    "rules_to_frame",
    "support_counts",
    "vertical_association_rules",
    "vertical_kmeans",
    "vertical_split",
]
