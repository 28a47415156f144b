"""Frequent itemsets, association rules and k-means: local, and over partitioned data.

Bottom-up:

* :mod:`~ppdm.mining.transactions`, :mod:`~ppdm.mining.readers`,
  :mod:`~ppdm.mining.kernel`, :mod:`~ppdm.mining.itemsets`, :mod:`~ppdm.mining.rules` —
  local mining (the transaction database and its readers; the compiled Eclat kernel;
  Apriori, FP-growth, Eclat; rules in bulk with mlxtend's measures), used by each party
  on its own data and as the centralized reference;
* :mod:`~ppdm.mining.partition` — splitting a data set among parties;
* :mod:`~ppdm.mining.horizontal_rules` — association rules over horizontally partitioned
  transactions (Kantarcioglu & Clifton 2004);
* :mod:`~ppdm.mining.vertical_rules` — association rules over vertically partitioned
  transactions (Vaidya & Clifton 2002, 2005);
* :mod:`~ppdm.mining.kmeans` — horizontal and vertical k-means.

Notebooks: :func:`frequent_itemsets_df` and :func:`association_rules_df` take mlxtend's
arguments and return its DataFrames (``apriori`` and ``fpgrowth`` are mlxtend's call
forms, :mod:`~ppdm.mining.notebook`); distributed results have ``.to_frame()``; every
function taking transactions also takes a one-hot DataFrame or a column of item lists
(:func:`as_transaction_db`).

Aggarwal 2015, §20.5; leakage and cost of each protocol in ``docs/mining.md``.
"""

from ppdm.mining.assoc_common import AssocResult
from ppdm.mining.horizontal_rules import horizontal_association_rules
from ppdm.mining.itemsets import (
    TransactionDB,
    apriori_gen,
    as_transaction_db,
    eclat_forest,
    frequent_itemsets,
    frequent_itemsets_df,
    join_step,
    min_count,
    prune_step,
    support_counts,
)
from ppdm.mining.kernel import ItemsetForest
from ppdm.mining.kmeans import KMeansResult, horizontal_kmeans, vertical_kmeans
from ppdm.mining.notebook import apriori, fpgrowth
from ppdm.mining.partition import horizontal_split, vertical_split
from ppdm.mining.readers import from_onehot, from_transactions, read_basket_csv, read_fimi
from ppdm.mining.rules import (
    Rule,
    RuleTable,
    association_rules,
    association_rules_df,
    rule_table,
    rules_to_frame,
)
from ppdm.mining.vertical_rules import vertical_association_rules

__all__ = [
    "AssocResult",
    "ItemsetForest",
    "KMeansResult",
    "Rule",
    "RuleTable",
    "TransactionDB",
    "apriori",
    "apriori_gen",
    "as_transaction_db",
    "association_rules",
    "association_rules_df",
    "eclat_forest",
    "fpgrowth",
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
    "rule_table",
    "rules_to_frame",
    "support_counts",
    "vertical_association_rules",
    "vertical_kmeans",
    "vertical_split",
]
