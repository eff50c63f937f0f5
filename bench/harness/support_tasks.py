"""What the operator benchmarks ask of the support messages (the queue table a merge joins them to, the
urgency criterion a top k ranks them by) and how the answers are scored.

bench/operators.py and bench/lotus_side_by_side.py give both tools the same tasks and score them the same
way, so the tasks and the scores live here once.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import pandas as pd

# three queues per label of the `team` column but "other": a message matching none of them is "other"
QUEUES = pd.DataFrame({"team": ["billing"] * 3 + ["technical"] * 3 + ["shipping"] * 3 + ["account"] * 3,
                       "description": [
    "double charges and payments taken twice", "refunds and money back", "invoices, receipts and VAT",
    "the app crashes or closes", "error messages and bugs", "slow pages and outages",
    "parcels not arrived and tracking", "damaged or wrong items delivered", "returns and delivery addresses",
    "cannot log in, passwords and verification codes", "account settings, email and profile changes",
    "closing or deleting an account"]}, index=pd.Index([f"q{i}" for i in range(12)], name="queue"))
NONE_TEAM = "other"
MERGE_CONDITION = "The message belongs in this queue"
URGENCY = "How urgent the message is"
URGENCY_LEVELS = ["a routine question", "needs an answer today", "an emergency: the customer is blocked right now"]


def routing_accuracy(pairs: Iterable[tuple[Hashable, Hashable]], teams: pd.Series,
                     queues: pd.DataFrame = QUEUES) -> float:
    """Share of messages whose matched queues' teams are exactly their labelled team (none for "other").

    A pairwise join may match one message to several queues: it is right only when they all belong to the
    message's team, so a join that says yes to everything is not rewarded.
    """
    matched: dict[Hashable, set[str]] = {i: set() for i in teams.index}
    for left, right in pairs:
        if left not in matched:
            raise ValueError(f"pairs: left id {left!r} is not a labelled message")
        matched[left].add(str(queues.at[right, "team"]))
    right = [matched[i] == ({team} if team != NONE_TEAM else set()) for i, team in teams.items()]
    return sum(right) / len(right)


def share_positive(chosen: Iterable[Hashable], labels: pd.Series) -> float:
    """Share of the chosen rows whose boolean label is true (precision at k)."""
    picked = list(chosen)
    if not picked:
        raise ValueError("chosen: no rows were chosen")
    return float(labels.loc[picked].astype(bool).mean())


def pair_truth(pairs: Iterable[tuple[Hashable, Hashable]], teams: pd.Series,
               queues: pd.DataFrame = QUEUES) -> tuple[list[bool], list[bool]]:
    """Every (message, queue) pair as (matched?, queue of the message's team?), for P/R/F1 on pairs."""
    matched = {(left, right) for left, right in pairs}
    grid = [(i, q) for i in teams.index for q in queues.index]
    return ([pair in matched for pair in grid],
            [str(queues.at[q, "team"]) == str(teams.at[i]) for i, q in grid])


def chosen_truth(chosen: Iterable[Hashable], labels: pd.Series) -> tuple[list[bool], list[bool]]:
    """Every row as (chosen?, labelled true?), for P/R/F1 of a top k on its positive label."""
    picked = set(chosen)
    return [i in picked for i in labels.index], labels.astype(bool).tolist()
