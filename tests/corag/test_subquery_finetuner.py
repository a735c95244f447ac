# SPDX-License-Identifier: Apache-2.0
"""FineTuneArguments / SubqueryFineTuner: validation, the training data, assistant-only labels,
device choice, and real CPU runs (LoRA and full) on SmolLM2-135M converted from its GGUF."""

from __future__ import annotations

import importlib.machinery
import json
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from mx_rag.corag._sft_data import IGNORE_INDEX, ChatCollator, EncodedChat, encode_chat, load_chat_samples
from mx_rag.corag.subquery_finetuner import FineTuneArguments, SubqueryFineTuner
from mx_rag.errors import ParameterError

DATA = Path(__file__).parents[1] / "data" / "multihop" / "hotpotqa_sample.json"

# Sub-query decompositions of the HotpotQA sample's questions (index into the file, sub-queries).
DECOMPOSITIONS: list[tuple[int, list[str]]] = [
    (0, ["What kind of being is a Gallu?", "What kind of being is Lilu?"]),
    (1, ["What is Christopher Nolan's profession?", "What is Sathish Kalathil's profession?"]),
    (2, ["When did Haymo of Faversham live?"]),
    (3, ["Which film was shot in Leland, North Carolina in 1986?", "Who directed Maximum Overdrive?"]),
    (4, ["In which state is Watertown International Airport?"]),
    (5, ["Which song was written after a luau in Laie, Hawaii?"]),
    (6, ["Who wrote the manuscript of BWV 1033?", "Who was the godfather of Carl Philipp Emanuel Bach?"]),
    (7, ["Who published Grace Krilanovich's first novel?"]),
    (8, ["Where was Woman's Viewpoint published?"]),
    (9, ["Who was runner-up in the 1999 World Drivers' Championship?"]),
    (10, ["When was The Exies formed?"]),
    (11, ["Who is the daughter of Jagdish Mali?"]),
]
FIRST_ANSWERS = {0: "A demon.", 1: "Film director.", 3: "Maximum Overdrive.", 6: "Carl Philipp Emanuel Bach."}


def _prompt(question: str, history: list[tuple[str, str]]) -> str:
    steps = " ".join(f"Step {i}: {q} Answer {i}: {a}" for i, (q, a) in enumerate(history, 1)) or "none"
    return f"History: {steps}\nMain question: {question}\nWrite the next sub-query."


def seed_samples() -> list[dict[str, Any]]:
    """16 samples in SampleGenerator's format: {"type", "messages": [user prompt, "SubQuery: ..."]}."""
    questions = [item["question"].strip() for item in json.loads(DATA.read_text(encoding="utf-8"))]
    samples = []
    for index, subqueries in DECOMPOSITIONS:
        history: list[tuple[str, str]] = []
        for subquery in subqueries:
            messages = [{"role": "user", "content": _prompt(questions[index], history)},
                        {"role": "assistant", "content": f"SubQuery: {subquery}"}]
            samples.append({"type": "subquery_generation", "messages": messages, "query_id": str(index)})
            history.append((subquery, FIRST_ANSWERS.get(index, "")))
    return samples


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def train_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_jsonl(tmp_path_factory.mktemp("sft") / "corag_train_samples.jsonl", seed_samples())


@pytest.fixture(scope="module")
def tokenizer(smollm2_hf_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_hf_dir)


def _training_args(out: Path, **overrides: Any) -> Any:
    from transformers import TrainingArguments

    options: dict[str, Any] = dict(output_dir=str(out), per_device_train_batch_size=2, max_steps=3, logging_steps=1,
                                   report_to="none", save_strategy="no", disable_tqdm=True, seed=0)
    options.update(overrides)
    return TrainingArguments(**options)


# -- arguments ---------------------------------------------------------------------------------


def test_import_does_not_load_torch() -> None:
    code = ("import sys, mx_rag.corag.subquery_finetuner, mx_rag.corag._sft_data, mx_rag.llm.gguf_convert; "
            "heavy = [m for m in ('torch', 'transformers', 'peft', 'accelerate') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)


def test_defaults_are_the_sdks() -> None:
    args = FineTuneArguments()
    assert (args.model_name_or_path, args.train_file, args.max_len) == ("Qwen/Qwen2.5-7B-Instruct",
                                                                         "data/aligned_train.jsonl", 2048)
    assert (args.use_lora, args.lora_r, args.lora_alpha, args.merge_lora, args.dtype) == (False, 8, 16, True, "float32")
    assert FineTuneArguments("m", None, 16).train_file is None  # positional, as in the SDK


@pytest.mark.parametrize(("field", "value"), [
    ("model_name_or_path", ""), ("model_name_or_path", 3), ("train_file", 5), ("train_file", ""),
    ("max_len", 0), ("max_len", 1.5), ("max_len", True), ("use_lora", "yes"), ("lora_r", 0),
    ("lora_alpha", 0), ("lora_dropout", 1.0), ("lora_target_modules", []), ("lora_target_modules", [""]),
    ("merge_lora", 1), ("dtype", "int8"), ("sample_types", "subquery_generation"), ("sample_types", []),
])
def test_bad_arguments_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(ParameterError, match=field):
        FineTuneArguments(**{field: value})


def test_fields_are_checked_again_by_the_tuner(train_file: Path, tmp_path: Path) -> None:
    args = FineTuneArguments(train_file=str(train_file))
    args.max_len = -1
    with pytest.raises(ParameterError, match="max_len"):
        SubqueryFineTuner(args, _training_args(tmp_path))


def test_tuner_rejects_wrong_types_and_missing_files(train_file: Path, tmp_path: Path) -> None:
    train_args = _training_args(tmp_path)
    with pytest.raises(ParameterError, match="finetune_args"):
        SubqueryFineTuner({"train_file": str(train_file)}, train_args)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="train_args"):
        SubqueryFineTuner(FineTuneArguments(train_file=str(train_file)), {"output_dir": "x"})
    with pytest.raises(ParameterError, match="train_file is None"):
        SubqueryFineTuner(FineTuneArguments(train_file=None), train_args)
    missing = tmp_path / "nowhere" / "aligned_train.jsonl"
    with pytest.raises(ParameterError, match=r"train_file .*nowhere.* does not exist"):
        SubqueryFineTuner(FineTuneArguments(train_file=str(missing)), train_args)


def test_unloadable_model_names_model_name_or_path(train_file: Path, tmp_path: Path) -> None:
    args = FineTuneArguments(model_name_or_path=str(tmp_path / "no-model"), train_file=str(train_file))
    with pytest.raises(ParameterError, match=r"model_name_or_path .*only local models"):
        SubqueryFineTuner(args, _training_args(tmp_path / "out")).train()


# -- training data -----------------------------------------------------------------------------


def test_load_accepts_both_sample_forms(tmp_path: Path) -> None:
    user = {"role": "user", "content": "q"}
    rows = [
        {"type": "subquery_generation", "messages": [user, {"role": "assistant", "content": "SubQuery: a"}],
         "query_id": "1"},
        [{"role": "observation", "content": "doc"}, user, {"role": "assistant", "content": "b"}],
        {"type": "final_answer_generation", "messages": [user, {"role": "assistant", "content": "Final Answer: c"}]},
    ]
    path = _write_jsonl(tmp_path / "s.jsonl", rows)
    path.write_text(path.read_text() + "\n   \n", encoding="utf-8")  # blank lines are skipped
    samples = load_chat_samples(path)
    assert [s[-1]["content"] for s in samples] == ["SubQuery: a", "b", "Final Answer: c"]
    assert samples[1][0] == {"role": "system", "content": "doc"}  # observation -> system, as the SDK does
    only = load_chat_samples(path, ["subquery_generation"])
    assert [s[-1]["content"] for s in only] == ["SubQuery: a"]
    with pytest.raises(ParameterError, match="no training samples of types"):
        load_chat_samples(path, ["subanswer_generation"])


@pytest.mark.parametrize(("content", "match"), [
    ('{"messages": [{"role": "user", "content": "q"}]}\n{not json}\n', "line 2: not valid JSON"),
    ('{"messages": [{"role": "user"}]}\n', "line 1: message 0"),
    ('{"type": "x"}\n', "line 1: expected a non-empty list"),
    ("\n\n", "holds no training samples"),
])
def test_malformed_files_say_where(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ParameterError, match=match):
        load_chat_samples(path)


def test_collator_pads_right_with_ignored_labels() -> None:
    batch = ChatCollator(pad_token_id=0)([EncodedChat([5, 6, 7], [-100, 6, 7]), {"input_ids": [8], "labels": [8]}])
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 6, 7], [8, -100, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def _supervised_runs(tokenizer: Any, encoded: EncodedChat) -> list[str]:
    """The decoded runs of consecutive labelled tokens."""
    runs: list[list[int]] = []
    previous = IGNORE_INDEX
    for label in encoded.labels:
        if label != IGNORE_INDEX:
            if previous == IGNORE_INDEX:
                runs.append([])
            runs[-1].append(label)
        previous = label
    return [tokenizer.decode(run) for run in runs]


@pytest.mark.slow
def test_labels_cover_exactly_the_assistant_turns(tokenizer: Any) -> None:
    messages = seed_samples()[1]["messages"]
    encoded = encode_chat(tokenizer, messages, 128)
    assert encoded is not None
    assert all(label in (token, IGNORE_INDEX) for token, label in zip(encoded.input_ids, encoded.labels, strict=True))
    end = tokenizer.eos_token
    assert end == "<|im_end|>"
    assert _supervised_runs(tokenizer, encoded) == [messages[1]["content"] + end]
    # the input is the chat template's rendering, system prompt and assistant header included
    assert tokenizer.decode(encoded.input_ids) == tokenizer.apply_chat_template(messages, tokenize=False)
    # several assistant turns are all supervised; tokenizing piece by piece gives the same result
    dialogue = [{"role": "system", "content": "Decompose questions."}, {"role": "user", "content": "Who?"},
                {"role": "assistant", "content": "SubQuery: who is it?"}, {"role": "user", "content": "And?"},
                {"role": "assistant", "content": "SubQuery: and then?"}]
    both = encode_chat(tokenizer, dialogue, 128)
    assert both is not None
    assert _supervised_runs(tokenizer, both) == ["SubQuery: who is it?" + end, "SubQuery: and then?" + end]
    assert encode_chat(tokenizer, dialogue, 128, use_offsets=False) == both


@pytest.mark.slow
def test_chatml_fallback_truncation_and_unlabelled_samples(tokenizer: Any) -> None:
    import copy

    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None  # no template: ChatML, as the SDK hard-codes
    messages = [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "SubQuery: A?"}]
    encoded = encode_chat(plain, messages, 64)
    assert encoded is not None
    assert plain.decode(encoded.input_ids).startswith("<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n")
    assert _supervised_runs(plain, encoded) == ["SubQuery: A?<|im_end|>"]
    full = encode_chat(tokenizer, messages, 1024)
    assert full is not None
    keep = len(full.input_ids) - 3  # cuts "\n", <|im_end|> and the last content token
    cut = encode_chat(tokenizer, messages, keep)
    assert cut is not None and cut.input_ids == full.input_ids[:keep] and cut.labels == full.labels[:keep]
    assert cut.supervised == full.supervised - 2
    assert encode_chat(tokenizer, messages, 8) is None  # the assistant turn is cut off entirely
    assert encode_chat(tokenizer, messages[:1], 64) is None  # nothing to learn


@pytest.mark.slow
def test_every_sample_truncated_away_names_max_len(smollm2_hf_dir: Path, train_file: Path, tmp_path: Path) -> None:
    args = FineTuneArguments(model_name_or_path=str(smollm2_hf_dir), train_file=str(train_file), max_len=4)
    with pytest.raises(ParameterError, match="max_len=4"):
        SubqueryFineTuner(args, _training_args(tmp_path)).train()


# -- GGUF conversion ---------------------------------------------------------------------------


def test_gguf_conversion_rejects_bad_arguments(tmp_path: Path) -> None:
    from mx_rag.llm.gguf_convert import gguf_to_transformers

    with pytest.raises(ParameterError, match="gguf_path"):
        gguf_to_transformers(tmp_path / "missing.gguf", tmp_path / "out")
    with pytest.raises(ParameterError, match="dtype"):
        gguf_to_transformers(tmp_path / "missing.gguf", tmp_path / "out", dtype="int4")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_gguf_conversion_is_kept_and_reused(smollm2_hf_dir: Path) -> None:
    from mx_rag.llm.gguf_convert import gguf_to_transformers
    from mx_rag.llm.local_server import default_model_path

    marker = json.loads((smollm2_hf_dir / "mx_rag_build.json").read_text())
    source = default_model_path()
    assert (marker["source"], marker["source_size"], marker["dtype"]) == (source.name, source.stat().st_size,
                                                                          "float32")
    config = json.loads((smollm2_hf_dir / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    start = time.perf_counter()
    assert gguf_to_transformers(source, smollm2_hf_dir) == smollm2_hf_dir
    assert time.perf_counter() - start < 10.0  # already converted: nothing is redone (a conversion takes ~1 min)
    assert not list(smollm2_hf_dir.parent.glob(".*.tmp-*"))  # no half-written build left behind


# -- device choice -----------------------------------------------------------------------------


def test_cpu_only_sets_use_cpu_on_a_copy(tmp_path: Path) -> None:
    from mx_rag.corag.subquery_finetuner import prepare_training_args

    original = _training_args(tmp_path)
    prepared = prepare_training_args(original, None)
    assert prepared.use_cpu and prepared.device.type == "cpu"
    assert not original.use_cpu and original.device.type == "cpu"


def test_a_device_chosen_by_the_user_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from mx_rag.corag import subquery_finetuner as module

    chosen: list[Any] = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(module, "_distributed", lambda: False)
    original = _training_args(tmp_path)
    prepared = module.prepare_training_args(original, ("cuda", 1))  # as after torch.cuda.set_device(1)
    assert prepared.device == torch.device("cuda", 1) and prepared.n_gpu == 1
    assert chosen[-1] == torch.device("cuda", 1)
    assert original.device.type == "cpu"  # the caller's arguments are untouched
    # device 0 (the seed's torch.npu.set_device(0)) is left to transformers
    assert module.prepare_training_args(original, ("cuda", 0)).device.type == "cpu"


def test_npu_is_detected_through_torch_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from mx_rag.corag.subquery_finetuner import detect_accelerator

    fake = types.ModuleType("torch_npu")
    fake.__spec__ = importlib.machinery.ModuleSpec("torch_npu", None)
    monkeypatch.setitem(sys.modules, "torch_npu", fake)
    npu = types.SimpleNamespace(is_available=lambda: True, current_device=lambda: 3)
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    assert detect_accelerator() == ("npu", 3)
    npu.is_available = lambda: False
    assert detect_accelerator() != ("npu", 3)


# -- real runs on SmolLM2-135M -----------------------------------------------------------------


def _reload(model_dir: Path, batch: dict[str, Any]) -> tuple[float, str]:
    """Reload a saved model with AutoModelForCausalLM: its loss on ``batch`` and a greedy reply."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    prompt = tok.apply_chat_template([{"role": "user", "content": _prompt("Who founded YouTube?", [])}],
                                     add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        loss = float(model(**batch).loss)
        out = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    return loss, str(tok.decode(out[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True))


@pytest.fixture(scope="module")
def probe(tokenizer: Any, smollm2_hf_dir: Path) -> tuple[dict[str, Any], float]:
    """A batch of two training samples and the untrained model's (assistant-only) loss on it."""
    encoded = [encode_chat(tokenizer, s["messages"], 128) for s in seed_samples()[:2]]
    batch = ChatCollator(tokenizer.pad_token_id)([e for e in encoded if e is not None])
    return batch, _reload(smollm2_hf_dir, batch)[0]


def _train(smollm2_hf_dir: Path, train_file: Path, out: Path, **options: Any) -> tuple[SubqueryFineTuner, float]:
    names = ("learning_rate", "max_steps", "gradient_checkpointing", "per_device_train_batch_size")
    training = {name: options.pop(name) for name in names if name in options}
    args = FineTuneArguments(model_name_or_path=str(smollm2_hf_dir), train_file=str(train_file), max_len=128,
                             **options)
    tuner = SubqueryFineTuner(args, _training_args(out, **training))
    start = time.perf_counter()
    tuner.train()
    return tuner, time.perf_counter() - start


def _logged_losses(tuner: SubqueryFineTuner) -> list[float]:
    return [entry["loss"] for entry in tuner.trainer.state.log_history if "loss" in entry]


def _step_seconds(tuner: SubqueryFineTuner) -> float:
    runtime = [entry["train_runtime"] for entry in tuner.trainer.state.log_history if "train_runtime" in entry]
    return float(runtime[-1]) / tuner.trainer.state.global_step


# a loaded 2-CPU machine can take minutes for these; the suite's 300 s default is too tight
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_lora_run_lowers_the_loss_and_saves_a_merged_model(
        smollm2_hf_dir: Path, train_file: Path, tmp_path: Path, probe: tuple[dict[str, Any], float]) -> None:
    batch, before = probe
    out = tmp_path / "lora"
    tuner, seconds = _train(smollm2_hf_dir, train_file, out, use_lora=True, lora_target_modules=["q_proj", "v_proj"],
                            learning_rate=2e-3)
    losses = _logged_losses(tuner)
    after, reply = _reload(out, batch)  # the merged model reloads with AutoModelForCausalLM and generates
    print(f"\nLoRA r=8 q/v, batch 2: {_step_seconds(tuner):.1f} s/step ({seconds:.0f} s in train()), "
          f"logged losses {[round(x, 3) for x in losses]}, probe loss {before:.3f} -> {after:.3f}, reply {reply!r}")
    assert len(losses) == 3
    assert after < before - 0.1
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert not (out / "adapter_config.json").exists()
    assert json.loads((out / "config.json").read_text())["use_cache"] is True
    assert reply.strip()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_full_run_lowers_the_loss(smollm2_hf_dir: Path, train_file: Path, tmp_path: Path,
                                  probe: tuple[dict[str, Any], float]) -> None:
    batch, before = probe
    out = tmp_path / "full"
    tuner, seconds = _train(smollm2_hf_dir, train_file, out, learning_rate=1e-4, max_steps=2)  # costlier steps
    losses = _logged_losses(tuner)
    after, reply = _reload(out, batch)
    print(f"\nfull fine-tune, batch 2: {_step_seconds(tuner):.1f} s/step ({seconds:.0f} s in train()), "
          f"logged losses {[round(x, 3) for x in losses]}, probe loss {before:.3f} -> {after:.3f}, reply {reply!r}")
    assert len(losses) == 2 and losses[-1] < losses[0]
    assert after < before - 0.1
    assert reply.strip()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_lora_adapter_only_with_activation_checkpointing(smollm2_hf_dir: Path, train_file: Path,
                                                         tmp_path: Path) -> None:
    from peft import AutoPeftModelForCausalLM

    out = tmp_path / "adapter"
    tuner, _ = _train(smollm2_hf_dir, train_file, out, use_lora=True, merge_lora=False, lora_r=4,
                      lora_target_modules=["q_proj"], max_steps=1, per_device_train_batch_size=1,
                      gradient_checkpointing=True)  # as in the SDK's example
    assert _logged_losses(tuner)[0] > 0
    assert (out / "adapter_config.json").is_file() and (out / "tokenizer.json").is_file()
    assert not (out / "model.safetensors").exists()
    model = AutoPeftModelForCausalLM.from_pretrained(out)
    assert model.peft_config["default"].r == 4
