"""How the API shows the sources of an answer (``source_entries``): one similarity scale for all."""

from mx_rag.app.answers import source_entries


def test_a_keyword_only_passage_has_no_similarity_score() -> None:
    result = {"source_documents": [
        {"page_content": "vectors live in faiss.index", "metadata": {"source": "/d/guide.md", "score": 0.61,
                                                                    "retrieval_type": "dense", "rrf_score": 0.03}},
        {"page_content": "faiss.index holds them", "metadata": {"source": "/d/faq.md", "score": 7.84, "page": 2,
                                                               "retrieval_type": "sparse", "rrf_score": 0.016}},
    ]}
    dense, keyword = source_entries(result)
    assert dense == {"text": "vectors live in faiss.index", "score": 0.61, "source": "guide.md"}
    assert keyword == {"text": "faiss.index holds them", "score": None, "source": "faq.md", "page": 2,
                       "match": "keyword"}
