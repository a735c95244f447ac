"""Polling an upload job over HTTP until it ends: one helper for the server, Ray and hostile tests."""

from __future__ import annotations

import time
from typing import Any

import httpx

JOB_WAIT_S = 180.0  # bounded, so a stuck job fails its test instead of hanging it


def wait_job(http: httpx.Client, kb: str, job: dict[str, Any], seconds: float = JOB_WAIT_S) -> dict[str, Any]:
    """Poll ``job`` of knowledge base ``kb`` through ``http`` until it is done or failed (or
    ``seconds`` pass); the last state seen. Any server will do: jobs live in the registry."""
    deadline = time.monotonic() + seconds
    while job["status"] not in ("done", "failed") and time.monotonic() < deadline:
        time.sleep(0.1)
        response = http.get(f"/v1/knowledge-bases/{kb}/jobs/{job['id']}")
        assert response.status_code == 200, response.text
        job = response.json()
    return job
