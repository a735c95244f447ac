"""LLMParameterConfig: the original's fields, defaults and ranges, checked on assignment too."""

import copy
import pickle

import pytest

from mx_rag.errors import ParameterError
from mx_rag.llm.llm_parameter import LLMParameterConfig


def test_defaults() -> None:
    cfg = LLMParameterConfig()
    assert cfg.to_dict() == {
        "max_tokens": 512, "presence_penalty": 0.0, "frequency_penalty": 0.0,
        "temperature": 1.0, "top_p": 1.0, "seed": None, "stream": False,
    }


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("max_tokens", [1, 100_000], [0, 100_001, 1.5, True, "8"]),
        ("presence_penalty", [-2.0, 2, 0.5], [-2.01, 2.01, "0"]),
        ("frequency_penalty", [-2, 2.0], [-3, 3, None]),
        ("temperature", [0, 2.0, 0.7], [-0.1, 2.1, None]),
        ("top_p", [1e-6, 1.0], [0, 0.0, 1.01]),
        ("seed", [None, 0, 2**31 - 1], [-1, 2**31, 1.0]),
        ("stream", [True, False], [1, "yes", None]),
    ],
)
def test_ranges_on_construction_and_assignment(name: str, good: list, bad: list) -> None:
    for value in good:
        assert getattr(LLMParameterConfig(**{name: value}), name) == value
    cfg = LLMParameterConfig()
    for value in bad:
        with pytest.raises(ParameterError, match=name):
            LLMParameterConfig(**{name: value})
        with pytest.raises(ValueError, match=name):
            setattr(cfg, name, value)
    assert getattr(cfg, name) == getattr(LLMParameterConfig(), name)


def test_unknown_field_rejected() -> None:
    cfg = LLMParameterConfig()
    with pytest.raises(AttributeError, match="max_token"):
        cfg.max_token = 5  # type: ignore[attr-defined]


def test_replace_copies_and_leaves_original() -> None:
    cfg = LLMParameterConfig(temperature=0.5)
    other = cfg.replace(temperature=0.0, max_tokens=9)
    assert (cfg.temperature, cfg.max_tokens) == (0.5, 512)
    assert (other.temperature, other.max_tokens) == (0.0, 9)
    with pytest.raises(ParameterError):
        cfg.replace(top_p=0)


def test_copy_pickle_equality() -> None:
    cfg = LLMParameterConfig(max_tokens=3, seed=1)
    for clone in (copy.copy(cfg), copy.deepcopy(cfg), pickle.loads(pickle.dumps(cfg))):
        assert clone == cfg and clone is not cfg
    assert "max_tokens=3" in repr(cfg)
