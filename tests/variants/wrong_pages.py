"""A paged variant that exists only in the tests and reads a wrong page: request 0's first page is taken from
request 1's. The float32 check must call its cells incorrect (issue 38)."""

from __future__ import annotations

from dataclasses import replace

from runner.registry import Requires, Staged, variant
from runner.shape import Params


@variant("test_wrong_page", requires=Requires(options=("kv_lengths", "page_size")), backend="xla")
def wrong_page(p: Params):
    """xla_paged with request 0's first table entry pointing at request 1's first page."""
    from runner.variants.paged_gather import xla_paged

    paged = xla_paged(p)

    def prepare(q, k, v):
        q, k_pages, v_pages, table, lengths = paged.prepare(q, k, v)
        return q, k_pages, v_pages, table.at[0, 0].set(table[1, 0]), lengths

    return replace(paged, prepare=prepare) if isinstance(paged, Staged) else paged
