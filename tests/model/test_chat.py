"""Chat templates rendered as Hugging Face transformers renders them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.engine.runner import ModelInfo
from pier.model.chat import CHATML, ChatTemplate, TemplateError

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_chatml_with_generation_prompt() -> None:
    text = ChatTemplate(CHATML).render(HELLO)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert not ChatTemplate(CHATML).render(HELLO, add_generation_prompt=False).endswith("assistant\n")


def test_block_tags_leave_no_stray_whitespace() -> None:
    # trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before one.
    source = "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}"
    assert ChatTemplate(source).render(HELLO) == "[Hi]\n"


def test_special_tokens_and_extra_variables() -> None:
    source = "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}{{ flavor }}"
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    assert template.render(HELLO, flavor="!") == "<s>Be brief.</s>Hi</s>!"


def test_raise_exception_is_a_clear_template_error() -> None:
    source = "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    with pytest.raises(TemplateError, match="rejected the conversation: System role not supported") as error:
        ChatTemplate(source).render(HELLO)
    assert error.value.param == "messages"


def test_tojson_is_plain_json_not_html_escaped() -> None:
    tools = [{"name": "lt", "description": "a < b & c"}]
    template = ChatTemplate("{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}")
    assert template.render(HELLO, tools=tools) == (
        '[{"name": "lt", "description": "a < b & c"}]|{\n  "name": "lt",\n  "description": "a < b & c"\n}'
    )


def test_strftime_now_loop_controls_and_generation_blocks() -> None:
    source = (
        "{{ strftime_now('%Y') }}|{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}"
        "{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}"
    )
    year, rest = ChatTemplate(source).render(HELLO).split("|")
    assert year.isdigit() and len(year) == 4 and rest == "Hi"


def test_the_sandbox_blocks_python_internals() -> None:
    with pytest.raises(TemplateError):
        ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}").render(HELLO)
    with pytest.raises(TemplateError):
        ChatTemplate("{% set xs = [] %}{{ xs.append(1) }}").render(HELLO)


def test_a_template_that_breaks_on_the_messages_says_so() -> None:
    with pytest.raises(TemplateError, match=r"could not render|failed on these messages"):
        ChatTemplate(CHATML).render([{"role": "user", "content": None}])


def test_invalid_template_source() -> None:
    with pytest.raises(ValueError, match="not valid jinja2"):
        ChatTemplate("{% for m in messages %}")


def info(path: str, template: str | None) -> ModelInfo:
    return ModelInfo(name="m", path=path, n_vocab=10, n_ctx_train=64, bos=1, eos=2, add_bos=True,
                     chat_template=template)


def test_a_model_without_template_gets_chatml() -> None:
    template = ChatTemplate.for_model(info("<none>", None))
    assert template.source == CHATML and template.bos_token == ""


@pytest.mark.e2e
def test_special_token_texts_come_from_the_gguf(tiny_gguf: Path) -> None:
    from gguf import GGUFReader

    field = GGUFReader(tiny_gguf).fields["tokenizer.ggml.tokens"]
    texts = [bytes(field.parts[field.data[i]]).decode() for i in (1, 2)]
    template = ChatTemplate.for_model(info(str(tiny_gguf), "{{ bos_token }}"))
    assert (template.bos_token, template.eos_token) == tuple(texts)
    assert template.bos_token  # llama.cpp detokenizes it to "", the template needs its text
