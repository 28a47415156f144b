"""mlxtend's call forms on ppdm's miners, for notebooks.

``from ppdm.mining import apriori, fpgrowth`` gives functions with the signatures and the
defaults of ``mlxtend.frequent_patterns.apriori`` and ``fpgrowth`` (``use_colnames=False``
reports column positions, as mlxtend does), so code written for mlxtend runs unchanged and
returns an equal frame; :func:`ppdm.mining.rules.association_rules_df` is the counterpart
of mlxtend's ``association_rules``. Both miners run :func:`ppdm.mining.itemsets.
frequent_itemsets_df` (the compiled Eclat kernel when built), so they give the same
itemsets; the names only follow mlxtend.
"""

from __future__ import annotations

from typing import Any

from ppdm.mining.itemsets import frequent_itemsets_df

__all__ = ["apriori", "fpgrowth"]


def apriori(
    df: Any,
    min_support: float = 0.5,
    use_colnames: bool = False,
    max_len: int | None = None,
    verbose: int = 0,
    low_memory: bool = False,
    n_jobs: int = 1,
) -> Any:
    """``mlxtend.frequent_patterns.apriori``'s signature: frequent itemsets of the one-hot
    DataFrame ``df`` (columns ``support``, ``itemsets``).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"bread": [True, True, False], "milk": [True, False, True]})
    >>> apriori(df, min_support=0.6, use_colnames=True)
        support            itemsets
    0  0.666667  frozenset({bread})
    1  0.666667   frozenset({milk})
    >>> apriori(df, min_support=0.6)["itemsets"].tolist()
    [frozenset({0}), frozenset({1})]
    """
    return frequent_itemsets_df(
        df,
        min_support,
        use_colnames=use_colnames,
        max_len=max_len,
        verbose=verbose,
        low_memory=low_memory,
        n_jobs=n_jobs,
    )


def fpgrowth(
    df: Any,
    min_support: float = 0.5,
    null_values: bool = False,
    use_colnames: bool = False,
    max_len: int | None = None,
    verbose: int = 0,
) -> Any:
    """``mlxtend.frequent_patterns.fpgrowth``'s signature (see :func:`apriori`)."""
    return frequent_itemsets_df(
        df,
        min_support,
        use_colnames=use_colnames,
        max_len=max_len,
        verbose=verbose,
        null_values=null_values,
    )
