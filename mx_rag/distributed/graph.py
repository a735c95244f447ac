# SPDX-License-Identifier: Apache-2.0
"""A graph knowledge base's entity extraction on a Ray cluster: ``RayExtractor``.

``RayExtractor`` is an ``Extractor`` (``mx_rag.graphrag.extraction``): give it to
``GraphRAGPipeline.build_graph(extractor=...)`` and each batch of chunks the build extracts is cut
into parts, one per actor, that ``actors`` actors on the cluster extract at once (each makes its
extractor once: spaCy's model, an LLM client). Everything else is the pipeline's own build: it
caches the extractions of each batch by chunk hash (a rerun extracts only what is missing), then
journals the change and writes it into the graph store in one transaction, then the chunk
registry and the vectors, and a journal left by a killed process is applied again when the
pipeline next opens (``GraphRAGPipeline._apply``). Extraction is a pure function of a chunk's
text, so an actor Ray restarts (``max_restarts``) and whose calls it runs again
(``max_task_retries``) returns the same extractions: nothing is written twice or lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mx_rag.distributed.ingest import connect
from mx_rag.errors import ParameterError
from mx_rag.graphrag.extraction import Chunk, Extraction, Extractor
from mx_rag.utils.checks import check_int, check_number

__all__ = ["ExtractActor", "RayExtractor"]

MIN_PART = 4  # chunks per actor call at least (fewer: one call carries more overhead than work)
START_S = 300.0  # the actors must have made their extractors by then (a cluster without free CPUs never does)


class ExtractActor:
    """An extraction actor: the extractor is made once, in ``__init__``.

    Args:
        factory: makes the ``Extractor``; called once per actor (and again when Ray restarts it).
    """

    def __init__(self, factory: Callable[[], Extractor]) -> None:
        self.extractor = factory()

    def ready(self) -> bool:
        """True once the extractor is made (what ``RayExtractor.start`` waits for)."""
        return True

    def extract(self, chunks: list[tuple[str, str]]) -> list[Extraction]:
        return list(self.extractor.extract([Chunk(i, text) for i, text in chunks]))


class RayExtractor:
    """An ``Extractor`` whose batches are extracted by ``actors`` actors on the cluster at ``address``.

    Use it as a context manager (or call ``start`` and ``close``); ``extract`` starts it if needed.

    Args:
        factory: makes the extractor each actor runs (``OfflineExtractor``, or a function that
            builds an ``LLMExtractor``); pickled to the cluster.
        address: the cluster (``auto``: the one this machine belongs to).
        actors: extraction actors, 1 to 1024.
        cpus: CPUs each actor reserves, 0.01 to 256 (a fraction for actors that wait on an LLM).
    """

    def __init__(self, factory: Callable[[], Extractor], *, address: str = "auto", actors: int = 2,
                 cpus: float = 1.0) -> None:
        if not callable(factory):
            raise ParameterError(f"factory must be a callable that makes an Extractor, got {factory!r:.80}")
        self.factory, self.address = factory, address
        self.actors = check_int("actors", actors, 1, 1024)
        self.cpus = check_number("cpus", cpus, 0.01, 256)
        self._ray: Any = None
        self._actors: list[Any] = []

    def __enter__(self) -> RayExtractor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the actors and wait until each has made its extractor.

        Raises:
            ExtraNotInstalledError: Ray is not installed (``mxrag[ray]``).
        """
        if self._actors:
            return
        ray = self._ray = connect(self.address)
        actor = ray.remote(ExtractActor).options(num_cpus=self.cpus, max_restarts=-1, max_task_retries=-1,
                                                 scheduling_strategy="SPREAD")
        self._actors = [actor.remote(self.factory) for _ in range(self.actors)]
        try:
            ray.get([a.ready.remote() for a in self._actors], timeout=START_S)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise ParameterError(f"{self.actors} extraction actors of {self.cpus} CPUs did not start within "
                                 f"{START_S:.0f} s: the cluster lacks free CPUs for them (fewer actors, or fewer CPUs "
                                 "each)") from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop the actors (it can be started again)."""
        for actor in self._actors:
            self._ray.kill(actor, no_restart=True)
        self._actors = []

    def extract(self, chunks: Sequence[Chunk]) -> list[Extraction]:
        """One ``Extraction`` per chunk, in order; the parts of the batch run on the actors at once."""
        self.start()
        size = max(MIN_PART, -(-len(chunks) // len(self._actors)))
        parts = [[(c.id, c.text) for c in chunks[i:i + size]] for i in range(0, len(chunks), size)]
        refs = [self._actors[n % len(self._actors)].extract.remote(part) for n, part in enumerate(parts)]
        return [result for part in self._ray.get(refs) for result in part]
