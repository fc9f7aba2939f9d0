"""Noeta's search attributes as typed keys, for the workflow that sets them and the clients that
list tasks by them (names in :mod:`noeta.protocols.names`)."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

from noeta.protocols.names import (
    SA_API_KEY,
    SA_COST_USD,
    SA_EVAL,
    SA_FORKED_FROM,
    SA_GOAL,
    SA_METADATA,
    SA_MODEL,
    SA_SCHEDULED_BY,
    SA_SCORE,
    SA_STATUS,
    SA_TENANT,
    SA_TOKENS_IN,
    SA_TOKENS_OUT,
    SA_TURNS,
)

STATUS = SearchAttributeKey.for_keyword(SA_STATUS)
MODEL = SearchAttributeKey.for_keyword(SA_MODEL)
TURNS = SearchAttributeKey.for_int(SA_TURNS)
TOKENS_IN = SearchAttributeKey.for_int(SA_TOKENS_IN)
TOKENS_OUT = SearchAttributeKey.for_int(SA_TOKENS_OUT)
COST_USD = SearchAttributeKey.for_float(SA_COST_USD)
API_KEY = SearchAttributeKey.for_keyword(SA_API_KEY)
GOAL = SearchAttributeKey.for_text(SA_GOAL)
METADATA = SearchAttributeKey.for_keyword_list(SA_METADATA)
FORKED_FROM = SearchAttributeKey.for_keyword(SA_FORKED_FROM)
TENANT = SearchAttributeKey.for_keyword(SA_TENANT)
EVAL = SearchAttributeKey.for_keyword(SA_EVAL)
SCORE = SearchAttributeKey.for_float(SA_SCORE)
SCHEDULED_BY = SearchAttributeKey.for_keyword(SA_SCHEDULED_BY)

__all__ = ["API_KEY", "COST_USD", "EVAL", "FORKED_FROM", "GOAL", "METADATA", "MODEL", "SCHEDULED_BY", "SCORE", "STATUS", "TENANT", "TOKENS_IN", "TOKENS_OUT", "TURNS"]
