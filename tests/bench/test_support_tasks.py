"""The scores the operator benchmarks give both tools (bench/harness/support_tasks.py): pure, no gateway."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.harness.support_tasks import QUEUES, routing_accuracy, share_positive

TEAMS = pd.Series({1: "billing", 2: "technical", 3: "other"}, name="team")


def test_a_message_routed_to_a_queue_of_its_team_is_right_and_other_is_right_with_no_match() -> None:
    assert routing_accuracy([(1, "q0"), (2, "q4")], TEAMS) == 1.0


def test_a_pairwise_join_that_matches_every_queue_scores_no_message_right() -> None:
    everything = [(i, q) for i in TEAMS.index for q in QUEUES.index]
    assert routing_accuracy(everything, TEAMS) == 0.0


def test_several_queues_of_the_same_team_count_as_one_right_routing() -> None:
    assert routing_accuracy([(1, "q0"), (1, "q1"), (2, "q3"), (3, "q9")], TEAMS) == pytest.approx(2 / 3)


def test_a_pair_naming_an_unlabelled_message_fails_naming_the_field() -> None:
    with pytest.raises(ValueError, match="pairs: left id 99"):
        routing_accuracy([(99, "q0")], TEAMS)


def test_share_positive_is_the_labelled_share_of_the_chosen_rows() -> None:
    urgent = pd.Series({1: True, 2: False, 3: True, 4: False})
    assert share_positive([1, 2, 3], urgent) == pytest.approx(2 / 3)


def test_share_positive_of_no_chosen_rows_fails_instead_of_guessing() -> None:
    with pytest.raises(ValueError, match="chosen: no rows"):
        share_positive([], pd.Series({1: True}))
