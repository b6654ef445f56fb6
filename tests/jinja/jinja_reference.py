#!/usr/bin/env python3
"""tests/jinja/jinja_reference.py — ctest jinja_reference (label cpu) and jinja_reference_transformers (label
gpu, with --require-transformers): renders every chat template of --templates (the real Llama 3.1, Llama 3.2,
Qwen2.5 and Qwen3 templates, copied byte for byte from llama.cpp's models/templates: meta-llama-Llama-3.1-8B-
Instruct.jinja, meta-llama-Llama-3.2-3B-Instruct.jinja, Qwen-Qwen2.5-7B-Instruct.jinja, Qwen-Qwen3-0.6B.jinja,
which hold the models' tokenizer_config.json "chat_template") with every conversation below, once through graphed's
jinja_render and once through a reference, and requires the same bytes. The reference is transformers' own
renderer when `transformers` imports (render_jinja_template, or _compile_jinja_template on older versions),
else jinja2 set up exactly as transformers sets it up (ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols, its tojson filter, raise_exception and strftime_now). When the reference
raises (e.g. a template's raise_exception), jinja_render must fail too, with the template's message.
Templates that call strftime_now are rendered again on a mismatch, in case the date changed in between.
Prints which reference it used, one line per template x conversation, a unified diff for each mismatch.
Usage: jinja_reference.py JINJA_RENDER --templates DIR [--require-transformers]
"""
import argparse
import datetime
import difflib
import json
import os
import subprocess
import sys
import tempfile

QWEN_SPECIAL_TOKENS = ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
                       "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
                       "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

# The special tokens transformers passes to the template (tokenizer.special_tokens_map), per fixture. The
# Qwen tokenizers have no bos_token, so their templates see it undefined.
SPECIAL_TOKENS = {
    "llama-3.1-8b-instruct.jinja": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama-3.2-3b-instruct.jinja": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen2.5-7b-instruct.jinja": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                                  "additional_special_tokens": QWEN_SPECIAL_TOKENS},
    "qwen3-0.6b.jinja": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                         "additional_special_tokens": QWEN_SPECIAL_TOKENS},
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_documents",
        "description": "Cherche des documents — « recherche » en français, 検索 in Japanese",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                "threshold": {"type": "number", "default": 0.75},
                "filters": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                            "additionalProperties": False},
                "exact": {"type": ["boolean", "null"]},
            },
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the weather like in Paris today?"}


def tool_call(name, arguments, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calls(*calls, content=""):
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tool_result(content, name="get_current_weather", call_id="call_1"):
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


PARIS_CALL = tool_call("get_current_weather", {"location": "Paris, France", "unit": "celsius"})
PARIS_RESULT = tool_result('{"temperature": 22.5, "condition": "sunny"}')
PARIS_ANSWER = {"role": "assistant", "content": "It is 22.5 °C and sunny in Paris."}
THINKING = "<think>\nThe user asks for 2 + 2.\nThat is 4.\n</think>\n\nThe answer is 4."

# (name, messages, tools, add_generation_prompt, extra template variables)
CONVERSATIONS = [
    ("system_and_user", [SYSTEM, USER], None, True, {}),
    ("user_only", [USER], None, True, {}),
    ("system_only", [SYSTEM], None, True, {}),
    ("multi_turn", [SYSTEM, {"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"},
                    USER], None, True, {}),
    ("multi_turn_no_generation_prompt", [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello!"},
                                         {"role": "user", "content": "Bye."}, {"role": "assistant", "content": "Goodbye!"}],
     None, False, {}),
    ("whitespace_quotes_unicode", [{"role": "system", "content": "  Be brief.\n\n"},
                                   {"role": "user", "content": " Héllo — 你好 😀 \"quoted\" 'single' \\ back\tslash \n"},
                                   {"role": "assistant", "content": "\n Ça va?\u3000\n"},
                                   {"role": "user", "content": "{{ not a template }} {% raw %}"}], None, True, {}),
    ("tools_available", [SYSTEM, USER], TOOLS, True, {}),
    ("tools_without_system", [USER], TOOLS, True, {}),
    ("tool_call_dict_arguments", [SYSTEM, USER, assistant_calls(PARIS_CALL), PARIS_RESULT, PARIS_ANSWER], TOOLS, False, {}),
    ("tool_call_awaiting_answer", [USER, assistant_calls(PARIS_CALL), PARIS_RESULT], TOOLS, True, {}),
    ("tool_call_string_arguments",
     [USER, assistant_calls(tool_call("get_current_weather", '{"location": "Paris, France"}')), PARIS_RESULT], TOOLS, True,
     {}),
    ("tool_call_with_content", [USER, assistant_calls(PARIS_CALL, content="Let me check the weather."), PARIS_RESULT],
     TOOLS, True, {}),
    ("tool_call_null_content", [USER, assistant_calls(PARIS_CALL, content=None), PARIS_RESULT], TOOLS, True, {}),
    ("tool_arguments_json_values",
     [USER, assistant_calls(tool_call("search_documents", {
         "query": "é\u2028\"quoted\"\\ <tag> & 'x'", "limit": 3, "threshold": 2.0, "tiny": 1e-07, "huge": 1.5e300,
         "exact": True, "missing": None, "filters": {"tags": ["a", "b"], "nested": [[], {}, [1, 2.5, "c"]]}})),
      tool_result([{"title": "Doc", "score": 0.5}], name="search_documents")], TOOLS, True, {}),
    ("tool_result_mapping", [USER, assistant_calls(PARIS_CALL), tool_result({"temperature": 22.5, "unit": "C", "ok": True})],
     TOOLS, True, {}),
    ("parallel_tool_calls",
     [USER, assistant_calls(PARIS_CALL, tool_call("get_current_weather", {"location": "Lyon, France"}, "call_2")),
      PARIS_RESULT, tool_result('{"temperature": 19}', call_id="call_2")], TOOLS, True, {}),
    ("multi_step_tools",
     [SYSTEM, USER, assistant_calls(PARIS_CALL), PARIS_RESULT,
      assistant_calls(tool_call("search_documents", {"query": "Paris weather forecast"}, "call_2")),
      tool_result("[]", name="search_documents", call_id="call_2")], TOOLS, True, {}),
    ("tool_response_as_user_message",
     [USER, {"role": "assistant", "content": "<tool_call>\n{}\n</tool_call>"},
      {"role": "user", "content": "<tool_response>\nsunny\n</tool_response>"}], TOOLS, True, {}),
    ("tools_without_user_message", [SYSTEM], TOOLS, True, {}),
    ("reasoning_in_content",
     [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": THINKING},
      {"role": "user", "content": "And 3 + 3?"}, {"role": "assistant", "content": "<think>\n6\n</think>\n\nSix."}],
     None, False, {}),
    ("reasoning_content_field",
     [{"role": "user", "content": "What is 2 + 2?"},
      {"role": "assistant", "content": "The answer is 4.", "reasoning_content": "2 + 2 = 4"}], None, False, {}),
    ("enable_thinking_false", [USER], None, True, {"enable_thinking": False}),
    ("enable_thinking_true", [USER], None, True, {"enable_thinking": True}),
    ("date_string", [SYSTEM, USER], None, True, {"date_string": "15 Mar 2025"}),
    ("date_string_with_tools", [SYSTEM, USER], TOOLS, True, {"date_string": "01 Jan 2025"}),
    ("tools_in_system_message", [SYSTEM, USER], TOOLS, True,
     {"tools_in_user_message": False, "date_string": "26 Jul 2024"}),
    ("custom_tools", [USER], None, True, {"custom_tools": [WEATHER_TOOL], "date_string": "26 Jul 2024"}),
    ("builtin_tools",
     [SYSTEM, {"role": "user", "content": "Search the web for the latest Llama release."},
      assistant_calls(tool_call("brave_search", {"query": "latest Llama release"})),
      {"role": "ipython", "content": "Llama 3.1 was released in July 2024."}], None, True,
     {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"], "date_string": "26 Jul 2024"}),
    ("empty_messages", [], None, True, {}),
]


def make_reference(require_transformers):
    """Returns (description, render(template, context) -> str) for the best reference available."""
    try:
        import transformers
        from transformers.utils import chat_template_utils
    except ImportError as error:
        if require_transformers:
            sys.exit(f"jinja_reference: --require-transformers, but transformers does not import ({error}); "
                     "fix: pip install transformers, or run the cpu test jinja_reference")
        return make_jinja2_reference()
    if hasattr(chat_template_utils, "render_jinja_template"):
        def render(template, context):
            extra = dict(context)
            messages = extra.pop("messages")
            tools = extra.pop("tools")
            documents = extra.pop("documents")
            add_generation_prompt = extra.pop("add_generation_prompt")
            result = chat_template_utils.render_jinja_template(
                conversations=[messages], tools=tools, documents=documents, chat_template=template,
                add_generation_prompt=add_generation_prompt, **extra)
            if isinstance(result, tuple):
                result = result[0]
            return result[0] if isinstance(result, list) else result
        return f"transformers {transformers.__version__} (render_jinja_template)", render

    def render_compiled(template, context):
        return chat_template_utils._compile_jinja_template(template).render(**context)
    return f"transformers {transformers.__version__} (_compile_jinja_template)", render_compiled


def make_jinja2_reference():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.now().strftime(format)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[jinja2.ext.loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = strftime_now

    def render(template, context):
        return environment.from_string(template).render(**context)
    return f"jinja2 {jinja2.__version__} set up as transformers does (transformers is not installed)", render


def render_reference(render, template, context):
    try:
        return "ok", render(template, context)
    except Exception as error:  # the template's raise_exception, an undefined value, a type error, ...
        return "error", f"{type(error).__name__}: {error}"


def render_graphed(binary, template_path, context, work_dir):
    context_path = os.path.join(work_dir, "context.json")
    with open(context_path, "w", encoding="utf-8") as file:
        json.dump(context, file, ensure_ascii=False)
    process = subprocess.run([binary, template_path, context_path], capture_output=True)
    if process.returncode == 0:
        return "ok", process.stdout.decode("utf-8")
    if process.returncode == 1:
        return "error", process.stderr.decode("utf-8", "replace").strip()
    return "crash", f"exit code {process.returncode}: {process.stderr.decode('utf-8', 'replace').strip()}"


def compare(reference, ours):
    """None when the renderings agree, else a description of the difference."""
    if reference[0] == "ok" and ours[0] == "ok":
        if reference[1] == ours[1]:
            return None
        diff = difflib.unified_diff(reference[1].splitlines(keepends=True), ours[1].splitlines(keepends=True),
                                    "reference", "jinja_render")
        return "renderings differ:\n" + "".join(line if line.endswith("\n") else line + "\n\\ no newline\n"
                                                for line in diff)
    if reference[0] == "error" and ours[0] == "error":
        message = reference[1].split(": ", 1)[1] if reference[1].startswith("TemplateError: ") else None
        if message is not None and message not in ours[1]:
            return f"both fail, but jinja_render does not repeat the template's message {message!r}: {ours[1]}"
        return None
    return f"reference: {reference[0]}: {reference[1][:2000]!r}\njinja_render: {ours[0]}: {ours[1][:2000]!r}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("jinja_render")
    parser.add_argument("--templates", required=True, help="folder of *.jinja chat templates")
    parser.add_argument("--require-transformers", action="store_true")
    arguments = parser.parse_args()

    description, render = make_reference(arguments.require_transformers)
    print(f"reference: {description}")
    names = sorted(name for name in os.listdir(arguments.templates) if name.endswith(".jinja"))
    if not names:
        sys.exit(f"jinja_reference: no *.jinja templates in {arguments.templates}")
    failures = 0
    counts = {"ok": 0, "error": 0}
    with tempfile.TemporaryDirectory() as work_dir:
        for name in names:
            template_path = os.path.join(arguments.templates, name)
            with open(template_path, encoding="utf-8", newline="") as file:
                template = file.read()
            for case, messages, tools, add_generation_prompt, extra in CONVERSATIONS:
                context = {"messages": messages, "tools": tools, "documents": None,
                           "add_generation_prompt": add_generation_prompt, **SPECIAL_TOKENS.get(name, {}), **extra}
                attempts = 2 if "strftime_now" in template else 1
                for _ in range(attempts):
                    reference = render_reference(render, template, context)
                    ours = render_graphed(arguments.jinja_render, template_path, context, work_dir)
                    problem = compare(reference, ours)
                    if problem is None:
                        break
                outcome = "same error" if reference[0] == "error" else "same text"
                print(f"{'FAIL' if problem else 'ok  '} {name} x {case}: {problem.splitlines()[0] if problem else outcome}")
                if problem:
                    failures += 1
                    print(problem)
                else:
                    counts[reference[0]] += 1
    total = len(names) * len(CONVERSATIONS)
    print(f"{total - failures}/{total} renderings match ({counts['ok']} identical texts, {counts['error']} identical "
          f"failures) over {len(names)} templates x {len(CONVERSATIONS)} conversations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
