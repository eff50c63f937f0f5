from __future__ import annotations

import httpx


def test_models_lists_every_model_for_an_unrestricted_key(gateway) -> None:
    r = httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {gateway.api_key}"})
    assert r.status_code == 200
    ids = [m["id"] for m in r.json()["data"]]
    assert "local/gemma-3-270m" in ids and "local/decide-e5-small" in ids
    assert r.headers["x-request-id"].startswith("req_")


def test_models_list_each_local_models_input_limit(gateway) -> None:
    r = httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {gateway.api_key}"})
    limits = {m["id"]: m.get("max_input_tokens") for m in r.json()["data"]}
    assert limits["local/decide-e5-small"] == 512  # one multilingual-e5-small window
    assert limits["local/gemma-3-270m"] == 2047  # llama.cpp's 2048-token context, one token left to answer
    assert limits["local/smollm2-135m-instruct"] == 4095  # its 8192 served at 4096, one token left to answer


def test_models_lists_each_abilitys_default_first(gateway) -> None:
    from gwlab.wire.models import DEFAULT_MODELS

    r = httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {gateway.api_key}"})
    chat_models = [m["id"] for m in r.json()["data"] if "chat" in m["supports"]]
    assert chat_models[0] == DEFAULT_MODELS["text"]  # a client taking the first chat model gets the default


def test_models_say_whether_each_decision_models_probabilities_are_calibrated_and_on_what(gateway) -> None:
    r = httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {gateway.api_key}"})
    calibration = {m["id"]: m.get("calibration") for m in r.json()["data"]}["local/decide-e5-small"]
    assert calibration["noul"]["calibrated"] is True and calibration["noul"]["method"] == "platt"
    assert calibration["noul"]["fitted_on"].endswith("decision_calibration.json")
    assert calibration["noul"]["examples"] >= 300 and "support" not in calibration["noul"]["domains"]
    assert calibration["choice"]["calibrated"] is False and calibration["score"]["calibrated"] is False
