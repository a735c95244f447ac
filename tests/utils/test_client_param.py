"""ClientParam: the original's fields and ranges plus the additions, immutable."""

import dataclasses
import pickle

import pytest

from mx_rag.errors import ParameterError
from mx_rag.utils import ClientParam


def test_defaults_match_the_original() -> None:
    p = ClientParam()
    assert (p.use_http, p.ca_file, p.crl_file, p.timeout, p.response_limit_size) == (False, "", "", 60, 1024 * 1024)
    assert (p.api_key, dict(p.headers), p.retries, p.deadline) == (None, {}, 3, None)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"use_http": "yes"}, "use_http"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": 601}, "timeout"),
        ({"response_limit_size": 0}, "response_limit_size"),
        ({"response_limit_size": 10 * 1024 * 1024 + 1}, "response_limit_size"),
        ({"ca_file": 3}, "ca_file"),
        ({"ca_file": "x" * 1025}, "ca_file"),
        ({"key_file": "k.pem"}, "cert_file"),
        ({"api_key": ""}, "api_key"),
        ({"headers": {"X-A": "1\r\nInjected: yes"}}, "headers"),
        ({"headers": {f"h{i}": "v" for i in range(101)}}, "headers"),
        ({"headers": ["a"]}, "headers"),
        ({"retries": -1}, "retries"),
        ({"retries": 11}, "retries"),
        ({"deadline": 0}, "deadline"),
        ({"connect_timeout": -1}, "connect_timeout"),
        ({"backoff": 61}, "backoff"),
    ],
)
def test_out_of_range_values_name_the_parameter(kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        ClientParam(**kwargs)


def test_is_immutable_and_copies_headers() -> None:
    headers = {"X-A": "1"}
    p = ClientParam(headers=headers)
    headers["X-A"] = "2"
    assert p.headers["X-A"] == "1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.timeout = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.headers["X-B"] = "3"  # type: ignore[index]


def test_request_headers_and_pickle() -> None:
    p = ClientParam(api_key="k", headers={"X-A": "1"})
    assert p.request_headers() == {"Content-Type": "application/json", "X-A": "1", "Authorization": "Bearer k"}
    assert pickle.loads(pickle.dumps(p)) == p
